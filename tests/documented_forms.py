"""Every Neuron tool command line kernelsweep runs, in the form the reference documents it.

`{name}` marks a value; everything else must match word for word. Sources are sections of
../shared/reference/neuron-toolchain.md ("C" = its Corrections) and of ../shared/reviews/real-host-audit.md.
"""

from __future__ import annotations

import re

FORMS: dict[str, tuple[str, str]] = {
    "compiler version": ("neuronx-cc --version", "reference 2"),
    "legacy compile": (
        "neuronx-cc compile --framework XLA penguin.py --internal-tensorizer-opt-level=nki --pipeline compile "
        "SaveTemps --target {target} --output=file.neff",
        "reference C2 (nki.baremetal's command)",
    ),
    "legacy compile, trn2": (
        "neuronx-cc compile --framework XLA penguin.py --internal-tensorizer-opt-level=nki --pipeline compile "
        "SaveTemps --target trn2 --lnc {lnc} --output=file.neff",
        "reference C2, with seed 000's --lnc on trn2 (reference 2)",
    ),
    "capture": (
        "{profiler} capture -n {neff} -s profile.ntff --num-exec={n} --profile-nth-exec={m} --save-output {pairs}",
        "reference 4 and C4; audit F2 (inputs as NAME FILE pairs, last)",
    ),
    "capture, DGE notifications": (
        "{profiler} capture -n {neff} -s profile.ntff --num-exec={n} --profile-nth-exec={m} --enable-dge-notifs "
        "--save-output {pairs}",
        "SDK tools/neuron-explorer/troubleshooting.rst:229-233 and nki/guides/use-neuron-profile.rst:301,309 "
        "(real-host audit 2, N3)",
    ),
    "view summary-json": ("{profiler} view -n {neff} -s {ntff} --output-format=summary-json", "reference C5; audit 6"),
    "view json": (
        "{profiler} view -n {neff} -s {ntff} --output-format=json --output-file=profile.json",
        "reference 5 (seed 000); audit G1",
    ),
    "view parquet": (
        "neuron-explorer view -n {neff} -s {ntff} --output-format=parquet --output-file=profile_parquet "
        "--ingest-only --data-path=explorer-data",
        "reference C5; audit G3 (nki-library's --ingest-only, a scratch --data-path)",
    ),
    "profiler version": ("{profiler} --version", "reference C5; audit A4"),
    "devices": ("neuron-ls -j", "reference 4 and C6; audit B1"),
    "devices, 2.34": ("neuron-ls --output-format json", "announce-intent-eos-neuron-ls-json (2026-10-16)"),
    "profile schema, 7.x": ("neuron-explorer --show-profile-schema", "profile-schema-reference.rst at SDK 2.31.0"),
    "profile schema, 12.x": (
        "neuron-explorer view --show-profile-schema",
        "profile-schema-reference.rst at SDK 2.33.0 (nki-0.7 addendum F16)",
    ),
}


def _pattern(template: str) -> re.Pattern[str]:
    parts = re.split(r"(\{\w+\})", template)
    regex = "".join(
        (
            "(neuron-profile|neuron-explorer)"
            if p == "{profiler}"
            else r"\S+ \S+(?: \S+ \S+)*"
            if p == "{pairs}"
            else r"\S+"
        )
        if p.startswith("{")
        else re.escape(p)
        for p in parts
    )
    return re.compile(regex + "$")


PATTERNS = {key: _pattern(template) for key, (template, _) in FORMS.items()}


def documented_as(argv: list[str]) -> str | None:
    """Which documented form a command line is, or None."""
    line = " ".join(argv)
    return next((key for key, pattern in PATTERNS.items() if pattern.match(line)), None)
