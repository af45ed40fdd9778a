"""The host cannot be turned against its owner: private state, no shell, no shadowing, no secrets leaked.

docs/reliability.md lists these tests against the threats they prove.
"""

from __future__ import annotations

import ast
import io
import os
import subprocess
import sys
from pathlib import Path

import boto3
import pyarrow.parquet as pq
import pytest
from s3_server import aws_test_env, list_keys

from kernelsweep.errors import UsageError
from kernelsweep.results import reader
from kernelsweep.results.journal import run_key
from kernelsweep.sweepspec.load import parse_spec

REPO = Path(__file__).resolve().parents[1]
SPEC = """
name = "sec"
platforms = ["trn2"]
[capture]
num_exec = 2
[[kernels]]
kernel = "kernelsweep.kernels.vector_add:vector_add"
dtypes = ["float32"]
grid = { n = [2048], free_size = [1, 16] }
"""
SHADOWS = ("numpy", "pydantic", "click", "prefect", "pyarrow", "json", "tasks")


def _cli(args: list[str], env: dict, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    """The console script, as a user runs it (`python -m` would put the working folder first itself)."""
    return subprocess.run(
        [str(Path(sys.executable).parent / "kernelsweep"), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=timeout,
    )


def _plain_env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "AWS_", "KERNELSWEEP_"))}
    return env | extra


def test_the_working_folder_never_shadows_an_installed_module(tmp_path):
    """A project folder holding `numpy.py`, `prefect.py`, `kernelsweep/`... changes nothing: the folder
    is searched after the installed packages (and the simulated tools run with `python -P`). A
    kernel module of the user's own is still found there."""
    for name in SHADOWS:
        (tmp_path / f"{name}.py").write_text(f"raise SystemExit('the working folder {name}.py was imported')\n")
    (tmp_path / "kernelsweep").mkdir()
    (tmp_path / "kernelsweep" / "__init__.py").write_text("raise SystemExit('the working folder kernelsweep/')\n")
    (tmp_path / "mine.py").write_text("from kernelsweep.kernels.vector_add import vector_add as mine\n")
    (tmp_path / "spec.toml").write_text(SPEC.replace("kernelsweep.kernels.vector_add:vector_add", "mine:mine"))
    proc = _cli(["validate", "spec.toml"], _plain_env(), tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "2 points" in proc.stdout

    from kernelsweep.sim.toolchain import sim_toolchain
    from kernelsweep.toolchain.process import run_tool

    toolchain = sim_toolchain(tmp_path / "sim")
    result = run_tool(toolchain.command("neuron-ls") + ["--json-output"], cwd=tmp_path, env=toolchain.env,
                      timeout_seconds=120)  # fmt: skip
    assert result.returncode == 0 and "was imported" not in result.output, result.output


SHELL_CALLS = {("os", "system"), ("os", "popen"), ("subprocess", "getoutput"), ("subprocess", "getstatusoutput")}


def _shell_uses(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            if (func.value.id, func.attr) in SHELL_CALLS:
                found.append(f"{path}:{node.lineno}: {func.value.id}.{func.attr}")
        for keyword in node.keywords:
            literal_false = isinstance(keyword.value, ast.Constant) and keyword.value.value is False
            if keyword.arg == "shell" and not literal_false:
                found.append(f"{path}:{node.lineno}: shell=...")
    return found


def test_no_shell_anywhere():
    """Every tool runs from an argv list: no `shell=True`, `os.system` or `os.popen` in the package, the
    flows, the tasks or the benchmarks (a test of this very scan proves it finds them)."""
    files = [p for folder in ("kernelsweep", "flows", "tasks", "benchmarks") for p in (REPO / folder).rglob("*.py")]
    assert len(files) > 50
    assert [use for path in files for use in _shell_uses(path)] == []


def test_the_shell_scan_finds_what_it_looks_for(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import os, subprocess\nos.system('x')\nsubprocess.run('x', shell=True)\nos.popen('x')\n")
    assert len(_shell_uses(bad)) == 3


def test_host_state_lives_in_a_private_folder_nobody_else_can_plant(tmp_path, monkeypatch):
    from kernelsweep.flows.settings import locations_from_env

    for name in ("KERNELSWEEP_STATE_DIR", "KERNELSWEEP_SIM_STATE", "KERNELSWEEP_LOCK_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # tempfile caches TMPDIR
    state = tmp_path / f"kernelsweep-{os.geteuid()}"
    locations = locations_from_env()
    assert locations.lock_dir == state / "leases" and locations.sim_state_dir == state / "sim"
    for folder in (state, state / "leases", state / "sim"):
        assert (os.stat(folder).st_mode & 0o777) == 0o700 and os.stat(folder).st_uid == os.geteuid()

    planted = tmp_path / "planted"
    planted.mkdir()
    os.chmod(planted, 0o777)
    monkeypatch.setenv("KERNELSWEEP_STATE_DIR", str(planted))
    with pytest.raises(UsageError, match="is open to other users"):
        locations_from_env()
    linked = tmp_path / "linked"
    linked.symlink_to(state)
    monkeypatch.setenv("KERNELSWEEP_STATE_DIR", str(linked))
    with pytest.raises(UsageError, match="not a folder"):
        locations_from_env()


def test_a_state_folder_inside_a_folder_others_may_write_without_sticky_bit_is_refused(tmp_path, monkeypatch):
    """Our folder may be private, but whoever may write the folder it is in can rename it away and
    put theirs in its place: refused unless that folder has the sticky bit (as /tmp has)."""
    from kernelsweep.flows.settings import locations_from_env

    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)  # world-writable, no sticky bit
    if os.geteuid() == 0:
        os.chown(shared, 65534, 65534)  # another user's (nobody's)
    (shared / "state").mkdir(mode=0o700)
    for name in ("KERNELSWEEP_SIM_STATE", "KERNELSWEEP_LOCK_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KERNELSWEEP_STATE_DIR", str(shared / "state"))
    with pytest.raises(UsageError, match=f"is inside {shared} .*which others may write without a sticky bit"):
        locations_from_env()
    os.chmod(shared, 0o1777)  # as /tmp: only an entry's owner may rename it
    assert locations_from_env().lock_dir == shared / "state" / "leases"


def test_names_from_a_spec_become_safe_keys():
    for name in ("A.b_c-1", "x" * 200, "UPPER..dots"):
        spec = parse_spec({"name": name, "platforms": ["trn2"], "kernels": [{"kernel": "kernelsweep.kernels.mlp:mlp"}]})
        key = run_key(spec)
        assert key.replace("-", "").isalnum() and key == key.lower() and len(key) <= 81


# --- Secrets: fake credentials and a fake secret in the environment appear nowhere ------------------

CANARIES = {
    "AWS_ACCESS_KEY_ID": "AKIACANARY7Q3ZX9KEYID",
    "AWS_SECRET_ACCESS_KEY": "canarySecretKey/9f8e7d6c5b4a+CANARY",
    "AWS_SESSION_TOKEN": "canarySessionToken0123456789CANARY",
    "KERNELSWEEP_TEST_SECRET": "s3cr3t-canary-do-not-leak-4242",
}


def _files_under(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


@pytest.mark.slow
def test_no_credential_or_secret_reaches_a_row_artifact_log_or_the_prefect_database(
    tmp_path, bucket, moto_endpoint, prefect_home
):
    home = prefect_home
    env = _plain_env(**{k: v for k, v in aws_test_env(moto_endpoint).items() if v is not None})
    env |= CANARIES | {"PREFECT_HOME": str(home), "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120"}
    env |= {"KERNELSWEEP_STATE_DIR": str(tmp_path / "state"), "PREFECT_LOGGING_LEVEL": "DEBUG"}
    (tmp_path / "spec.toml").write_text(SPEC)
    outputs = []
    for results, artifacts in (("results", "artifacts"), (f"s3://{bucket}/results", f"s3://{bucket}/artifacts")):
        proc = _cli(["run", "spec.toml", "--results", results, "--artifacts", artifacts], env, tmp_path)
        assert proc.returncode == 0, proc.stderr
        outputs.append(proc.stdout + proc.stderr)

    rows = reader.read(str(tmp_path / "results")).to_pylist()
    s3_env = {k: v for k, v in env.items() if k.startswith("AWS_")}
    client = boto3.client(
        "s3",
        endpoint_url=moto_endpoint,
        aws_access_key_id=s3_env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=s3_env["AWS_SECRET_ACCESS_KEY"],
        aws_session_token=s3_env["AWS_SESSION_TOKEN"],
        region_name="us-east-1",
    )
    objects = [client.get_object(Bucket=bucket, Key=k)["Body"].read() for k in list_keys(moto_endpoint, bucket)]
    rows += [r for body in objects if body.startswith(b"PAR1") for r in pq.read_table(io.BytesIO(body)).to_pylist()]
    local = _files_under(tmp_path / "results") + _files_under(tmp_path / "artifacts") + _files_under(tmp_path / "state")
    database = _files_under(home)  # the SQLite database (flow and task runs, logs, artifacts) and its WAL
    assert any(p.suffix == ".db" for p in database) and len(rows) == 4 and objects
    haystacks = {"rows": repr(rows).encode(), "terminal": "\n".join(outputs).encode()}
    haystacks |= {str(p): p.read_bytes() for p in local + database}
    haystacks |= {f"s3 object {i}": body for i, body in enumerate(objects)}
    for name, secret in CANARIES.items():
        leaks = [where for where, data in haystacks.items() if secret.encode() in data]
        assert leaks == [], f"{name} found in {leaks}"
    assert any(b"sweep-sec" in data for data in haystacks.values())  # the scan does see the database's contents
