"""Stand-in `neuron-explorer` (SDK 2.30+): the same interface as `neuron-profile`."""

import sys

from kernelsweep.sim.neuron_profile import main

if __name__ == "__main__":
    sys.exit(main(prog="neuron-explorer"))
