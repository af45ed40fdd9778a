"""Stand-in `neuron-ls -j`: one simulated device exposing the configured logical NeuronCores."""

from __future__ import annotations

import argparse
import json
import sys

from kernelsweep.sim.config import SimConfig


def inventory(config: SimConfig) -> list[dict]:
    """One device, reported like the real tool: `nc_count` and `neuroncore_ids` count LOGICAL cores
    at the device's logical_neuroncore_config (the physical cores are lnc times as many). A host told
    its platform names its instance type, as newer neuron-ls does; one emulating every family does not."""
    instance = {"instance_type": f"{config.platform}.sim"} if config.platform else {}
    return [
        {
            **instance,
            "neuron_device": 0,
            "bdf": "00:1e.0",
            "cpu_affinity": "0-1",
            "numa_node": "0",
            "connected_to": [],
            "nc_count": config.cores,
            "logical_neuroncore_config": config.lnc,
            "memory_size": 32 * 2**30,
            "neuroncore_ids": list(range(config.cores)),
            "neuron_processes": [],
            "is_simulation": True,
        }
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="neuron-ls")
    parser.add_argument("-j", "--json-output", action="store_true")
    args = parser.parse_args(argv)
    devices = inventory(SimConfig.from_env())
    if args.json_output:
        print(json.dumps(devices))
    else:
        for d in devices:
            print(f"NEURON DEVICE {d['neuron_device']}: {d['nc_count']} NeuronCores (simulated)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
