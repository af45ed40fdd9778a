"""Reading a sweep file: bounded, one line for every way it can be wrong, and pydantic's errors turned
into that line (`kernels[0].grid.n[0] is '8' (text); give a whole number, without quotes`).

Apart from the models (kernelsweep.sweepspec.models) because it changes with what users get wrong in
files, not with what a sweep can say. Expanding a spec into points is kernelsweep.sweepspec.expansion.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from pydantic import ValidationError

from kernelsweep.errors import UsageError
from kernelsweep.sweepspec.messages import first_error
from kernelsweep.sweepspec.models import SweepSpec

MAX_SPEC_BYTES = 1 << 20
FLEET_TABLE = "fleet"  # a spec file's [fleet] table is for `kernelsweep fleet up` (kernelsweep.fleet.plan), not a sweep
BOM = b"\xef\xbb\xbf"  # some Windows editors write it; TOML forbids it


def load_spec(path: str | Path) -> SweepSpec:
    path = Path(path)
    try:
        if path.is_dir():
            raise UsageError(f"{path}: is a folder, not a spec file; give the sweep's .toml file")
        if path.exists() and not path.is_file():
            raise UsageError(f"{path}: is not a regular file; give the sweep's .toml file")
        size = path.stat().st_size
        if size > MAX_SPEC_BYTES:
            raise UsageError(f"{path}: {size} bytes is too large for a sweep spec (at most 1 MiB); check the path")
        raw = path.read_bytes()
        if raw.startswith(BOM):
            raise UsageError(f"{path}: the file starts with a byte-order mark; save it as UTF-8 without BOM")
        data = tomllib.loads(raw.decode("utf-8"))
    except FileNotFoundError:
        raise UsageError(f"{path}: no such spec file; check the path") from None
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not a text file (not UTF-8); give the sweep's .toml file") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot be read ({exc.strerror}); check the path and its permissions") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML ({exc}); fix the syntax") from None
    except RecursionError:
        raise UsageError(f"{path}: nested too deeply to be a sweep spec; fix the file") from None
    data.pop(FLEET_TABLE, None)
    return parse_spec(data, source=str(path))


def parse_spec(data: dict, source: str = "spec") -> SweepSpec:
    try:
        spec = SweepSpec.model_validate(data)
    except ValidationError as exc:
        raise UsageError(f"{source}: {first_error(exc, data)}") from None
    return spec
