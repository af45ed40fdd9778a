"""The CLI as a user runs it: real exit codes, real terminal output.

Every documented failure mode ends as one line on stderr and its own exit code, never a traceback.
The failure table runs in-process through click's CliRunner on the console script's `main` (the
messages and codes), except a handful that run as real subprocesses, one per command and the exit-3
case (the real entry point: `python -m kernelsweep.flows.cli`, nothing on stdout, no traceback).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

FIXTURES = Path(__file__).parent / "fixtures"
ROW = "b48e273b-c38f-5c14-9126-e6518ac9110a"  # a well-formed row id that no results hold
NOISE = ("Traceback", "ERROR", "CancelledError", "telemetry", "database is locked")


@pytest.fixture(scope="module")
def cli_env(tmp_path_factory):
    home = tmp_path_factory.mktemp("prefect-home")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "AWS_"))}
    env["PREFECT_HOME"] = str(home)
    env["PYTHONPATH"] = str(Path(__file__).parent)
    # Its own temporary folder: a run clears the scratch folders runs that died left there, and says so
    # on stderr, which these tests read line by line (the stage's kill tests and other sessions leave some).
    env["TMPDIR"] = str(tmp_path_factory.mktemp("tmp"))
    return env


def _run(args, env, cwd, timeout=300):
    return subprocess.run(
        [sys.executable, "-m", "kernelsweep.flows.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=timeout,
    )


def _run_in_process(args, env, cwd, monkeypatch) -> subprocess.CompletedProcess:
    """`main(args)` in this process, as `_run` would run it: in `cwd`, with `env` as the whole environment
    for every variable that decides anything before a sweep starts (kernelsweep's, AWS's); its exit code
    and its two streams. What the CLI adds to the import path (the working folder, for user kernel
    modules) and the modules it imports from there are taken back afterwards."""
    from kernelsweep.flows.cli import main

    monkeypatch.chdir(cwd)
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = set(sys.modules)
    relevant = ("KERNELSWEEP_", "AWS_")
    overrides = {k: None for k in os.environ if k.startswith(relevant)}
    overrides |= {k: v for k, v in env.items() if k.startswith(relevant)}
    code = 0
    try:
        with CliRunner().isolation(env=overrides) as (stdout, stderr, _):
            try:
                main(list(args))
            except SystemExit as exited:  # as the interpreter maps it: None is 0, a message is 1
                code = exited.code if isinstance(exited.code, int) else int(exited.code is not None)
            sys.stdout.flush()
            sys.stderr.flush()
            out, err = stdout.getvalue().decode(), stderr.getvalue().decode()
    finally:
        for name in set(sys.modules) - before:
            if str(getattr(sys.modules[name], "__file__", "") or "").startswith(str(cwd)):
                del sys.modules[name]
    return subprocess.CompletedProcess(args, code, out, err)


SPEC = """
name = "cli"
platforms = ["trn2"]
[capture]
num_exec = 2
[[kernels]]
kernel = "kernelsweep.kernels.vector_add:vector_add"
dtypes = ["float32"]
grid = { n = [4096], free_size = [1, 32] }
"""


@pytest.mark.slow
def test_run_prints_a_clean_summary_writes_every_row_and_exits_1_for_a_failed_point(
    tmp_path, cli_env, server_client_env
):
    """One sweep as a user runs it, in a Prefect project whose own `tasks.py` and `flows/` change nothing."""
    failing = '[[kernels]]\nkernel = "kernels.faulty:crashes_on_device"\ndtypes = ["float32"]\ngrid = { n = [1024] }\n'
    (tmp_path / "spec.toml").write_text(SPEC + failing)
    (tmp_path / "tasks.py").write_text("raise SystemExit('the user tasks.py was imported')\n")
    (tmp_path / "flows").mkdir()
    (tmp_path / "flows" / "__init__.py").write_text("raise SystemExit('the user flows/ was imported')\n")
    proc = _run(["run", "spec.toml", "--results", "out"], {**cli_env, **server_client_env}, tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "kernelsweep results (simulated)" in proc.stdout
    assert proc.stdout.count("vector_add") == 2 and "n=4096,partition_size=128,free_size=32" in proc.stdout
    assert "failed: CaptureError" in proc.stdout
    notice, note, *progress, verdict = proc.stderr.splitlines()  # nothing else: no Prefect noise, no blank lines
    assert notice.startswith("No Neuron SDK or device found: running on the simulated toolchain")
    assert note.startswith("note: capture.repeats = 1:")  # one repeat a side can never decide a comparison
    assert [line.split(" points")[0] for line in progress] == ["sweep: 1/3", "sweep: 2/3", "sweep: 3/3"]
    assert progress[-1] == "sweep: 3/3 points done (1 failed)"
    assert verdict == "1 of 3 points failed (see error_message in the results)"
    assert not any(noise in proc.stdout for noise in NOISE)
    files = list((tmp_path / "out" / "v1" / "platform=trn2").glob("run_date=*/*.parquet"))
    assert len(files) == 1
    rows = pq.read_table(files[0]).to_pylist()
    assert sorted(r["status"] for r in rows) == ["failed", "ok", "ok"] and all(r["is_simulation"] for r in rows)
    assert not list(tmp_path.glob("out/_kernelsweep-probe*"))  # the write probe leaves nothing behind


def test_extract_prints_seed_000s_numbers_in_normalised_units(tmp_path, cli_env):
    proc = _run(["extract", str(FIXTURES / "profiles" / "seed000_full.json")], cli_env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    metrics = json.loads(proc.stdout)
    assert round(metrics["total_time_us"], 2) == 45.26
    assert round(metrics["tensor_engine_active_time_us"], 2) == 20.70
    assert metrics["tensor_engine_active_time_percent"] == pytest.approx(45.74)
    assert metrics["hardware_flops"] == 427_819_008 and metrics["neuroncore_cycle_count"] == 54307


MLP_SPEC = """
name = "cli"
platforms = ["trn2"]
[[kernels]]
kernel = "kernelsweep.kernels.mlp:mlp"
grid = { s = [128], h = [1024], i = [512] }
"""

BAD_MODULE = "raise RuntimeError('half-edited kernel file')\n"
EXITING_MODULE = "import sys\nsys.exit(3)\n"
BROKEN_CHECK = """
from kernelsweep.kernels.vector_add import VectorAdd

class BrokenCheck(VectorAdd):
    def check(self, params, dtype):
        return params["no_such_axis"]

broken = BrokenCheck()
"""
NO_CREDENTIALS = {
    "AWS_EC2_METADATA_DISABLED": "true",
    "AWS_CONFIG_FILE": "/nonexistent",
    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
}


def _kernel_spec(ref: str) -> str:
    return SPEC.replace("kernelsweep.kernels.vector_add:vector_add", ref)


BIG_MATMUL = (  # fits the kernel's tiling (it streams any size), not the device
    'name = "big"\nplatforms = ["trn2"]\n[[kernels]]\nkernel = "matmul"\ndtypes = ["bfloat16"]\n'
    "grid = { M = [262144], K = [262144], N = [262144] }\n"
)


# (id, files to write, argv, extra environment, exit code, what the one line must say)
FAILURES = [
    ("bad-shape", {"spec.toml": SPEC.replace("free_size = [1, 32]", "partition_size = [256]")},
     ["run", "spec.toml"], {}, 2, "number of partitions 256 exceeds"),
    ("no-spec", {}, ["run", "nope.toml"], {}, 2, "nope.toml: no such spec file"),
    ("not-toml", {"spec.toml": "name = \n"}, ["validate", "spec.toml"], {}, 2, "not valid TOML"),
    ("unknown-key", {"spec.toml": "colour = 1\n" + SPEC}, ["run", "spec.toml"], {}, 2, "unknown key 'colour'"),
    ("kernel-raises", {"spec.toml": _kernel_spec("half:k"), "half.py": BAD_MODULE}, ["validate", "spec.toml"], {}, 2,
     "importing kernel 'half:k' failed (RuntimeError: half-edited kernel file)"),
    ("kernel-exits", {"spec.toml": _kernel_spec("bye:k"), "bye.py": EXITING_MODULE}, ["validate", "spec.toml"], {}, 2,
     "importing kernel 'bye:k' failed (SystemExit: 3)"),
    ("check-raises", {"spec.toml": _kernel_spec("broken:broken"), "broken.py": BROKEN_CHECK}, ["run", "spec.toml"],
     {}, 2, "vector_add.check(n=4096,partition_size=128,free_size=1, float32) raised KeyError"),
    ("no-sdk", {"spec.toml": SPEC}, ["run", "spec.toml", "--toolchain", "neuron"], {}, 2,
     "--toolchain neuron: missing neuronx-cc"),
    ("results-under-a-file", {"spec.toml": SPEC, "file": "x"}, ["run", "spec.toml", "--results", "file/out"], {}, 2,
     "results folder 'file/out' cannot be written (Not a directory)"),
    ("artifacts-not-a-location", {"spec.toml": SPEC}, ["run", "spec.toml", "--artifacts", "http://x/y"], {}, 2,
     "artifact store location 'http://x/y': use a folder path or s3://bucket/prefix"),
    ("s3-no-credentials", {"spec.toml": SPEC}, ["run", "spec.toml", "--results", "s3://nobucket/x"],
     NO_CREDENTIALS, 2, "results s3://nobucket/x: no AWS credentials found"),
    ("missing-argument", {}, ["run"], {}, 2, "Missing argument 'SPEC'; see `kernelsweep run --help`"),
    ("unknown-command", {}, ["sweep-it"], {}, 2, "No such command 'sweep-it'"),
    ("extract-missing", {}, ["extract", "nope.json"], {}, 2, "nope.json"),
    ("extract-not-json", {"notes.txt": "hello\n"}, ["extract", "notes.txt"], {}, 2, "notes.txt: not valid JSON"),
    ("lineage-no-results", {}, ["lineage", ROW, "--results", "gone"], {}, 2, "results folder 'gone' does not exist"),
    # issue 13: every bad input is one line and exit 2, nothing written (docs/reliability.md)
    ("spec-is-a-folder", {"d/x": ""}, ["validate", "d"], {}, 2, "d: is a folder, not a spec file"),
    ("spec-not-text", {"spec.toml": b"\xff\xfe\x00\x01"}, ["run", "spec.toml"], {}, 2, "not a text file (not UTF-8)"),
    ("too-many-points", {"spec.toml": SPEC.replace("free_size = [1, 32]", f"free_size = {list(range(1, 101))}, "
     f"partition_size = {list(range(1, 129))}")}, ["run", "spec.toml"], {}, 2,
     "expands to 12,800 points, over the limit of 10,000; shrink the grid, or pass --max-points 12800"),
    ("max-points-zero", {"spec.toml": SPEC}, ["validate", "spec.toml", "--max-points", "0"], {}, 2,
     "Invalid value for '--max-points'"),
    ("timeout-infinite", {"spec.toml": SPEC.replace("num_exec = 2", "num_exec = 2\ntimeout_seconds = inf")},
     ["run", "spec.toml"], {}, 2, "capture.timeout_seconds is inf; give a finite number"),
    ("axis-negative", {"spec.toml": SPEC.replace("n = [4096]", "n = [-4096]")}, ["run", "spec.toml"], {}, 2,
     "kernels[0].grid.n has -4096, out of range"),
    ("shape-beyond-device", {"spec.toml": BIG_MATMUL}, ["run", "spec.toml"], {}, 2,
     "needs 384.0 GiB of inputs and outputs, more than trn2's 96 GiB of device memory"),
    ("shape-beyond-host", {"spec.toml": SPEC.replace("n = [4096], free_size = [1, 32]", "n = [2147483520]")},
     ["run", "spec.toml"], {}, 2, "with its working copies that is more than this host's"),
    ("sim-env-bad", {"spec.toml": SPEC}, ["run", "spec.toml"], {"KERNELSWEEP_SIM_CORES": "two"}, 2,
     "KERNELSWEEP_SIM_CORES='two': give an int of at least 0; fix or unset it"),
    ("sim-time-scale-bad", {"spec.toml": SPEC}, ["run", "spec.toml"], {"KERNELSWEEP_SIM_TIME_SCALE": "-1"}, 2,
     "KERNELSWEEP_SIM_TIME_SCALE='-1': give a float of at least 0"),
    ("sim-faults-bad", {"spec.toml": SPEC}, ["run", "spec.toml"], {"KERNELSWEEP_SIM_FAULTS": "bogus"}, 2,
     "KERNELSWEEP_SIM_FAULTS: bad entry 'bogus'"),
    ("lease-timeout-bad", {"spec.toml": SPEC}, ["run", "spec.toml"], {"KERNELSWEEP_LEASE_TIMEOUT_SECONDS": "soon"},
     2, "KERNELSWEEP_LEASE_TIMEOUT_SECONDS='soon': give a number of seconds above 0"),
    ("state-folder-open-to-others", {"spec.toml": SPEC, "shared/keep": ""}, ["run", "spec.toml"],
     {"KERNELSWEEP_STATE_DIR": "{tmp}/shared", "KERNELSWEEP_SIM_STATE": None, "KERNELSWEEP_LOCK_DIR": None}, 2,
     "state folder {tmp}/shared is open to other users (mode 755); chmod 700 it or choose a private folder"),
    ("prefect-api-url-not-a-url", {"spec.toml": SPEC}, ["run", "spec.toml"], {"PREFECT_API_URL": "not a url"}, 2,
     "PREFECT_API_URL='not a url' is not an http(s) URL; give the server's API"),
    ("tmpdir-not-a-folder", {"spec.toml": SPEC}, ["run", "spec.toml"], {"TMPDIR": "{tmp}/spec.toml"}, 2,
     "temporary folder {tmp}/spec.toml (TMPDIR) is not a folder; create it or point TMPDIR at another folder"),
    ("lineage-row-id-is-a-path", {"r/keep": ""}, ["lineage", "../../etc", "--results", "r"], {}, 2,
     "no row ../../etc in r"),
    ("extract-not-a-profile", {"t.json": '{"rows": [{"a": 1}], "summary": [{"colour": "red"}]}'}, ["extract", "t.json"],
     {}, 2, "none of the profile summary fields"),
    ("extract-nested-too-deep", {"d.json": '{"a": ' + "[" * 200 + "]" * 200 + "}"}, ["extract", "d.json"], {}, 2,
     "is nested more than 64 levels deep"),
    # issue 41: environment faults and checks before any work
    ("bench-axis-twice", {}, ["bench", "matmul", "--shape", "M=128,M=256", "--toolchain", "sim"], {}, 2,
     "--shape 'M=128,M=256': M is given twice; give each axis once"),
    ("prefect-api-url-bad-ipv6", {"spec.toml": SPEC}, ["run", "spec.toml"], {"PREFECT_API_URL": "http://[::1/api"},
     2, "PREFECT_API_URL='http://[::1/api' is not an http(s) URL"),
    ("toolchains-python-missing", {"spec.toml": SPEC.replace('name = "cli"', 'name = "cli"\ntoolchain = "cpu"')
     + '[toolchains]\n"2.21" = "/nonexistent/python"\n'}, ["run", "spec.toml"], {}, 2,
     "[toolchains] '2.21' = '/nonexistent/python' is not an executable file"),
    ("sim-compiler-version-bad", {"spec.toml": SPEC}, ["run", "spec.toml"],
     {"KERNELSWEEP_SIM_COMPILER_VERSION": "9" * 300}, 2, "KERNELSWEEP_SIM_COMPILER_VERSION='9999"),
    ("no-neuron-core", {"spec.toml": SPEC}, ["run", "spec.toml"], {"KERNELSWEEP_SIM_CORES": "0"}, 2,
     "this host has no NeuronCore (neuron-ls lists none)"),
    ("notify-malformed", {"spec.toml": SPEC}, ["fleet", "up", "--spec", "spec.toml", "--notify", "nonsense"],
     {"PREFECT_API_URL": "http://127.0.0.1:9/api"}, 2, "--notify 'nonsense': give the block as block-type-slug/name"),
]  # fmt: skip


# Run as real subprocesses: one usage error per command, and click's own (an unknown command).
AS_SUBPROCESS = {
    "no-spec",
    "not-toml",
    "extract-not-json",
    "lineage-no-results",
    "unknown-command",
    "prefect-api-url-not-a-url",
    "tmpdir-not-a-folder",
    "prefect-api-url-bad-ipv6",
    "notify-malformed",
}  # variables the in-process run does not set


@pytest.mark.parametrize(
    ("files", "argv", "env", "code", "says"),
    [f[1:] for f in FAILURES],
    ids=[f"{f[0]}-subprocess" if f[0] in AS_SUBPROCESS else f[0] for f in FAILURES],
)
def test_every_documented_failure_is_one_line_and_its_exit_code(
    request, tmp_path, cli_env, monkeypatch, files, argv, env, code, says
):
    for name, content in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(content if isinstance(content, bytes) else content.encode())
    environment = {**cli_env, **{k: v.replace("{tmp}", str(tmp_path)) for k, v in env.items() if v is not None}}
    environment = {k: v for k, v in environment.items() if env.get(k, "") is not None}
    if request.node.callspec.id.endswith("-subprocess"):
        proc = _run(argv, environment, tmp_path)
    else:
        proc = _run_in_process(argv, environment, tmp_path, monkeypatch)
    assert proc.returncode == code, proc.stderr
    assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1, proc.stderr
    assert says.replace("{tmp}", str(tmp_path)) in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert not (tmp_path / "results").exists() and not (tmp_path / "artifacts").exists()  # nothing written


def test_a_store_that_cannot_be_read_is_exit_3(tmp_path, cli_env):
    """Not the user's input but the store: a results object that is not Parquet (a torn copy, say)."""
    torn = tmp_path / "results" / "v1" / "platform=trn2" / "run_date=2026-01-01" / "run.parquet"
    torn.parent.mkdir(parents=True)
    torn.write_bytes(b"PAR1 torn")
    proc = _run(["lineage", ROW, "--results", "results"], cli_env, tmp_path)
    assert proc.returncode == 3, proc.stderr
    assert "is not a readable Parquet file" in proc.stderr
    assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


def test_an_internal_error_is_one_line_exit_4_and_a_traceback_only_when_asked(monkeypatch, capsys):
    from kernelsweep.flows.cli import app, run

    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(run, "load_spec", broken)  # the first thing validate does
    with pytest.raises(SystemExit) as exited:
        app.main(["validate", "spec.toml"])
    assert exited.value.code == 4
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "internal error: RuntimeError: a bug" in err and "KERNELSWEEP_DEBUG=1" in err
    monkeypatch.setenv("KERNELSWEEP_DEBUG", "1")
    with pytest.raises(SystemExit):
        app.main(["validate", "spec.toml"])
    assert "Traceback" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("points", "reused", "searches", "expected"),
    [
        (16, 5, 0, "reusing 5 finished point(s), running the other 11"),
        (0, 0, 1, "1 search(es) go on from their stored trials"),
        (4, 4, 2, "reusing 4 finished point(s), running the other 0; 2 search(es) go on from their stored trials"),
    ],
)
def test_the_resume_line_names_searches_apart_from_grid_points(capsys, points, reused, searches, expected):
    """A search's trials are not known before it runs: its resume is not a count of points."""
    from datetime import date

    from kernelsweep.flows.cli.run import _announce_resume
    from kernelsweep.results.journal_check import RunHeader

    header = RunHeader(run_key="k", run_id="r-1", run_date=date(2026, 11, 27), sweep="s", started_at="")
    _announce_resume(header, reused, points, remeasure=False, searches=searches)
    line = " ".join(capsys.readouterr().err.split())
    assert line == f"resuming run r-1 of 2026-11-27 (interrupted): {expected}"


def test_the_run_summary_lists_shapes_in_their_numbers_order_not_as_text():
    """`n=16384` sorts before `n=2048` as text; a sweep's table reads from the smallest shape up."""
    from rich.console import Console

    from kernelsweep.flows.cli.run import summary_table
    from kernelsweep.results.outcome import RowSummary

    def row(shape: str) -> RowSummary:
        return RowSummary(
            *(f"r-{shape}", "s", "vector_add", shape, "float32", "trn2", "ok", None, None, None),
            *(1.0, 1.0, 1.0, 1.0, True, True, "f"),
        )

    console = Console(record=True, width=200)
    console.print(summary_table([row(s) for s in ("n=16384", "n=2048", "n=4096", "n=512")]))
    text = console.export_text()
    assert [text.index(s) for s in ("n=512 ", "n=2048 ", "n=4096 ", "n=16384 ")] == sorted(
        text.index(s) for s in ("n=512 ", "n=2048 ", "n=4096 ", "n=16384 ")
    )


def test_a_results_path_with_brackets_is_printed_as_it_is(capsys):
    """Issue 41: `results/[v1]/...` was printed without `[v1]` (rich took it as markup)."""
    from kernelsweep.flows.cli.run import _print_outcome
    from kernelsweep.results.outcome import SweepOutcome

    path = "runs/[v1]/v1/platform=trn2/run_date=2026-11-27/x.parquet"
    _print_outcome(SweepOutcome("run", paths=[path]), 0)
    assert f"results: {path}" in capsys.readouterr().out
