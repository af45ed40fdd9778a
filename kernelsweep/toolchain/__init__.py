"""Adapters for the external Neuron tools: one module per tool, all through `process.run_tool`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernelsweep import public_face

if TYPE_CHECKING:
    from kernelsweep.toolchain.compile_cost import CompileCost
    from kernelsweep.toolchain.devices import DeviceInventory, list_devices
    from kernelsweep.toolchain.neff import NeffInfo, read_neff
    from kernelsweep.toolchain.process import Slots, ToolResult, kill_running_tools, recording, run_tool
    from kernelsweep.toolchain.resolve import Toolchain, find_neuron_tools, neuron_available
    from kernelsweep.toolchain.versions import ToolVersions

__all__ = [
    "CompileCost",
    "DeviceInventory",
    "NeffInfo",
    "Slots",
    "ToolResult",
    "ToolVersions",
    "Toolchain",
    "find_neuron_tools",
    "kill_running_tools",
    "list_devices",
    "neuron_available",
    "read_neff",
    "recording",
    "run_tool",
]
__getattr__ = public_face(__name__, __file__)
