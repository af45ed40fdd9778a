"""The platform table's facts that need a rule: which NKI AWS supports per family, nki-library's
hardware MFU, and trn3, whose unpublished clocks stay unknown."""

from __future__ import annotations

import pytest

from kernelsweep.platforms import PLATFORMS, get_platform, support_notice


@pytest.mark.parametrize(
    ("platform", "nki", "verdict"),
    [
        ("trn1", "0.2.0", True), ("trn1", "0.3.0", False), ("trn1", "0.6.0+standin", False),
        ("inf2", "neuronxcc.nki 2.14.227.0+2d4f85be", True), ("trn2", "0.7.0", True), ("trn3", "0.6.0", True),
        ("trn3", "neuronxcc.nki 2.14.227.0", None), ("trn2", None, None), ("trn1", "dev", None),
    ],
)  # fmt: skip
def test_nki_support_follows_awss_faq(platform, nki, verdict):
    assert get_platform(platform).nki_support.verdict(nki) is verdict


def test_a_sweep_notice_names_the_platform_the_nki_and_the_source():
    assert support_notice("trn2", "0.6.0") is None
    assert support_notice("inf2", "0.6.0") == (
        "inf2 with nki 0.6.0: AWS supports NKI up to 0.2 (SDK <= 2.28); NKI >= 0.3 does not list it (some kernels "
        "still run, unsupported) (AWS NKI FAQ (SDK 2.29.0-2.33.1): 'NKI supports Trainium2 and Trainium3'; NxD "
        "Inference 2.29 release notes); its points may fail to compile or run"
    )


def test_hardware_mfu_is_nki_librarys_on_trn2():
    """metrics_collector._parse_ntff_json: (hardware - transpose) / (2 * 128 * 128 * 2.4e9 * t * num_lnc)."""
    trn2 = get_platform("trn2")
    hardware, transpose, seconds = 427_819_008, 25_165_824, 45.256596e-6  # seed 000's MLP figures; a transpose count
    expected = 100 * (hardware - transpose) / (2 * 128 * 128 * 2.4e9 * seconds * 2)
    assert trn2.hardware_mfu_percent(hardware, transpose, seconds, 2) == pytest.approx(expected, rel=1e-3)


def test_trn3_has_its_published_facts_and_no_guessed_clocks():
    trn3 = PLATFORMS["trn3"]
    assert (trn3.tensor_engine_clock_hz, trn3.profiler_clock_hz) == (None, None)
    assert trn3.peak_flops("bfloat16", 1) == pytest.approx(671e12 / 8)  # 671 TFLOPS per 8-core chip
    assert trn3.hbm_bytes_per_chip == 144 * 2**30 and trn3.default_lnc == 2 and trn3.compile_lnc(2) == 2
    assert not trn3.dge_notifs_default and PLATFORMS["trn2"].dge_notifs_default


def test_a_real_sweep_is_told_when_its_nki_is_unsupported_on_a_platform_and_the_simulator_is_not(tmp_path):
    from kernelsweep.sim.toolchain import sim_toolchain
    from kernelsweep.this_host.context import support_notices
    from kernelsweep.toolchain.resolve import Toolchain

    real = Toolchain(kind="neuron", commands={})
    assert [n.split(":")[0] for n in support_notices(real, "0.6.0", ["trn1", "trn2", "inf2"])] == [
        "trn1 with nki 0.6.0", "inf2 with nki 0.6.0",
    ]  # fmt: skip
    assert support_notices(sim_toolchain(tmp_path), "0.6.0+kernelsweep.sim", ["trn1"]) == []
