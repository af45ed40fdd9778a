"""`kernelsweep`: validate, run and inspect sweeps from the command line.

Exit codes (every command):
    0  success (every point ok; every artifact verified; the real toolchain is ready)
    1  the work ran but found a problem: some points failed (their rows are written), an artifact
       failed verification, or `doctor`: sweeps here will use the simulator
    2  usage: a bad spec, option or file; a results or artifact location that cannot be written.
       Nothing ran and nothing was written
    3  the run failed for a reason outside the spec (S3 went away, a tool is broken); what finished
       is saved in the run's journal and the same command finishes the run
    4  an internal error in kernelsweep (a bug: please report it with KERNELSWEEP_DEBUG=1 output)
  130  interrupted by Ctrl-C (SIGINT); 143: by SIGTERM. What finished is saved, as for 3
Every failure is one line on stderr, never a traceback (set KERNELSWEEP_DEBUG=1 to see one).
"""

from __future__ import annotations

from kernelsweep.flows.cli.app import cli, main

__all__ = ["cli", "main"]
