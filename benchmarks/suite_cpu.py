"""Where a command's CPU goes, by kind of process: for finding what makes the slow test stage slow.

    python benchmarks/suite_cpu.py [--by-test] -- .venv/bin/python -m pytest -q -m slow

Runs the command, samples /proc once a second while it runs, and prints the CPU seconds of every
process on the machine by kind (Prefect servers, flow-run processes, workers, simulated tools, ...)
beside the machine's busy time from /proc/stat. A process that starts and ends between two samples
is not seen, so the kinds add up to less than the command's own CPU (all its processes, short ones
included, as the kernel sums them for the command when they end); the difference is printed as such.
Only the command's processes are counted (they carry a mark in their environment), so the figures
hold on a shared machine too; the wall time does not, and the machine's busy time is printed beside it.
Linux only.

`--by-test` also prints the CPU seconds of the 30 costliest tests: tests/conftest.py writes the test
each pytest process is running into a folder this names (SUITE_CPU_TESTS), and each sample's CPU goes
to the test of the process's nearest such ancestor. A fleet group's server and hosts are children of
that group's pytest process, so a fleet test carries their share while it runs; the stage's shared
server, started by the xdist controller, and PostgreSQL are counted apart. The samples are a second
apart, so a test shorter than that may be given the last second of the one before it.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")
MARK = f"SUITE_CPU_MARK={os.getpid()}"  # no PREFECT_ or KERNELSWEEP_ prefix: tests drop those from environments
TESTS_ENV = "SUITE_CPU_TESTS"  # the folder where each pytest process writes the test it runs (tests/conftest.py)
OUTSIDE = "(outside any test: the stage's server, PostgreSQL, collection, the controller)"


def program(argv: list[str]) -> tuple[str, list[str]]:
    """What a process runs (a Python module or script's name, `-c`, or the executable's name) and
    the arguments after it."""
    name, rest = Path(argv[0]).name, argv[1:]
    if name.startswith("python"):
        for i, arg in enumerate(rest):
            if arg in ("-m", "-c") and i + 1 < len(rest):
                return (rest[i + 1] if arg == "-m" else "-c " + rest[i + 1]), rest[i + 2 :]
            if not arg.startswith("-"):
                return Path(arg).name, rest[i + 1 :]
    return name, rest


# A fleet host's prefork server and the engines it forks (their argv is the server's), and the command
# that asks for each. The server is its worker's child but no one waits for it, so what it and its
# engines used reaches the command's own CPU only as far as samples saw it.
PREFORK = ("kernelsweep.flows.fleet.prefork", "kernelsweep.flows.fleet.engine")
# The simulated tools' template and the tools it forks (their argv is the template's), and the command
# that asks for each. The template waits for its tools, so its children's CPU counts all of them: the
# template is counted with it, its forked tools not apart.
TEMPLATE, TOOL_COMMAND = "kernelsweep.sim.template", "prefork_client.py"
SERVER_CLIS = ("prefect", "kernelsweep.flows.server_process")  # Prefect's command line, and the launcher's


def kind_of(argv: list[str]) -> str:
    what, args = program(argv)
    first = " ".join(args[:2])
    if what in ("prefect.engine", "prefect.runner._workspace_supervisor", *PREFORK):
        return "flow-run processes (Prefect's engine, forked or not, and its supervisor or command)"
    if (what == "prefect" and first.startswith("worker start")) or first == "fleet worker":
        return "Prefect workers"
    if what in SERVER_CLIS and first.startswith("server start"):
        return "Prefect servers"
    if what in SERVER_CLIS:
        return "other Prefect commands (deployments, database upgrades)"
    if what.startswith("kernelsweep.sim") or "tracing.worker" in what or what == TOOL_COMMAND:
        return "simulated tools and trace workers"
    if what in ("kernelsweep", "kernelsweep.flows.cli"):
        return "kernelsweep commands (their flow runs included)"
    if what == "pytest":
        return "pytest (the controller)"
    if what.startswith("-c import sys;exec"):
        return "pytest-xdist workers (tests run in-process)"
    if what.startswith(("postgres", "chrom")):
        return what.split()[0].rstrip(":")  # a PostgreSQL backend's title: "postgres: ..."
    return "other"


def busy_seconds() -> float:
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / TICKS  # all but idle and iowait


def _processes() -> tuple[dict[tuple[str, str], tuple[float, list[str]]], dict[str, str]]:
    """(pid, start time) -> (CPU seconds so far, argv) for every process of the command readable now
    (a template's with its reaped children's, a forked tool's not at all: its template's counts it
    once it ends), and every readable process's parent (pid -> pid), for `--by-test`.
    A PostgreSQL server's processes write their titles over the environment the mark is in, so a
    child of a marked postmaster is the command's too (a backend that ends between two samples is
    not seen)."""
    found, parents, templates, unmarked = {}, {}, set(), {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            command = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
            marked = MARK.encode() in (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        template = bool(command) and program(command)[0] == TEMPLATE
        ticks = stat[11:15] if template else stat[11:13]  # utime, stime (, cutime, cstime)
        cpu = (sum(int(f) for f in ticks) / TICKS, command)
        parents[entry.name] = stat[1]
        if command and marked:
            found[(entry.name, stat[19])] = cpu
            templates |= {entry.name} if template else set()
        elif command and command[0].startswith("postgres:"):
            unmarked[(entry.name, stat[19])] = (stat[1], cpu)
    postmasters = {pid for (pid, _), (_, argv) in found.items() if Path(argv[0]).name == "postgres"}
    found |= {key: cpu for key, (parent, cpu) in unmarked.items() if parent in postmasters}
    return {key: value for key, value in found.items() if parents.get(key[0]) not in templates}, parents


def _running_tests(folder: Path | None) -> dict[str, str]:
    """pid of a pytest process -> the test it is running now."""
    if folder is None:
        return {}
    found = {}
    for entry in folder.iterdir():
        try:
            found[entry.name] = entry.read_text()
        except OSError:
            continue
    return found


def _test_of(pid: str, parents: dict[str, str], tests: dict[str, str]) -> str:
    while pid in parents or pid in tests:
        if pid in tests:
            return tests[pid] or OUTSIDE
        pid = parents[pid]
    return OUTSIDE


def measure(
    argv: list[str], tests_folder: Path | None = None
) -> tuple[int, float, float, float, Counter[str], Counter[str]]:
    """Run `argv`; its exit code, wall seconds, the machine's busy seconds, the command's own CPU
    seconds (every process of it its parents waited for), CPU seconds by kind and by test (when
    `tests_folder` is given)."""
    seen: dict[tuple[str, str], float] = {}
    by_kind: Counter[str] = Counter()
    by_test: Counter[str] = Counter()
    busy, started = busy_seconds(), time.monotonic()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    name, value = MARK.split("=")
    env = {**os.environ, name: value} | ({TESTS_ENV: str(tests_folder)} if tests_folder else {})
    child = subprocess.Popen(argv, env=env)
    while True:
        processes, parents = _processes()
        tests = _running_tests(tests_folder)
        for key, (cpu, command) in processes.items():
            used = cpu - seen.get(key, 0.0)
            by_kind[kind_of(command)] += used
            if tests_folder is not None:
                by_test[_test_of(key[0], parents, tests)] += used
            seen[key] = cpu
        if child.poll() is not None:
            break
        time.sleep(1)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    own = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return child.returncode, time.monotonic() - started, busy_seconds() - busy, own, by_kind, by_test


def main(argv: list[str]) -> int:
    by_tests = argv[:1] == ["--by-test"]
    argv = argv[1:] if by_tests else argv
    if not argv or argv[0] != "--" or len(argv) < 2:
        print("usage: python benchmarks/suite_cpu.py [--by-test] -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="suite-cpu-tests-") as folder:
        code, wall, busy, own, by_kind, by_test = measure(argv[1:], Path(folder) if by_tests else None)
    cores = os.cpu_count() or 1
    print(f"\nwall {wall:.0f} s; machine busy {busy:.0f} CPU-s = {busy / wall:.2f} of {cores} cores on average")
    print(f"the command's own CPU: {own:.0f} s")
    for kind, seconds in by_kind.most_common():
        if seconds >= 0.5:
            print(f"  {seconds:8.1f} s  {kind}")
    unseen = own - sum(by_kind.values())  # negative: daemons (PostgreSQL) whose CPU no parent collects
    print(f"  {unseen:8.1f} s  not seen (processes shorter than a sample)")
    if by_tests:
        print("by test (the 30 costliest, and what ran outside any test):")
        for test, seconds in by_test.most_common(30):
            print(f"  {seconds:8.1f} s  {test}")
        if OUTSIDE not in dict(by_test.most_common(30)):
            print(f"  {by_test[OUTSIDE]:8.1f} s  {OUTSIDE}")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
