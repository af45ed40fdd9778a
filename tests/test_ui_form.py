"""The sweep's run form, without a browser: the parameter schema the UI renders is typed field by
field, every spec file fits it, and a bad value reads the same in a run as on the command line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from prefect.exceptions import ParameterTypeError
from prefect.utilities.callables import parameter_schema
from prefect.utilities.schema_tools.validation import validate

from kernelsweep.flows.fleet.flow import fleet
from kernelsweep.flows.sweep import sweep
from kernelsweep.sweepspec.load import load_spec

REPO = Path(__file__).resolve().parents[1]
SPEC_FILES = sorted(REPO.glob("examples/*.toml")) + [REPO / "deployments/nightly.toml"]


def _properties(schema: dict):
    for name, model in schema["definitions"].items():
        for field, prop in model["properties"].items():
            yield f"{name}.{field}", prop


@pytest.mark.parametrize("flow", [sweep, fleet], ids=["sweep", "fleet"])
def test_the_run_form_is_typed_field_by_field(flow):
    schema = parameter_schema(flow).model_dump()
    props = dict(_properties(schema))
    assert props["SweepSpec.platforms"]["items"]["enum"] == ["trn1", "trn2", "inf2", "trn3"]  # a multi-select
    assert props["KernelGrid.kernel"]["enum"] == ["mlp", "matmul", "vector_add", "custom"]  # a dropdown
    assert props["KernelGrid.custom_kernel"]["type"] == "string"  # user kernels: module:attribute
    assert props["KernelGrid.grid"]["items"] == {"$ref": "#/definitions/GridAxis"}
    assert props["GridAxis.values"]["items"] == {"type": "integer"}
    assert props["KernelGrid.dtypes"]["items"]["enum"] == ["float32", "bfloat16", "float16"]
    assert "worker_wait_seconds" in schema["definitions"]["ExecutionSettings"]["properties"]
    free_form = [name for name, prop in props.items() if prop.get("type") == "object" or "additionalProperties" in prop]
    assert free_form == []  # nothing the UI would show as a JSON box
    assert [name for name, prop in props.items() if not prop.get("description")] == []


@pytest.mark.parametrize("path", SPEC_FILES, ids=lambda p: p.name)
def test_every_spec_file_is_a_valid_form_value_and_round_trips(path):
    spec = load_spec(path)
    value = spec.model_dump(mode="json")
    schema = parameter_schema(sweep).model_dump()
    assert validate({"spec": value}, schema, raise_on_error=True) == []  # what enforce_parameter_schema checks
    assert type(spec).model_validate(value) == spec


@pytest.mark.slow  # a whole sweep (or several) through Prefect
def test_a_bad_form_value_fails_the_run_with_the_clis_line(tmp_path):
    """profile_nth_exec past num_exec passes the form's per-field checks; the run then fails with
    the line `kernelsweep validate` prints for the same value."""
    path = tmp_path / "spec.toml"
    path.write_text(
        'name = "t"\nplatforms = ["trn2"]\n[capture]\nnum_exec = 1\nprofile_nth_exec = 2\n'
        '[[kernels]]\nkernel = "vector_add"\ndtypes = ["float32"]\ngrid = { n = [2048] }\n'
    )
    cli = subprocess.run(
        [sys.executable, "-m", "kernelsweep.flows.cli", "validate", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cli.returncode == 2
    line = cli.stderr.strip().removeprefix("error: ").removeprefix(f"{path}: ")
    assert line.startswith("capture: profile_nth_exec=2 is past num_exec=1")
    capture = {"num_exec": 1, "profile_nth_exec": 2}
    form = {"name": "t", "platforms": ["trn2"], "capture": capture, "kernels": [{"kernel": "vector_add"}]}
    with pytest.raises(ParameterTypeError) as run:
        sweep.validate_parameters({"spec": form})
    assert str(run.value).splitlines()[-1] == f" - spec: {line}"
