"""neuron-ls's JSON (`-j`, and 2.34's `--output-format json`) into visible logical cores and their
physical cores, LNC-aware."""

from __future__ import annotations

import json

import pytest

from kernelsweep.errors import KernelsweepError
from kernelsweep.locks import CoreLeaser
from kernelsweep.sim.toolchain import sim_toolchain
from kernelsweep.toolchain.devices import list_devices, parse_neuron_ls
from kernelsweep.toolchain.resolve import Toolchain

# Reference section 4's sample, verbatim: a trn2 device (96 GiB, 8 physical cores) at LNC=2.
SAMPLE = (
    '[{"neuron_device": 0, "bdf": "cc:00.0", "cpu_affinity": "48-95,144-191", "numa_node": "1", '
    '"connected_to": [12, 3, 4, 1], "nc_count": 4, "logical_neuroncore_config": 2, "memory_size": 103079215104, '
    '"neuroncore_ids": [0, 1, 2, 3], "neuron_processes": [{"pid": 113985, "command": "neuron-bench exec ...", '
    '"neuron_runtime_version": "2.0.0"}]}]'
)


def trn2_device(index: int, lnc: int = 2, processes: list | None = None, **overrides) -> dict:
    per_device = 8 // lnc
    device = {
        "neuron_device": index,
        "nc_count": per_device,
        "logical_neuroncore_config": lnc,
        "memory_size": 103079215104,
        "neuroncore_ids": list(range(index * per_device, (index + 1) * per_device)),
        "neuron_processes": processes or [],
    }
    return {**device, **overrides}


def test_the_reference_sample():
    inventory = parse_neuron_ls(SAMPLE)
    assert inventory.lnc == 2 and inventory.logical_cores == [0, 1, 2, 3]
    assert inventory.physical_core_map == {0: (0, 1), 1: (2, 3), 2: (4, 5), 3: (6, 7)}
    assert inventory.busy_pids == [113985]
    (device,) = inventory.devices
    assert device.memory_bytes == 96 * 2**30
    assert device.processes[0].command == "neuron-bench exec ..." and device.processes[0].runtime_version == "2.0.0"


def test_several_trn2_devices_number_on_across_devices():
    text = json.dumps([trn2_device(1), trn2_device(0), trn2_device(2, processes=[{"pid": 7}])])
    inventory = parse_neuron_ls(text)
    assert inventory.logical_cores == list(range(12))
    assert inventory.physical_cores(5) == (10, 11) and inventory.physical_cores(11) == (22, 23)
    assert [d.index for d in inventory.devices] == [0, 1, 2] and inventory.busy_pids == [7]


def test_lnc_1_exposes_every_physical_core():
    inventory = parse_neuron_ls(json.dumps([trn2_device(0, lnc=1), trn2_device(1, lnc=1)]))
    assert inventory.lnc == 1 and inventory.logical_cores == list(range(16))
    assert inventory.physical_cores(9) == (9,)


def test_missing_config_and_ids_take_the_platform_default_and_count_on():
    """Older tools omit logical_neuroncore_config and neuroncore_ids: the caller's default applies."""
    devices = [{"neuron_device": i, "nc_count": 2, "neuron_processes": []} for i in range(2)]  # trn1.32xlarge-like
    assert parse_neuron_ls(json.dumps(devices)).logical_cores == [0, 1, 2, 3]
    trn2 = [{k: v for k, v in trn2_device(0).items() if k != "logical_neuroncore_config"}]
    assert parse_neuron_ls(json.dumps(trn2), default_lnc=2).physical_cores(3) == (6, 7)


def test_neuron_ls_listing_itself_is_not_a_holder():
    own = [{"pid": 1, "command": "neuron-ls -a"}, {"pid": 2, "command": "python train.py"}]
    assert parse_neuron_ls(json.dumps([trn2_device(0, processes=own)])).busy_pids == [2]


def test_mixed_lnc_is_an_error_not_a_guess():
    with pytest.raises(ValueError, match="different logical_neuroncore_config"):
        parse_neuron_ls(json.dumps([trn2_device(0, lnc=2), trn2_device(1, lnc=1)]))


def test_physical_core_map_agrees_with_the_lease_locks(tmp_path):
    """Leases lock physical cores: the parser and the leaser must agree on the mapping."""
    inventory = parse_neuron_ls(json.dumps([trn2_device(0), trn2_device(1)]))
    leaser = CoreLeaser(tmp_path, inventory.logical_cores, lnc=inventory.lnc)
    assert all(leaser.physical_cores(c) == inventory.physical_cores(c) for c in inventory.logical_cores)
    with pytest.raises(ValueError, match="not on this host"):
        inventory.physical_cores(8)


def test_the_simulated_neuron_ls_speaks_the_same_json(tmp_path):
    sim = sim_toolchain(tmp_path, env={"KERNELSWEEP_SIM_CORES": "4", "KERNELSWEEP_SIM_LNC": "2"})
    inventory = list_devices(sim)
    assert inventory.lnc == 2 and inventory.logical_cores == [0, 1, 2, 3]
    assert inventory.physical_cores(3) == (6, 7)


def test_the_2_34_object_form_is_read_wherever_it_holds_the_devices():
    """2.34 "adds top-level fields ... such as instance and UltraServer details" (layout unpublished)."""
    document = {"instance": {"instance_type": "trn2.48xlarge"}, "ultraserver": {"id": "u-1"}, "neuron_devices":
                [trn2_device(0), trn2_device(1)]}  # fmt: skip
    inventory = parse_neuron_ls(json.dumps(document))
    assert inventory.instance_type == "trn2.48xlarge" and inventory.logical_cores == list(range(8))
    assert parse_neuron_ls(json.dumps({"instance_type": "trn1.2xlarge", "devices": [trn2_device(0, lnc=1)]})).lnc == 1
    with pytest.raises(ValueError, match="no list of devices"):
        parse_neuron_ls(json.dumps({"instance": {"instance_type": "trn2.48xlarge"}, "neuron_devices": []}))


def test_without_dash_j_the_json_form_is_asked_and_then_remembered(tmp_path):
    from kernelsweep.toolchain.process import recording

    sim = sim_toolchain(tmp_path, env={"KERNELSWEEP_SIM_TOOLS": "2.34", "KERNELSWEEP_SIM_PLATFORM": "trn2"})
    with recording() as runs:
        inventory = list_devices(sim, lnc=2)
        assert list_devices(sim, lnc=2) == inventory
    assert [run.argv[sim.command("neuron-ls").__len__() :] for run in runs] == [
        ["-j"], ["--output-format", "json"], ["--output-format", "json"],
    ]  # fmt: skip
    assert inventory.instance_type == "trn2.sim" and inventory.logical_cores == [0, 1]


def test_unparseable_output_is_one_clear_error(tmp_path):
    broken = Toolchain(kind="neuron", commands={"neuron-ls": ("/bin/echo", "not json")})
    with pytest.raises(KernelsweepError, match="neuron-ls -j printed unparseable output"):
        list_devices(broken)


def test_devices_another_process_holds_are_left_out_with_a_notice():
    held = [{"pid": 4242, "command": "python serve.py"}]
    inventory = parse_neuron_ls(json.dumps([trn2_device(0, processes=held), trn2_device(1)]))
    assert inventory.logical_cores == list(range(8)) and inventory.free_cores == [4, 5, 6, 7]
    assert inventory.held_notice() == (
        "left out NeuronCores another process holds, at LNC=2: device 0 (cores 0,1,2,3: pid 4242 python serve.py)"
    )
    assert (
        parse_neuron_ls(SAMPLE).free_cores == [] and parse_neuron_ls(json.dumps([trn2_device(0)])).held_notice() is None
    )


def test_neuron_ls_runs_under_the_sweeps_lnc_not_the_shells(tmp_path, monkeypatch):
    """A DLAMI container exports NEURON_LOGICAL_NC_CONFIG globally; the inventory must be at the LNC asked for."""
    monkeypatch.setenv("NEURON_LOGICAL_NC_CONFIG", "1")
    sim = sim_toolchain(tmp_path, env={"KERNELSWEEP_SIM_CORES": "4", "KERNELSWEEP_SIM_LNC": "2"})
    assert list_devices(sim).lnc == 1 and len(list_devices(sim).logical_cores) == 8  # the shell's value
    at_two = list_devices(sim, lnc=2)
    assert at_two.lnc == 2 and at_two.logical_cores == [0, 1, 2, 3]


def test_a_sweep_gets_one_leaser_per_lnc_its_platforms_run_at(tmp_path, monkeypatch):
    from specs import VECTOR_ADD, sim_spec

    from kernelsweep.this_host.context import Locations, prepare

    monkeypatch.setenv("NEURON_LOGICAL_NC_CONFIG", "2")  # must not decide trn1's leases
    spec = sim_spec(tmp_path, [VECTOR_ADD], platforms=("trn2", "trn1"))
    ctx, notice = prepare(spec, Locations(sim_state_dir=tmp_path / "sim", lock_dir=tmp_path / "locks"))
    assert {lnc: (leaser.lnc, leaser.logical_cores) for lnc, leaser in ctx.leasers.items()} == {
        1: (1, [0, 1, 2, 3]),
        2: (2, [0, 1]),
    }
    assert ctx.capture_slots == 4 and notice is None
    assert ctx.leaser_for(2).physical_cores(1) == ctx.leaser_for(1).physical_cores(2) + ctx.leaser_for(
        1
    ).physical_cores(3)
