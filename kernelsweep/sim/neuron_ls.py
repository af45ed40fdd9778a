"""Stand-in `neuron-ls -j`: one simulated device, its physical cores grouped at the caller's LNC.

Like the real tool on trn2 it reports cores at the NEURON_LOGICAL_NC_CONFIG of its environment
(else the device's own config), so the same device shows 4 cores at LNC=2 and 8 at LNC=1; a device
of a trn1 or inf2 host has no logical core config and reports no `logical_neuroncore_config`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from kernelsweep.sim.config import SimConfig


def inventory(config: SimConfig, requested_lnc: str | None = None) -> list[dict]:
    """One device, reported like the real tool: `nc_count` and `neuroncore_ids` count LOGICAL cores
    at the LNC in force. A host told its platform names its instance type, as newer neuron-ls does;
    one emulating every family does not."""
    lnc = config.lnc_for(requested_lnc)
    cores = config.physical_cores // lnc
    instance = {"instance_type": f"{config.platform}.sim"} if config.platform else {}
    lnc_field = {"logical_neuroncore_config": lnc} if config.platform in (None, "trn2") else {}
    return [
        {
            **instance,
            "neuron_device": 0,
            "bdf": "00:1e.0",
            "cpu_affinity": "0-1",
            "numa_node": "0",
            "connected_to": [],
            "nc_count": cores,
            **lnc_field,
            "memory_size": 32 * 2**30,
            "neuroncore_ids": list(range(cores)),
            "neuron_processes": [],
            "is_simulation": True,
        }
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="neuron-ls")
    parser.add_argument("-j", "--json-output", action="store_true")
    args = parser.parse_args(argv)
    devices = inventory(SimConfig.from_env(), os.environ.get("NEURON_LOGICAL_NC_CONFIG"))
    if args.json_output:
        print(json.dumps(devices))
    else:
        for d in devices:
            print(f"NEURON DEVICE {d['neuron_device']}: {d['nc_count']} NeuronCores (simulated)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
