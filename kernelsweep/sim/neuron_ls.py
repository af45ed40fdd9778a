"""Stand-in `neuron-ls` JSON: one simulated device, its physical cores grouped at the caller's LNC.

Like the real tool on trn2 it reports cores at the NEURON_LOGICAL_NC_CONFIG of its environment
(else the device's own config), so the same device shows 4 cores at LNC=2 and 8 at LNC=1; a device
of a trn1 or inf2 host has no logical core config and reports no `logical_neuroncore_config`.

A host told to be unnamed (KERNELSWEEP_SIM_UNNAMED) names no instance type in any form.

`-j` is the JSON of every release before 2.34; 2.34 removes it for `--output-format json`, which
"adds top-level fields ... such as instance and UltraServer details" (announced, layout unpublished:
this stand-in's `instance` / `ultraserver` / `neuron_devices` keys are a guess at it, see sim.tools).
"""

from __future__ import annotations

import argparse
import json
import os

from kernelsweep.sim.config import SimConfig


def inventory(config: SimConfig, requested_lnc: str | None = None) -> list[dict]:
    """One device, reported like the real tool: `nc_count` and `neuroncore_ids` count LOGICAL cores
    at the LNC in force. A host told its platform names its instance type, as newer neuron-ls does;
    one emulating every family does not."""
    if config.cores == 0:
        return []  # a host without a Neuron device: a compile farm's (KERNELSWEEP_SIM_CORES=0)
    lnc = config.lnc_for(requested_lnc)
    cores = config.physical_cores // lnc
    instance = {"instance_type": f"{config.platform}.sim"} if config.platform and not config.unnamed else {}
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


def new_format(config: SimConfig, devices: list[dict]) -> dict:
    """2.34's `--output-format json` as this stand-in guesses it: shared facts at the top level."""
    per_device = [{k: v for k, v in d.items() if k != "instance_type"} for d in devices]
    named = config.platform and not config.unnamed
    return {"instance": {"instance_type": f"{config.platform}.sim"} if named else {},
            "ultraserver": None, "neuron_devices": per_device}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    config = SimConfig.from_env()
    parser = argparse.ArgumentParser(prog="neuron-ls")
    if config.tools.neuron_ls_j:
        parser.add_argument("-j", "--json-output", action="store_true")
    parser.add_argument("--output-format", choices=["json", "table"])
    args = parser.parse_args(argv)
    devices = inventory(config, os.environ.get("NEURON_LOGICAL_NC_CONFIG"))
    if args.output_format == "json" and not config.tools.neuron_ls_j:
        print(json.dumps(new_format(config, devices)))
    elif args.output_format == "json":  # before 2.34 the flag is neuron-explorer's alone
        parser.error("unrecognized arguments: --output-format json")
    elif getattr(args, "json_output", False):
        print(json.dumps(devices))
    else:
        for d in devices:
            print(f"NEURON DEVICE {d['neuron_device']}: {d['nc_count']} NeuronCores (simulated)")
    return 0


if __name__ == "__main__":
    from kernelsweep.sim.entry import run_tool_main

    run_tool_main(main)  # dies with its run; no interpreter shutdown
