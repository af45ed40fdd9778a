"""Walk every known failure string (reference sections 2 and 4) and assert how it is classified.

The strings are the tools' real output, as quoted in the Neuron docs and aws-neuron-sdk issues,
with the log prefixes the tools put in front of them.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass

import pytest

from kernelsweep.errors import CaptureError, CompileError, DeviceBusyError, ExtractError, TraceError
from kernelsweep.toolchain import failures
from kernelsweep.toolchain.process import ToolResult
from kernelsweep.toolchain.tracing.calls import CompilerFailed

COMPILE_ARGV = ["neuronx-cc", "compile", "--framework", "XLA", "penguin.py", "--target", "trn2", "--lnc", "2"]
CAPTURE_ARGV = ["neuron-profile", "capture", "-n", "file.neff", "-s", "profile.ntff"]
VIEW_ARGV = ["neuron-profile", "view", "-n", "file.neff", "-s", "profile_exec_2.ntff", "--output-format=json"]
NCC_LOG = "2024-08-15T14:01:19Z ERROR 1320 [neuronx-cc]: "
DIAGNOSTIC_TAIL = "\nDiagnostic logs stored in /tmp/w/log-neuron-cc.txt\n"
NRT = "2024-Oct-21 20:16:04.966842  7838:7838  ERROR   "
SUPPORT = " - Please open a support ticket at https://github.com/aws-neuron/aws-neuron-sdk/issues/new"
ICE_BLOCK = "\n".join(
    NCC_LOG + line
    for line in (
        "***************************************************************",
        " An Internal Compiler Error has occurred",
        "***************************************************************",
        "",
        "Error message:  list index out of range",
        "",
        "Error class:    IndexError",
        "Error location: Unknown",
        "Command line:   neuronx-cc compile --framework XLA penguin.py --target trn2",
    )
)
PARTITION_ERROR = (
    "ValueError: number of partitions 256 exceed architecture limitation of 128. Info on how to fix: "
    "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/general/nki/api/nki.errors.html"
    "#err-num-partition-exceed-arch-limit"
)
NTFF_SKEW = (
    "ERRO[0000] Failed to load profile session                NTFF=/home/ubuntu/out/profile_exec_2.ntff "
    'error="NTFF version 4 is not supported in this version of the tool (supported: 1 - 3). Please upgrade '
    'aws-neuronx-tools."\nneuron-profile exited with an error.neuron-profile 2.19.0.0%kaena-tools/2.19@c48a122 '
    "built on 2024-08-02T17:21:14Z\n\nNTFF version 4 is not supported in this version of the tool "
    "(supported: 1 - 3). Please upgrade aws-neuronx-tools.\n"
)


@dataclass(frozen=True)
class Case:
    tool: str  # compile | capture | view
    output: str
    error_type: type
    error_class: str
    retryable: bool
    says: str  # what the one-line message must carry
    returncode: int = 1
    timed_out: bool = False


CASES = {
    # neuronx-cc (reference section 2): every diagnostic is deterministic
    "NCC_EVRF009": Case(
        "compile",
        NCC_LOG + "[NCC_EVRF009] Size of total input and output tensors exceeds HBM limit" + DIAGNOSTIC_TAIL,
        CompileError,
        "CompilerDiagnostic",
        False,
        "[NCC_EVRF009] Size of total input and output tensors",
        70,
    ),
    "NCC_EOOM002": Case(
        "compile",
        NCC_LOG + "[NCC_EOOM002] Maximum peak HBM usage of 27.63GB exceeds HBM limit of 24.00GB" + DIAGNOSTIC_TAIL,
        CompileError,
        "CompilerDiagnostic",
        False,
        "[NCC_EOOM002] Maximum peak HBM usage of 27.63GB",
        70,
    ),
    "NCC_EARG001": Case(
        "compile",
        NCC_LOG + "[NCC_EARG001] --lnc 2 is not supported for target trn1" + DIAGNOSTIC_TAIL,
        CompileError,
        "CompilerDiagnostic",
        False,
        "[NCC_EARG001]",
        70,
    ),
    "internal compiler error block": Case(
        "compile",
        ICE_BLOCK + DIAGNOSTIC_TAIL,
        CompileError,
        "InternalCompilerError",
        False,
        "An Internal Compiler Error has occurred: IndexError: list index out of range",
        70,
    ),
    "TEN404": Case(
        "compile",
        "2024-04-30T20:50:00Z [TEN404] (aten__add_add.31237) Internal tensorizer error: "
        "NeuronValueNumbering:insertAtEnd(): incompatible function arguments." + SUPPORT + "\n",
        CompileError,
        "InternalCompilerError",
        False,
        "[TEN404] (aten__add_add.31237) Internal tensorizer error",
        70,
    ),
    "F134": Case(
        "compile",
        "[F134] neuronx-cc terminated abnormally" + SUPPORT + "\n",
        CompileError,
        "CompilerCrash",
        False,
        "[F134] neuronx-cc terminated abnormally",
        70,
    ),
    "exit 70 without a diagnostic": Case(
        "compile",
        "Compiler status ERROR" + DIAGNOSTIC_TAIL,
        CompileError,
        "CompilerFailed",
        False,
        "Compiler status ERROR",
        70,
    ),
    "partition limit during an in-process compile": Case(
        "compile",
        "Traceback (most recent call last):\n" + PARTITION_ERROR + "\n",
        CompileError,
        "KernelConstraint",
        False,
        "number of partitions 256 exceed architecture limitation of 128",
        1,
    ),
    # a compile that does not finish in the limit will not in the next try either (real-host audit 2, N5)
    "compile timeout": Case("compile", "", CompileError, "Timeout", False, "timed out", -9, timed_out=True),
    "NCC_EVRF066, NKI 0.7's LNC check": Case(
        "compile",
        NCC_LOG
        + "[NCC_EVRF066] NKI kernel 'matmul_kernel' is configured with LNC=1, but neuronx-cc is using LNC=2"
        + DIAGNOSTIC_TAIL,
        CompileError,
        "LncMismatch",
        False,
        "is configured with LNC=1, but neuronx-cc is using LNC=2",
        70,
    ),
    "SBUF out of memory (nki-autotune 97935bf)": Case(
        "compile", NCC_LOG + "Out of memory in sbuf\n", CompileError, "OutOfMemory", False, "Out of memory in sbuf", 70
    ),
    "SB allocation failure (aws-neuron-sdk#1060)": Case(
        "compile",
        "[GCA035]  Instruction: I-21-0 with opcode: TensorTensor couldn't be allocated in SB\nMemory Location "
        "Accessed:\n",
        CompileError,
        "OutOfMemory",
        False,
        "couldn't be allocated in SB",
        70,
    ),
    "the compiler's allocation failed past the compile's memory cap (issue 25)": Case(
        "compile",
        NCC_LOG + "terminate called after throwing an instance of 'std::bad_alloc'\n",
        CompileError,
        "CompileOOM",
        False,
        "std::bad_alloc",
        70,
    ),
    # capture (reference section 4): busy / init / timeout transient; the rest deterministic
    "busy, documented wording": Case(
        "capture",
        NRT + "NRT:nrt_allocate_neuron_cores               NeuronCore(s) not available - Requested:nc1-nc1 "
        "Available:0\n" + NRT + "NRT:nrt_init                                nrt_init failed. Status = 1\n",
        DeviceBusyError,
        "DeviceBusy",
        True,
        "NeuronCore(s) not available - Requested:nc1-nc1 Available:0",
    ),
    "busy, newer runtimes": Case(
        "capture",
        NRT + "NRT:nrt_allocate_neuron_cores               Virtual Neuron Core(s) not available - Requested:2 "
        "Available:0 Virtual Core size 1\n",
        DeviceBusyError,
        "DeviceBusy",
        True,
        "Virtual Neuron Core(s) not available - Requested:2",
    ),
    "NRT_EXEC_NC_BUSY": Case(
        "capture",
        NRT + "NRT:nrt_execute  NRT_EXEC_NC_BUSY: Neuron core is locked (in use) by another model/process\n",
        DeviceBusyError,
        "DeviceBusy",
        True,
        "NRT_EXEC_NC_BUSY",
    ),
    "nc busy as a status code": Case(
        "capture",
        'nrt_execute: status=1005, error message="Neuron core is locked"\n',
        DeviceBusyError,
        "DeviceBusy",
        True,
        "status=1005",
    ),
    "NRT_LOAD_NOT_ENOUGH_NC": Case(
        "capture",
        NRT + "NRT:nrt_load  NRT_LOAD_NOT_ENOUGH_NC\n",
        DeviceBusyError,
        "DeviceBusy",
        True,
        "NRT_LOAD_NOT_ENOUGH_NC",
    ),
    "nrt_init failed": Case(
        "capture",
        NRT + "NRT:nrt_init  nrt_init failed. Status = 1\n",
        CaptureError,
        "RuntimeInit",
        True,
        "nrt_init failed. Status = 1",
    ),
    "No neuron device available": Case(
        "capture",
        "ERROR  TDRV:tdrv_get_dev_info                       No neuron device available\n",
        CaptureError,
        "RuntimeInit",
        True,
        "No neuron device available",
    ),
    "NRT_TIMEOUT": Case(
        "capture", NRT + "NRT:nrt_execute  NRT_TIMEOUT\n", CaptureError, "Timeout", True, "NRT_TIMEOUT"
    ),
    "capture timeout": Case("capture", "", CaptureError, "Timeout", True, "timed out", -9, timed_out=True),
    "NTFF version skew at capture": Case(
        "capture",
        NTFF_SKEW,
        CaptureError,
        "ToolVersionMismatch",
        False,
        "NTFF version 4 is not supported by this neuron-profile: the runtime that wrote it is newer than the "
        "profiler; upgrade aws-neuronx-tools",
    ),  # fmt: skip
    "NRT_UNSUPPORTED_NEFF_VERSION": Case(
        "capture",
        NRT + "NRT:nrt_load  NRT_UNSUPPORTED_NEFF_VERSION\n",
        CaptureError,
        "VersionSkew",
        False,
        "NRT_UNSUPPORTED_NEFF_VERSION",
    ),
    "NRT_EXEC_BAD_INPUT": Case(
        "capture",
        NRT + "NRT:nrt_execute  NRT_EXEC_BAD_INPUT: input a has 12 bytes\n",
        CaptureError,
        "BadInput",
        False,
        "NRT_EXEC_BAD_INPUT",
    ),
    "NRT_EXEC_OOB": Case(
        "capture", NRT + "NRT:nrt_execute  NRT_EXEC_OOB\n", CaptureError, "OutOfBounds", False, "NRT_EXEC_OOB"
    ),
    "unrecognised capture failure": Case(
        "capture",
        "Traceback (most recent call last):\nRuntimeError: device fault\n",
        CaptureError,
        "CaptureError",
        False,
        "RuntimeError: device fault",
    ),
    # view (reference section 5)
    "NTFF version skew at view": Case(
        "view",
        NTFF_SKEW,
        ExtractError,
        "ToolVersionMismatch",
        False,
        "NTFF version 4 is not supported by this neuron-profile: the runtime that wrote it is newer than the "
        "profiler; upgrade aws-neuronx-tools to the runtime's Neuron release",
    ),  # fmt: skip
    "view timeout": Case("view", "", ExtractError, "Timeout", True, "timed out", -9, timed_out=True),
}


def _classify(case: Case):
    argv = {"compile": COMPILE_ARGV, "capture": CAPTURE_ARGV, "view": VIEW_ARGV}[case.tool]
    result = ToolResult(argv, case.returncode, "", case.output, timed_out=case.timed_out)
    if case.tool == "compile":
        return failures.compile_failure(result, timeout_seconds=1800)
    if case.tool == "capture":
        return failures.capture_failure(result, "neuron-profile")
    return failures.view_failure(result, "neuron-profile")


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_every_known_failure_string_maps_to_its_class(case: Case):
    error = _classify(case)
    assert type(error) is case.error_type
    assert (error.error_class, error.retryable) == (case.error_class, case.retryable)
    assert case.says in error.message and "\n" not in error.message
    assert error.argv and error.returncode == (None if case.timed_out else case.returncode)
    assert error.stderr_tail == (case.output or None)
    assert "Please open a support ticket" not in error.message


TRACE_CASES = {
    "partition limit (seed 004)": (
        ValueError(PARTITION_ERROR.removeprefix("ValueError: ")),
        TraceError,
        "KernelConstraint",
        "ValueError: number of partitions 256 exceed",
    ),
    "compiler diagnostic raised in-process": (
        RuntimeError("[NCC_EOOM002] Maximum peak HBM usage of 27.63GB exceeds HBM limit of 24.00GB"),
        CompileError,
        "CompilerDiagnostic",
        "[NCC_EOOM002]",
    ),
    "F134 raised by a baremetal compile": (
        RuntimeError("Compilation failed for lora with error\n[F134] neuronx-cc terminated abnormally" + SUPPORT),
        CompileError,
        "CompilerCrash",
        "[F134] neuronx-cc terminated abnormally",
    ),
    "any other tracer exception": (
        AssertionError("unexpected tile shape"),
        TraceError,
        "TraceError",
        "AssertionError: unexpected tile shape",
    ),
}


@pytest.mark.parametrize("error, error_type, error_class, says", TRACE_CASES.values(), ids=TRACE_CASES.keys())
def test_tracer_exceptions_are_deterministic_and_classified(error, error_type, error_class, says):
    mapped = failures.trace_failure(error, "legacy-penguin")
    assert type(mapped) is error_type and mapped.error_class == error_class and mapped.retryable is False
    assert mapped.message.startswith("legacy-penguin: ") and says in mapped.message


COMPILER_SAID = {  # (exception, what the compiler wrote to fd 2, type, class, the message carries)
    "a generic exception, the diagnostic on fd 2 (N2)": (
        RuntimeError("Pass pipeline failed"),
        NCC_LOG + "Out of memory in sbuf\n" + NCC_LOG + "Pass pipeline failed\n",
        CompileError,
        "OutOfMemory",
        "Out of memory in sbuf",
    ),
    "NKI 0.7's LNC mismatch on fd 2": (
        RuntimeError("Pass pipeline failed"),
        "[NCC_EVRF066] NKI kernel 'k' is configured with LNC=1, but neuronx-cc is using LNC=2\n",
        CompileError,
        "LncMismatch",
        "[NCC_EVRF066]",
    ),
    "an internal compiler error block on fd 2": (
        RuntimeError("Pass pipeline failed"),
        ICE_BLOCK,
        CompileError,
        "InternalCompilerError",
        "IndexError",
    ),
    "neuronx_cc_error returned, not raised": (
        CompilerFailed("neuronx_cc_error: backend exited 70"),
        "",
        CompileError,
        "CompilerFailed",
        "neuronx_cc_error: backend exited 70",
    ),
    "words no rule knows: kept in the message": (
        RuntimeError("Pass pipeline failed"),
        "lowering: step 3 of 9\nsomething new went wrong\nDiagnostic logs stored in /tmp/x\n",
        TraceError,
        "TraceError",
        "compiler: lowering: step 3 of 9 / something new went wrong",
    ),
}


@pytest.mark.parametrize(
    "error, output, error_type, error_class, says", COMPILER_SAID.values(), ids=COMPILER_SAID.keys()
)
def test_what_the_compiler_wrote_to_fd_2_classifies_the_failure_and_stays_in_the_row(
    error, output, error_type, error_class, says
):
    mapped = failures.trace_failure(error, "nki.compiler.driver", "Traceback (most recent call last): ...", output)
    assert type(mapped) is error_type and (mapped.error_class, mapped.retryable) == (error_class, False)
    assert says in mapped.message and "\n" not in mapped.message  # the row's error_message
    assert mapped.stderr_tail.startswith("Traceback") and mapped.stderr_tail.rstrip().endswith(output.strip()[-40:])


def test_the_first_rule_in_table_order_wins_not_the_first_line():
    """A busy core is followed by nrt_init failed: the cause, not the follow-on, decides."""
    output = (
        NRT + "NRT:nrt_init  nrt_init failed. Status = 1\n" + NRT + "NeuronCore(s) not available - Requested:nc0-nc0"
    )
    error = failures.capture_failure(ToolResult(CAPTURE_ARGV, 1, "", output), "neuron-explorer")
    assert isinstance(error, DeviceBusyError) and error.message.startswith("neuron-explorer capture failed:")


def test_classified_errors_survive_pickling_with_their_data():
    """Prefect pickles failed states: the class and retry decision must come back intact."""
    error = _classify(CASES["busy, newer runtimes"])
    clone = pickle.loads(pickle.dumps(error))
    assert type(clone) is DeviceBusyError
    assert (clone.error_class, clone.retryable, clone.argv) == ("DeviceBusy", True, CAPTURE_ARGV)
