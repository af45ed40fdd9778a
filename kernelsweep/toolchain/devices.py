"""`neuron-ls`'s JSON: which NeuronCores this host can lease, at which LNC.

neuron-ls reports LOGICAL NeuronCores: `nc_count` and `neuroncore_ids` count cores at the device's
`logical_neuroncore_config` (a trn2 device, 8 physical cores, shows 4 at the default LNC=2), and the
ids run on across devices (device 1 of a trn2.48xlarge holds 4-7). `NEURON_RT_VISIBLE_CORES` takes
those logical ids; logical core i is made of physical cores i*lnc .. i*lnc+lnc-1, which is what
the per-physical-core lease locks (kernelsweep.locks) and AWS's own harness rely on.

The grouping depends on the caller's NEURON_LOGICAL_NC_CONFIG, which DLAMI containers export
globally, so neuron-ls runs under the LNC the sweep will capture at (as nki-library's harness does)
and leases are built per LNC. A device another process holds (`neuron_processes`) is left out:
every capture on it would only meet the runtime's busy error.

Neuron 2.34 drops `-j/--json-output` for `--output-format json`, "an updated JSON output" that
"adds top-level fields for information that applies to more than one device, such as instance and
UltraServer details" (announce-intent-eos-neuron-ls-json, 2026-10-16). Its layout is not published
yet, so both forms are tried (-j first: every release before 2.34 has it; the one that answered is
remembered), and the parser takes the device list wherever the new object holds it and the instance
type from its top level. A first 2.34 host's `doctor --smoke` shows the real layout (step 1).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kernelsweep.errors import DeviceListError
from kernelsweep.toolchain.process import run_tool
from kernelsweep.toolchain.resolve import Toolchain


@dataclass(frozen=True)
class NeuronProcess:
    pid: int
    command: str
    runtime_version: str | None


@dataclass(frozen=True)
class NeuronDevice:
    index: int
    lnc: int
    logical_cores: tuple[int, ...]
    memory_bytes: int | None
    processes: tuple[NeuronProcess, ...]


@dataclass(frozen=True)
class DeviceInventory:
    lnc: int
    logical_cores: list[int]
    instance_type: str | None
    busy_pids: list[int]
    devices: tuple[NeuronDevice, ...] = field(default=())

    def physical_cores(self, logical: int) -> tuple[int, ...]:
        if logical not in self.logical_cores:
            raise ValueError(f"logical NeuronCore {logical} is not on this host (visible: {self.logical_cores})")
        return tuple(range(logical * self.lnc, (logical + 1) * self.lnc))

    @property
    def physical_core_map(self) -> dict[int, tuple[int, ...]]:
        return {logical: self.physical_cores(logical) for logical in self.logical_cores}

    @property
    def held(self) -> tuple[NeuronDevice, ...]:
        """Devices another process holds."""
        return tuple(d for d in self.devices if d.processes)

    @property
    def free_cores(self) -> list[int]:
        """The logical cores a sweep may lease: those of devices no other process holds."""
        held = {core for d in self.held for core in d.logical_cores}
        return [core for core in self.logical_cores if core not in held]

    def held_notice(self) -> str | None:
        if not self.held:
            return None
        parts = [
            f"device {d.index} (cores {','.join(map(str, d.logical_cores))}: "
            + ", ".join(f"pid {p.pid} {p.command}".strip() for p in d.processes)
            + ")"
            for d in self.held
        ]
        return f"left out NeuronCores another process holds, at LNC={self.lnc}: {'; '.join(parts)}"


JSON_FORMS = (["-j"], ["--output-format", "json"])  # before 2.34, from 2.34
_working_form: dict[tuple[str, ...], list[str]] = {}


def _devices_and_instance(document: Any) -> tuple[list[Mapping[str, Any]], str | None]:
    """`-j`'s list of devices; or 2.34's object: the first list of device objects in it (any key),
    and an instance type from its top level (`instance_type`, or an `instance` object's)."""
    if isinstance(document, list):
        return document, None
    if not isinstance(document, dict):
        raise ValueError("expected a JSON list of devices or an object holding one")
    lists = [v for v in document.values() if isinstance(v, list) and v and all(isinstance(d, dict) for d in v)]
    devices = next((v for v in lists if any("neuron_device" in d or "nc_count" in d for d in v)), None)
    if devices is None:
        raise ValueError("no list of devices in the JSON object")
    instance = document.get("instance")
    found = document.get("instance_type") or (instance.get("instance_type") if isinstance(instance, dict) else None)
    return devices, str(found) if found else None


def parse_neuron_ls(text: str, default_lnc: int = 1) -> DeviceInventory:
    """Parse neuron-ls's JSON (either form); `default_lnc` applies where a device omits
    logical_neuroncore_config (older tools; pass the platform default: 2 on trn2, 1 on trn1/inf2).

    One process runs at one LNC, so devices reporting different LNCs are an error, not a guess.
    """
    entries, top_instance = _devices_and_instance(json.loads(text))
    devices: list[NeuronDevice] = []
    next_id = 0
    for entry in sorted(entries, key=lambda d: int(d.get("neuron_device", 0))):
        device = _device(entry, default_lnc, next_id)
        devices.append(device)
        next_id = max(device.logical_cores, default=next_id - 1) + 1
    lncs = {d.lnc for d in devices}
    if len(lncs) > 1:
        raise ValueError(f"devices report different logical_neuroncore_config values {sorted(lncs)}")
    logical = [core for d in devices for core in d.logical_cores]
    if len(set(logical)) != len(logical):
        raise ValueError(f"a NeuronCore id appears on two devices: {logical}")
    return DeviceInventory(
        lnc=lncs.pop() if lncs else default_lnc,
        logical_cores=logical,
        # 2.34's form names the instance at its top level; some releases on every device; older ones nowhere.
        instance_type=top_instance or next((str(e["instance_type"]) for e in entries if e.get("instance_type")), None),
        busy_pids=[p.pid for d in devices for p in d.processes],
        devices=tuple(devices),
    )


def _device(entry: Mapping[str, Any], default_lnc: int, next_id: int) -> NeuronDevice:
    lnc = int(entry.get("logical_neuroncore_config") or default_lnc)
    ids = entry.get("neuroncore_ids")
    if ids is None:  # older tools: number the device's logical cores on from the previous device
        ids = range(next_id, next_id + int(entry["nc_count"]))
    processes = tuple(
        NeuronProcess(int(p["pid"]), str(p.get("command", "")), p.get("neuron_runtime_version"))
        for p in entry.get("neuron_processes") or []
        if not str(p.get("command", "")).startswith("neuron-ls")  # neuron-ls -a lists itself
    )
    memory = entry.get("memory_size")
    return NeuronDevice(
        index=int(entry.get("neuron_device", 0)),
        lnc=lnc,
        logical_cores=tuple(int(i) for i in ids),
        memory_bytes=int(memory) if memory is not None else None,
        processes=processes,
    )


def list_devices(
    toolchain: Toolchain, default_lnc: int = 1, lnc: int | None = None, timeout_seconds: float = 30
) -> DeviceInventory:
    """neuron-ls's JSON under NEURON_LOGICAL_NC_CONFIG=`lnc` (None: whatever this process exports)."""
    command = tuple(toolchain.command("neuron-ls"))
    env = {**toolchain.env, **({"NEURON_LOGICAL_NC_CONFIG": str(lnc)} if lnc is not None else {})}
    key = (*command, *sorted(f"{k}={v}" for k, v in toolchain.env.items()))
    remembered = _working_form.get(key)
    forms = [remembered, *(f for f in JSON_FORMS if f != remembered)] if remembered else list(JSON_FORMS)
    failures = []
    for form in forms:
        argv = [*command, *form]
        result = run_tool(argv, env=env, timeout_seconds=timeout_seconds)
        if result.returncode == 0 and not result.timed_out:
            _working_form[key] = form
            break
        failures.append(f"{' '.join(form)}: {result.output.strip()[-160:] or f'exit {result.returncode}'}")
    else:
        raise DeviceListError(f"neuron-ls failed: {'; '.join(failures)}", argv=argv, stderr_tail=result.output)
    try:
        return parse_neuron_ls(result.stdout, default_lnc)
    except (ValueError, KeyError, TypeError) as exc:
        raise DeviceListError(
            f"{' '.join(['neuron-ls', *form])} printed unparseable output ({exc})", argv=argv
        ) from None
