"""Verdicts that refuse to be given on a busy machine, and the load printed beside every figure.

A ratio or a CPU figure taken while other work shares the CPUs measures that work too (a wall / bound
of 1.76 and a "4.75x speedup" were once printed at load 30 on 2 cores). Every verdict line carries
the load average it was taken at, and a verdict is refused, with the reason, whenever the 1-minute
load exceeds the number of CPUs.
"""

from __future__ import annotations

import os

CPUS = os.cpu_count() or 1


def load() -> str:
    """The 1-, 5- and 15-minute load averages and the CPU count, as printed beside every figure."""
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f} on {CPUS} CPUs"


def busy() -> bool:
    return os.getloadavg()[0] > CPUS


def verdict(value: float, target: float, below: bool = True) -> str:
    """'(target <= 1.15: met; load ...)', or no verdict at all when the machine is busy."""
    bound = f"target {'<=' if below else '>='} {target:g}"
    if busy():
        return f"({bound}: NO VERDICT, the 1-minute load exceeds the CPU count; {load()})"
    ok = value <= target if below else value >= target
    return f"({bound}: {'met' if ok else 'MISSED'}; {load()})"
