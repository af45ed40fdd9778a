"""The tool adapters: every command line is the documented one (tests/documented_forms.py), the
NTFF names follow --profile-nth-exec's every-Nth rule, and the process runner."""

from __future__ import annotations

import os
import sys
import time

import pytest
from documented_forms import FORMS, documented_as

from kernelsweep.toolchain import compiler, devices, explorer, profiler
from kernelsweep.toolchain.process import run_tool
from kernelsweep.toolchain.resolve import Toolchain

TOOLS = ("neuronx-cc", "neuron-profile", "neuron-explorer", "neuron-ls")
EXPLORER = Toolchain(kind="neuron", commands={t: (t,) for t in TOOLS})
PROFILE = Toolchain(kind="neuron", commands={t: (t,) for t in TOOLS if t != "neuron-explorer"})
SEED_000_INPUTS = {
    "hidden_tensor": "inp-hidden_tensor-000.bin",
    "gate_proj_weights_tensor": "inp-gate_proj_weights_tensor-000.bin",
    "up_proj_weights_tensor": "inp-up_proj_weights_tensor-000.bin",
    "down_proj_weights_tensor": "inp-down_proj_weights_tensor-000.bin",
}
PAIRS = " ".join(x for pair in SEED_000_INPUTS.items() for x in pair)

# (the documented form, the command line the adapter builds, that line written out)
CASES = [
    ("legacy compile", compiler.compile_argv(EXPLORER, "penguin.py", "trn1", None),
     "neuronx-cc compile --framework XLA penguin.py --internal-tensorizer-opt-level=nki --pipeline compile SaveTemps "
     "--target trn1 --output=file.neff"),
    ("legacy compile, trn2", compiler.compile_argv(EXPLORER, "penguin.py", "trn2", 2),
     "neuronx-cc compile --framework XLA penguin.py --internal-tensorizer-opt-level=nki --pipeline compile SaveTemps "
     "--target trn2 --lnc 2 --output=file.neff"),
    ("capture", profiler.capture_argv(EXPLORER, "/w/file.neff", SEED_000_INPUTS, num_exec=10, profile_nth_exec=None),
     "neuron-explorer capture -n /w/file.neff -s profile.ntff --num-exec=10 --profile-nth-exec=10 "
     f"--save-output {PAIRS}"),
    ("capture", profiler.capture_argv(PROFILE, "file.neff", {"a": "a.bin"}, num_exec=20, profile_nth_exec=10),
     "neuron-profile capture -n file.neff -s profile.ntff --num-exec=20 --profile-nth-exec=10 --save-output a a.bin"),
    ("capture, DGE notifications",
     profiler.capture_argv(EXPLORER, "file.neff", {"a": "a.bin"}, num_exec=2, profile_nth_exec=2, dge_notifs=True),
     "neuron-explorer capture -n file.neff -s profile.ntff --num-exec=2 --profile-nth-exec=2 --enable-dge-notifs "
     "--save-output a a.bin"),
    ("devices", ["neuron-ls", *devices.JSON_FORMS[0]], "neuron-ls -j"),
    ("devices, 2.34", ["neuron-ls", *devices.JSON_FORMS[1]], "neuron-ls --output-format json"),
    ("profile schema, 12.x", ["neuron-explorer", *explorer.SCHEMA_COMMANDS[0]],
     "neuron-explorer view --show-profile-schema"),
    ("profile schema, 7.x", ["neuron-explorer", *explorer.SCHEMA_COMMANDS[1]], "neuron-explorer --show-profile-schema"),
    ("view summary-json", profiler.view_argv(EXPLORER, "file.neff", "profile_exec_10.ntff"),
     "neuron-explorer view -n file.neff -s profile_exec_10.ntff --output-format=summary-json"),
    ("view json", profiler.view_argv(PROFILE, "file.neff", "profile.ntff", "json"),
     "neuron-profile view -n file.neff -s profile.ntff --output-format=json --output-file=profile.json"),
    ("view parquet", profiler.view_argv(EXPLORER, "file.neff", "profile.ntff", "parquet"),
     "neuron-explorer view -n file.neff -s profile.ntff --output-format=parquet --output-file=profile_parquet "
     "--ingest-only --data-path=explorer-data"),
]  # fmt: skip


@pytest.mark.parametrize(("form", "argv", "line"), CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_every_command_line_is_the_documented_form(form, argv, line):
    assert " ".join(argv) == line
    assert documented_as(argv) == form, f"{line!r} is not the documented {FORMS[form][0]!r} ({FORMS[form][1]})"


def test_an_undocumented_command_line_is_told_apart():
    """The matcher has teeth: yesterday's forms are not documented ones."""
    assert documented_as("neuronx-cc compile --framework XLA penguin.py --target trn2 --lnc 2".split()) is None
    assert documented_as("neuron-explorer view -n f -s p --output-format=parquet --output-file=d".split()) is None
    assert documented_as("neuron-profile capture -n f -s profile.ntff --num-exec=10 --save-output a b".split()) is None


def test_capture_prefers_neuron_explorer_when_both_exist():
    assert profiler.capture_argv(EXPLORER, "f.neff", {}, num_exec=1, profile_nth_exec=None)[0] == "neuron-explorer"
    assert profiler.capture_argv(PROFILE, "f.neff", {}, num_exec=1, profile_nth_exec=None)[0] == "neuron-profile"


def test_neuron_profile_has_no_parquet_flags():
    assert "--ingest-only" not in profiler.view_argv(PROFILE, "f.neff", "p.ntff", "parquet")


@pytest.mark.parametrize(
    ("num_exec", "nth", "names"),
    [
        (10, None, ["profile_exec_10.ntff"]),  # the default, as AWS's harness runs it: one NTFF
        (20, 10, ["profile_exec_10.ntff", "profile_exec_20.ntff"]),  # nki-samples' test
        (10, 2, [f"profile_exec_{i}.ntff" for i in (2, 4, 6, 8, 10)]),  # every 2nd, not "the 2nd"
        (3, 1, ["profile.ntff", "profile_exec_2.ntff", "profile_exec_3.ntff"]),  # M=1: the first is profile.ntff
        (1, None, ["profile.ntff"]),
        (7, 3, ["profile_exec_3.ntff", "profile_exec_6.ntff"]),
    ],
)
def test_expected_ntff_names_are_every_nth_execution(num_exec, nth, names):
    assert profiler.expected_ntff_names(num_exec, nth) == names


def test_profiler_versions_parse_leniently():
    assert (
        profiler.parse_profiler_version("neuron-profile 2.19.0.0%kaena-tools/2.19@c48a122 built on ...") == "2.19.0.0"
    )
    assert profiler.parse_profiler_version("Neuron Explorer\nversion: v2.31.7.0+abc (build 12)") == "2.31.7.0+abc"
    assert profiler.parse_profiler_version("no version here") is None
    # whatever the version, known or not, the default view is summary-json, never full JSON
    for tool, version in (("neuron-explorer", None), ("neuron-explorer", "2.40.0.0"), ("neuron-profile", "2.19.0.0")):
        assert explorer.view_format("auto", tool, version) == "summary-json"


def test_full_json_is_read_from_parquet_once_explorer_no_longer_writes_it():
    """2.33 is the last Explorer with full-profile JSON (announce-intent-eos-explorer-json)."""
    assert explorer.view_format("json", "neuron-explorer", "2.33.38.0") == "json"
    assert explorer.view_format("json", "neuron-explorer", "2.34.1.0+abc") == "parquet"
    assert explorer.view_format("json", "neuron-explorer", None) == "json"  # unknown: as asked
    assert explorer.view_format("json", "neuron-profile", "2.40.0.0") == "json"


def test_compiler_version_parsing():
    text = "NeuronX Compiler version 2.14.227.0+2d4f85be\n\nPython version 3.10.12\n"
    assert compiler.parse_compiler_version(text) == "2.14.227.0+2d4f85be"
    assert compiler.parse_compiler_version("command not found") is None


def test_unset_variables_do_not_reach_the_tool(monkeypatch):
    monkeypatch.setenv("NEURON_RT_VIRTUAL_CORE_SIZE", "2")
    monkeypatch.setenv("KEPT", "yes")
    script = "import os; print(os.environ.get('NEURON_RT_VIRTUAL_CORE_SIZE'), os.environ.get('KEPT'))"
    result = run_tool([sys.executable, "-c", script], unset=profiler.CAPTURE_UNSET, timeout_seconds=30)
    assert result.stdout.split() == ["None", "yes"]


def test_timeout_kills_the_whole_process_group(tmp_path):
    """A tool that forks a long-lived child: on timeout both are gone, and we return promptly."""
    pid_file = tmp_path / "child.pid"
    script = (
        "import subprocess, sys, time\n"
        f"child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(60)\n"
    )
    started = time.monotonic()
    result = run_tool([sys.executable, "-c", script], timeout_seconds=2)
    assert result.timed_out
    assert time.monotonic() - started < 30
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child), "the tool's child outlived the timeout"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as handle:  # a zombie is dead for our purposes
        return handle.read().split()[2] != "Z"


def test_nonzero_exit_is_reported_not_raised():
    result = run_tool(
        [sys.executable, "-c", "import sys; print('oops', file=sys.stderr); sys.exit(3)"], timeout_seconds=30
    )
    assert result.returncode == 3 and "oops" in result.stderr and not result.timed_out


def test_the_pools_first_extractions_ask_the_explorer_for_its_schema_once(monkeypatch):
    """Four extractions wanting the schema at once start one tool, not one each: the others wait for it."""
    import threading

    asked: list[int] = []
    all_in = threading.Event()  # set when every thread is inside the ask: what the old check-then-ask did

    def ask(toolchain: Toolchain, timeout_seconds: float = 60) -> None:
        asked.append(1)
        if len(asked) == 4:
            all_in.set()
        all_in.wait(timeout=1)

    monkeypatch.setattr(explorer, "ask_schema", ask)
    toolchain = Toolchain(kind="neuron", commands={t: (t,) for t in TOOLS}, env={"ONCE": str(time.time_ns())})
    threads = [threading.Thread(target=explorer.summary_schema, args=(toolchain,)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(asked) == 1
