"""A kernel's history with one culprit commit, as a git repository: what `kernelsweep bisect --repo`
is tested and measured on.

Commit k of the history holds `history_add.py` (a kernel definition: vector add) and
`history_add_nki.py` (its NKI kernel) at revision k. Every commit changes the kernel's source (a new
revision line, so each commit traces and compiles anew, as a real history would); from the culprit
commit on, the kernel writes each result tile twice. The simulator times a kernel from its trace, so
the extra store is more DMA traffic, and at `SHAPE` vector add is bound by its DMA: about 28% slower
by real code, not by a knob (at small n, launch overhead hides most of it). Nothing here is a mock
of git: the repository is made with git itself.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

KERNEL_REF = "history_add:history_add"
SHAPE = "n=1048576,free_size=512"  # where the culprit's extra store shows (54 -> 69 us, noise off)

DEFINITION = '''"""Vector add, as kept in this repository (a kernelsweep simulator history)."""

from kernelsweep.kernels.vector_add import VectorAdd


class HistoryAdd(VectorAdd):
    name = "history_add"
    nki_kernel = "history_add_nki:add_kernel"


history_add = HistoryAdd()
'''

KERNEL = '''"""out = a + b, tile by tile (revision {revision})."""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def add_kernel(a, b):
    tiles, parts, free = a.shape
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for t in range(nl.program_id(0), tiles, nl.num_programs(0)):
        a_tile = nl.ndarray((parts, free), dtype=a.dtype, buffer=nl.sbuf)
        b_tile = nl.ndarray((parts, free), dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a_tile, src=a[t])
        nisa.dma_copy(dst=b_tile, src=b[t])
        total = nl.ndarray((parts, free), dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=total, data1=a_tile, data2=b_tile, op=nl.add)
        nisa.dma_copy(dst=out[t], src=total)
{extra}    return out
'''
EXTRA_STORE = "        nisa.dma_copy(dst=out[t], src=total)  # the culprit: the result written twice\n"


def write_history(repo: Path, commits: int, culprit: int) -> list[str]:
    """A new repository at `repo` with `commits` commits, oldest first; from commit number `culprit`
    (0-based, > 0) on, the kernel stores each tile twice. Returns the commits' hashes, oldest first."""
    if not 0 < culprit < commits:
        raise ValueError(f"culprit {culprit}: give a commit after the first and within the {commits}")
    repo.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    (repo / "history_add.py").write_text(DEFINITION)
    hashes = []
    for k in range(commits):
        extra = EXTRA_STORE if k >= culprit else ""
        (repo / "history_add_nki.py").write_text(KERNEL.format(revision=k, extra=extra))
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", f"revision {k}" + (" (stores twice)" if k == culprit else ""))
        hashes.append(_git(repo, "rev-parse", "HEAD"))
    return hashes


def _git(repo: Path, *args: str) -> str:
    who = {f"GIT_{role}_{part}": value for role in ("AUTHOR", "COMMITTER")
           for part, value in (("NAME", "sim"), ("EMAIL", "sim@localhost"))}  # fmt: skip
    env = {**os.environ, **who, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    done = subprocess.run(["git", "-C", str(repo), *args], env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip()
