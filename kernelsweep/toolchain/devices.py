"""`neuron-ls -j`: which NeuronCores this host can lease, at which LNC."""

from __future__ import annotations

import json
from dataclasses import dataclass

from kernelsweep.errors import KernelsweepError
from kernelsweep.toolchain.process import run_tool
from kernelsweep.toolchain.resolve import Toolchain


@dataclass(frozen=True)
class DeviceInventory:
    lnc: int
    logical_cores: list[int]
    instance_type: str | None
    busy_pids: list[int]


def parse_neuron_ls(text: str, default_lnc: int = 1) -> DeviceInventory:
    """Logical core ids number each device's physical cores / LNC, device after device."""
    devices = json.loads(text)
    lnc = default_lnc
    logical: list[int] = []
    busy: list[int] = []
    instance_type = None
    for device in devices:
        lnc = int(device.get("logical_neuroncore_config", default_lnc) or default_lnc)
        per_device = int(device["nc_count"]) // lnc
        logical.extend(range(len(logical), len(logical) + per_device))
        busy.extend(int(p["pid"]) for p in device.get("neuron_processes") or [])
        instance_type = device.get("instance_type", instance_type)
    return DeviceInventory(lnc=lnc, logical_cores=logical, instance_type=instance_type, busy_pids=busy)


def list_devices(toolchain: Toolchain, default_lnc: int = 1, timeout_seconds: float = 30) -> DeviceInventory:
    argv = toolchain.command("neuron-ls") + ["-j"]
    result = run_tool(argv, env=toolchain.env, timeout_seconds=timeout_seconds)
    if result.returncode != 0 or result.timed_out:
        raise KernelsweepError(
            f"neuron-ls failed: {result.output.strip()[-200:]}", argv=argv, stderr_tail=result.output
        )
    try:
        return parse_neuron_ls(result.stdout, default_lnc)
    except (ValueError, KeyError, TypeError) as exc:
        raise KernelsweepError(f"neuron-ls -j printed unparseable output ({exc})", argv=argv) from None
