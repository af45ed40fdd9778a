"""Stand-in `neuron-explorer` (SDK 2.30+): the same interface as `neuron-profile`."""

from kernelsweep.sim.neuron_profile import main

if __name__ == "__main__":
    from kernelsweep.sim.entry import run_tool_main

    run_tool_main(lambda: main(prog="neuron-explorer"))  # dies with its run; no interpreter shutdown
