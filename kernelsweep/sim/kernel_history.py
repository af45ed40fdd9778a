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

import importlib.util
import os
import subprocess
from pathlib import Path

KERNEL_REF = "history_add:history_add"
NKI_SOURCE = "kernelsweep.kernels.nki.vector_add"
SHAPE = "n=1048576,free_size=512"  # where the culprit's extra store shows (54 -> 69 us, noise off)

DEFINITION = '''"""Vector add, as kept in this repository (a kernelsweep simulator history)."""

from kernelsweep.kernels.vector_add import VectorAdd


class HistoryAdd(VectorAdd):
    name = "history_add"
    nki_kernel = "history_add_nki:add_kernel"


history_add = HistoryAdd()
'''

STORE = "        nisa.dma_copy(dst=out[t], src=total)\n"  # the NKI vector add's store of each result tile
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
        (repo / "history_add_nki.py").write_text(_kernel_source(k, extra))
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", f"revision {k}" + (" (stores twice)" if k == culprit else ""))
        hashes.append(_git(repo, "rev-parse", "HEAD"))
    return hashes


def _kernel_source(revision: int, extra: str) -> str:
    """The built-in NKI vector add's source (read, never imported: it imports nki), renamed, at this
    revision, with `extra` after its store."""
    spec = importlib.util.find_spec(NKI_SOURCE)
    assert spec is not None and spec.origin is not None
    source = Path(spec.origin).read_text()
    assert STORE in source, f"{NKI_SOURCE} no longer stores each tile as the history expects"
    source = source.replace("def vector_add_kernel(", "def add_kernel(").replace(STORE, STORE + extra)
    return f"# revision {revision}\n{source}"


def _git(repo: Path, *args: str) -> str:
    who = {f"GIT_{role}_{part}": value for role in ("AUTHOR", "COMMITTER")
           for part, value in (("NAME", "sim"), ("EMAIL", "sim@localhost"))}  # fmt: skip
    env = {**os.environ, **who, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    done = subprocess.run(["git", "-C", str(repo), *args], env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip()
