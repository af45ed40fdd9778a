"""Stand-in `neuron-explorer` (SDK 2.30+): the same interface as `neuron-profile`."""

import sys

from kernelsweep.sim.neuron_profile import main

if __name__ == "__main__":
    from kernelsweep.toolchain.parent_death import arm

    arm()  # first: this tool dies with the run that started it (process.run_tool)
    sys.exit(main(prog="neuron-explorer"))
