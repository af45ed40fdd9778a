"""Translate a failed tool run into the error it means, once, at the boundary.

One table of rules per tool, matched against the tool's output; the first rule in table order
wins, so specific diagnostics come before the follow-on lines they cause (a busy core is followed
by `nrt_init failed`). Transient failures (a NeuronCore held by another process, runtime init,
timeouts) are retried by the tasks; deterministic ones (compiler diagnostics, kernel constraint
violations, bad input, version skew) never are. The patterns are the real strings from the Neuron
docs and issue threads (reference sections 2 and 4); tests/test_failures.py walks every one.

error_class values are stable: they land in result rows and are what users group failures by.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from kernelsweep.errors import CaptureError, CompileError, DeviceBusyError, ExtractError, KernelsweepError, TraceError
from kernelsweep.toolchain.process import ToolResult

E = TypeVar("E", bound=KernelsweepError)


@dataclass(frozen=True)
class Rule:
    pattern: re.Pattern[str]
    error_class: str
    retryable: bool
    error_type: type[KernelsweepError] | None = None  # None: the stage's own error type


def _rule(regex: str, error_class: str, retryable: bool, error_type: type[KernelsweepError] | None = None) -> Rule:
    return Rule(re.compile(regex), error_class, retryable, error_type)


_INTERNAL_COMPILER_ERROR = _rule(r"An Internal Compiler Error has occurred", "InternalCompilerError", False)
_PARTITION_LIMIT = _rule(r"number of partitions \d+ exceed architecture limitation of \d+", "KernelConstraint", False)
_NKI_DOCUMENTED_ERROR = _rule(r"nki\.errors\.html#err-", "KernelConstraint", False)
# The profiler is older than the runtime that wrote the NTFF (aws-neuron-sdk#1007): no retry helps.
_NTFF_SKEW = _rule(r"NTFF version (\d+) is not supported", "ToolVersionMismatch", False)
TOOLS_PACKAGE = "aws-neuronx-tools"

COMPILER_RULES: Sequence[Rule] = (
    # NKI 0.7: "NKI kernel '<k>' is configured with LNC=<a>, but neuronx-cc is using LNC=<b>" (addendum F10)
    _rule(r"\[NCC_EVRF066\]", "LncMismatch", False),
    # The allocator's words: "Out of memory in sbuf" (awslabs/nki-autotune 97935bf), "[GCA035] Instruction:
    # ... couldn't be allocated in SB" (aws-neuron-sdk#1060)
    _rule(r"(?i)out of memory in (?:sbuf|psum)", "OutOfMemory", False),
    _rule(r"\[GCA\d+\].*couldn't be allocated in (?:SB|PSUM)", "OutOfMemory", False),
    # The host's memory, not the chip's: the compiler's allocation failed (past the compile's RLIMIT_AS
    # cap, kernelsweep.toolchain.compile_cost, or the host's memory): the same compile would fail again
    _rule(r"MemoryError|std::bad_alloc|Cannot allocate memory", "CompileOOM", False),
    _rule(r"\[NCC_E[A-Z]+\d+\]", "CompilerDiagnostic", False),
    # Internal errors, e.g. only at LNC=2: [NCC_IXLV002], [NCC_ILLC059] (aws-neuron-sdk#1298, #1352)
    _rule(r"\[NCC_I[A-Z]+\d+\]", "InternalCompilerError", False),
    _rule(r"\[TEN\d+\]", "InternalCompilerError", False),
    _INTERNAL_COMPILER_ERROR,
    _rule(r"\[F\d+\] neuronx-cc terminated abnormally", "CompilerCrash", False),
    _PARTITION_LIMIT,  # in-process compiles (nki_standalone, frontend) trace first
    _NKI_DOCUMENTED_ERROR,
)

CAPTURE_RULES: Sequence[Rule] = (
    _rule(r"(Virtual )?Neuron ?Core\(s\) not available", "DeviceBusy", True, DeviceBusyError),
    _rule(r"NRT_EXEC_NC_BUSY|Neuron core is locked|status\s*=\s*1005\b", "DeviceBusy", True, DeviceBusyError),
    _rule(r"NRT_LOAD_NOT_ENOUGH_NC", "DeviceBusy", True, DeviceBusyError),
    _rule(r"nrt_init failed", "RuntimeInit", True),
    _rule(r"No neuron device available", "RuntimeInit", True),
    _rule(r"NRT_TIMEOUT", "Timeout", True),
    _NTFF_SKEW,
    _rule(r"NRT_UNSUPPORTED_NEFF_VERSION", "VersionSkew", False),
    _rule(r"NEFF version: \S+, features: \S+ are not supported", "VersionSkew", False),  # aws-neuron-sdk#820
    # A NEFF the runtime will not load (compiled for another target, another LNC): deterministic.
    _rule(r"Failed to load NN: .*err: \d+", "NeffLoad", False),
    _rule(r"NRT_EXEC_BAD_INPUT|status\s*=\s*1002\b", "BadInput", False),
    _rule(r"NRT_EXEC_OOB|status\s*=\s*1006\b", "OutOfBounds", False),
)

VIEW_RULES: Sequence[Rule] = (_NTFF_SKEW,)

TRACE_RULES: Sequence[Rule] = (
    _PARTITION_LIMIT,
    _NKI_DOCUMENTED_ERROR,
    # A kernel using what its NKI generation removed (nl.par_dim, nl.load on 0.2): deterministic.
    _rule(r"module '(?:neuronxcc\.)?nki\.\w+' has no attribute '\w+'", "NkiApiMissing", False),
)

_SUPPORT_TICKET = re.compile(r"\s+-\s+Please open a support ticket.*$")
_LOG_PREFIX = re.compile(r"^.*?\[neuronx-cc\]:\s*")  # "2023-07-14T18:16:48Z ERROR 26345 [neuronx-cc]: "
# The runtime's: "2024-Aug-02 17:21:14.123456 7434:7434  ERROR   NRT:nrt_init   " (reference section 4)
_NRT_PREFIX = re.compile(r"^\d{4}-\w{3}-\d{2} [\d:.]+ \d+:\d+\s+[A-Z]+\s+\S+\s+")


def match(rules: Sequence[Rule], text: str) -> tuple[Rule, str] | None:
    """The first rule (in table order) found in `text`, and the message it implies."""
    for rule in rules:
        found = rule.pattern.search(text)
        if found:
            return rule, _message_at(text, found.start())
    return None


def _message_at(text: str, offset: int) -> str:
    """From the match to the end of its line, minus the boilerplate support-ticket tail."""
    end = text.find("\n", offset)
    return _SUPPORT_TICKET.sub("", " ".join(text[offset : None if end < 0 else end].split()))


def _internal_error_summary(text: str) -> str | None:
    """The ICE block names the Python error inside it: `Error class:` and `Error message:`."""
    kind = re.search(r"Error class:\s*(\S+)", text)
    detail = re.search(r"Error message:[ \t]*(\S[^\n]*)", text)
    if not kind and not detail:
        return None
    parts = [m.group(1).strip() for m in (kind, detail) if m]
    return "An Internal Compiler Error has occurred: " + ": ".join(parts)


def _last_line(text: str, fallback: str) -> str:
    lines = [_NRT_PREFIX.sub("", _LOG_PREFIX.sub("", line)).strip() for line in text.splitlines()]
    lines = [line for line in lines if line and not line.startswith("Diagnostic logs stored in")]
    return lines[-1] if lines else fallback


def compile_failure(result: ToolResult, timeout_seconds: float) -> CompileError:
    """A failed `neuronx-cc compile`: diagnostics, crashes, a bare exit 70 (how failing compiles exit
    in practice) and timeouts are deterministic for the same input, so never worth a retry: a kernel
    that does not compile within the limit will not in the next try either (real-host audit 2, N5)."""
    if result.timed_out:
        return CompileError(
            f"neuronx-cc compile timed out (limit {timeout_seconds:.0f} s); shrink the shape or raise the limit",
            retryable=False, error_class="Timeout", argv=result.argv, stderr_tail=result.output,
        )  # fmt: skip
    found = match(COMPILER_RULES, result.output)
    if found:
        rule, message = found
        if rule is _INTERNAL_COMPILER_ERROR:
            message = _internal_error_summary(result.output) or message
        error_class, retryable = rule.error_class, rule.retryable
    else:
        message = _last_line(result.output, f"exit code {result.returncode}")
        error_class, retryable = "CompilerFailed", False
    return CompileError(
        f"neuronx-cc failed: {message}",
        retryable=retryable,
        error_class=error_class,
        argv=result.argv,
        returncode=result.returncode,
        stderr_tail=result.output,
    )


def _upgrade_hint(rule: Rule, message: str, tool: str) -> str:
    """An NTFF newer than the profiler: say which package to upgrade, in one line."""
    if rule is not _NTFF_SKEW:
        return message
    found = rule.pattern.search(message)
    version = found.group(1) if found else "?"
    return (
        f"NTFF version {version} is not supported by this {tool}: the runtime that wrote it is newer than "
        f"the profiler; upgrade {TOOLS_PACKAGE} to the runtime's Neuron release"
    )


def _timed_out(error_type: type[E], what: str, result: ToolResult) -> E:
    """A run killed at its timeout: transient, whichever tool it was."""
    return error_type(
        f"{what} timed out", retryable=True, error_class="Timeout", argv=result.argv, stderr_tail=result.output
    )


def capture_failure(result: ToolResult, tool: str) -> CaptureError:
    """A failed capture: busy / init / timeout are transient, bad input and version skew are not."""
    if result.timed_out:
        return _timed_out(CaptureError, f"{tool} capture", result)
    found = match(CAPTURE_RULES, result.output)
    if found is None:  # unrecognised: deterministic, classed by the error type alone
        return CaptureError(
            f"{tool} capture failed: {_last_line(result.output, f'exit code {result.returncode}')}",
            argv=result.argv,
            returncode=result.returncode,
            stderr_tail=result.output,
        )
    rule, message = found
    error_type = rule.error_type if rule.error_type and issubclass(rule.error_type, CaptureError) else CaptureError
    return error_type(
        f"{tool} capture failed: {_upgrade_hint(rule, message, tool)}",
        retryable=rule.retryable,
        error_class=rule.error_class,
        argv=result.argv,
        returncode=result.returncode,
        stderr_tail=result.output,
    )


def view_failure(result: ToolResult, tool: str) -> ExtractError:
    """A failed `view`: only a timeout is worth another try; skew and bad sessions are not."""
    if result.timed_out:
        return _timed_out(ExtractError, f"{tool} view", result)
    found = match(VIEW_RULES, result.output)
    message = _upgrade_hint(*found, tool) if found else _last_line(result.output, f"exit code {result.returncode}")
    return ExtractError(
        f"{tool} view failed: {message}",
        retryable=False,
        error_class=found[0].error_class if found else None,
        argv=result.argv,
        returncode=result.returncode,
        stderr_tail=result.output,
    )


def trace_failure(
    error: BaseException, tracer: str, details: str | None = None, compiler_output: str = ""
) -> KernelsweepError:
    """An exception raised by a tracer (in the trace worker): always deterministic for the same kernel.

    Tracers that also compile (the nki driver and frontend, nki_standalone) fail with the compiler's
    diagnostics; those are CompileErrors, so rows say which step really failed. The compiler writes
    them to the C-level stderr (`compiler_output`, captured from fd 2), not into the exception, whose
    text may be only "Pass pipeline failed" (awslabs/nki-autotune 97935bf); its last lines are kept in
    the message and the tail in the error's stderr tail, after `details` (the worker's traceback).
    """
    from kernelsweep.toolchain.tracing.calls import CompilerFailed  # deferred: in the worker only

    text = f"{type(error).__name__}: {error}"
    first_line = " ".join(text.splitlines()[0].split())
    output = compiler_output.strip()
    tail = "\n".join(part for part in (details or text, output and "--- compiler output (fd 2) ---\n" + output) if part)
    found = match(TRACE_RULES, text)
    if found:
        return TraceError(f"{tracer}: {first_line}", error_class=found[0].error_class, stderr_tail=tail)
    found = match(COMPILER_RULES, f"{text}\n{output}")
    if found:
        rule, message = found
        if rule is _INTERNAL_COMPILER_ERROR:
            message = _internal_error_summary(output or text) or message
        return CompileError(f"{tracer}: {message}", error_class=rule.error_class, stderr_tail=tail)
    said = f"; compiler: {_last_lines(output)}" if output else ""
    if isinstance(error, CompilerFailed):
        return CompileError(f"{tracer}: {first_line}{said}", error_class="CompilerFailed", stderr_tail=tail)
    return TraceError(f"{tracer}: {first_line}{said}", stderr_tail=tail)


def _last_lines(text: str, count: int = 3, limit: int = 500) -> str:
    """The compiler's last words, one line: what a row's error message keeps of its output."""
    lines = [_LOG_PREFIX.sub("", line).strip() for line in text.splitlines()]
    kept = " / ".join([line for line in lines if line and not line.startswith("Diagnostic logs stored in")][-count:])
    return kept if len(kept) <= limit else "..." + kept[-limit:]
