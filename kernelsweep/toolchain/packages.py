"""The Neuron SDK's Python packages as one interpreter has them, read from their metadata.

Imported by the trace worker, which runs in the SDK's own interpreter (Python 3.10 and up, numpy and
the SDK only: kernelsweep.toolchain.tracing.interpreter), so nothing here may need more. PyPI's
`neuronx-cc` 1.0.post1 and `nki` 0.0.1 are empty placeholder wheels whose import raises
"WRONG PACKAGE": they are reported as placeholders, never as an installed SDK.
"""

from __future__ import annotations

import email.message
from dataclasses import dataclass
from importlib import metadata
from typing import cast

PLACEHOLDER_MARKER = "WRONG PACKAGE"  # the description and the ImportError text of PyPI's placeholders
PLACEHOLDER_VERSIONS = {"neuronx-cc": frozenset({"1.0.post1"}), "nki": frozenset({"0.0.1"})}
SDK_PACKAGES = ("neuronx-cc", "nki")


@dataclass(frozen=True)
class PackageVersion:
    name: str
    version: str | None  # None: not installed
    placeholder: bool = False

    @property
    def usable(self) -> bool:
        return self.version is not None and not self.placeholder

    def describe(self) -> str:
        if self.version is None:
            return f"{self.name} not installed"
        if self.placeholder:
            return f"{self.name} {self.version} (PyPI placeholder, not the Neuron SDK)"
        return f"{self.name} {self.version}"


def package_version(name: str) -> PackageVersion:
    """A distribution's version from its metadata (never imports it: placeholders raise on import)."""
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return PackageVersion(name, None)
    version = dist.version
    meta = cast(email.message.Message, dist.metadata)  # PackageMetadata is an email Message at run time
    description = str(meta.get("Description") or meta.get_payload() or "")  # where the marker lives
    placeholder = version in PLACEHOLDER_VERSIONS.get(name, ()) or PLACEHOLDER_MARKER in description
    return PackageVersion(name, version, placeholder)


def nki_version() -> str | None:
    """The `nki` package (SDK 2.27+), else the NKI bundled in neuronx-cc (`neuronxcc.nki`, <= 2.26)."""
    nki = package_version("nki")
    if nki.usable:
        return nki.version
    compiler = package_version("neuronx-cc")
    return f"neuronxcc.nki {compiler.version}" if compiler.usable else None
