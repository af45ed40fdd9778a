"""The tool adapters: argv exactly as seed 000 runs the tools, and the process runner."""

from __future__ import annotations

import os
import sys
import time

from kernelsweep.toolchain import compiler, profiler
from kernelsweep.toolchain.process import run_tool
from kernelsweep.toolchain.resolve import Toolchain

REAL = Toolchain(
    kind="neuron",
    commands={"neuronx-cc": ("neuronx-cc",), "neuron-profile": ("neuron-profile",), "neuron-ls": ("neuron-ls",)},
)
SEED_000_INPUTS = {
    "hidden_tensor": "inp-hidden_tensor-000.bin",
    "gate_proj_weights_tensor": "inp-gate_proj_weights_tensor-000.bin",
    "up_proj_weights_tensor": "inp-up_proj_weights_tensor-000.bin",
    "down_proj_weights_tensor": "inp-down_proj_weights_tensor-000.bin",
}


def test_compile_argv_is_seed_000s_command():
    argv = compiler.compile_argv(REAL, "penguin.py", "trn2", 2)
    assert " ".join(argv) == "neuronx-cc compile --framework XLA penguin.py --target trn2 --lnc 2"


def test_compile_argv_omits_lnc_where_the_target_rejects_it():
    assert "--lnc" not in compiler.compile_argv(REAL, "penguin.py", "trn1", None)


def test_capture_argv_carries_seed_000s_flags_and_input_pairs():
    argv = profiler.capture_argv(REAL, "file.neff", SEED_000_INPUTS, num_exec=10, profile_nth_exec=2)
    assert argv[:6] == ["neuron-profile", "capture", "-n", "file.neff", "-s", "profile.ntff"]
    assert {"--num-exec=10", "--profile-nth-exec=2", "--save-output"} <= set(argv)
    pairs = argv[argv.index("--save-output") + 1 :]
    assert pairs == [x for pair in SEED_000_INPUTS.items() for x in pair]


def test_capture_prefers_neuron_explorer_when_both_exist():
    both = Toolchain(kind="neuron", commands={**REAL.commands, "neuron-explorer": ("neuron-explorer",)})
    assert profiler.capture_argv(both, "f.neff", {}, num_exec=1, profile_nth_exec=None)[0] == "neuron-explorer"


def test_view_argv_is_seed_000s_command():
    argv = profiler.view_argv(REAL, "file.neff", "profile.ntff")
    assert " ".join(argv) == (
        "neuron-profile view -n file.neff -s profile.ntff --output-format=json --output-file=profile.json"
    )


def test_expected_ntff_names_follow_the_documented_rules():
    assert profiler.expected_ntff_names(1, None) == ["profile.ntff"]
    assert profiler.expected_ntff_names(1, 1) == ["profile.ntff"]
    assert profiler.expected_ntff_names(3, None) == ["profile.ntff", "profile_exec_2.ntff", "profile_exec_3.ntff"]
    assert profiler.expected_ntff_names(10, 2) == ["profile_exec_2.ntff"]


def test_compiler_version_parsing():
    text = "NeuronX Compiler version 2.14.227.0+2d4f85be\n\nPython version 3.10.12\n"
    assert compiler.parse_compiler_version(text) == "2.14.227.0+2d4f85be"
    assert compiler.parse_compiler_version("command not found") is None


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
