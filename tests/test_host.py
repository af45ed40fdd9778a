"""Which platform a host is, from its instance type."""

from __future__ import annotations

import pytest

from kernelsweep.this_host.family import family_of, host_platform


@pytest.mark.parametrize(
    ("instance_type", "family"),
    [
        ("trn2.48xlarge", "trn2"),
        ("trn1.2xlarge", "trn1"),
        ("trn1n.32xlarge", "trn1"),
        ("inf2.xlarge", "inf2"),
        ("trn2.sim", "trn2"),
        ("m5.large", None),
        ("simulated", None),
        (None, None),
    ],
)
def test_the_family_comes_from_the_instance_type(instance_type, family):
    assert family_of(instance_type) == family


def test_the_first_neuron_instance_type_decides_and_none_means_every_family():
    assert host_platform("simulated", "trn1.sim", simulated=True).family == "trn1"
    assert host_platform("trn2.48xlarge", None, simulated=False).source == "instance type trn2.48xlarge"
    everything = host_platform("simulated", None, simulated=True)
    assert everything.family is None and everything.runs("inf2") and everything.runs("trn1")
    unknown = host_platform(None, None, simulated=False)
    assert unknown.family is None and unknown.source == "instance type unknown"
