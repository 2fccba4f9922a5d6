"""Same-zone vs cross-zone latency ratio."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor.analyze.topology_split import quantile, zone_split, zone_split_by_node, zones_from_nodes
from clusterdoctor.errors import InputError

lat = st.floats(0.001, 10, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(st.lists(lat, min_size=1, max_size=50), st.floats(1, 10))
def test_ratio_of_scaled_cross_zone_latency(values, k):
    obs = [("a", "a", v) for v in values] + [("a", "b", v * k) for v in values]
    s = zone_split(obs, 0.99)
    assert s.ratio == pytest.approx(k, rel=1e-9)
    assert s.median_ratio == pytest.approx(k, rel=1e-9)
    assert s.same_count == s.cross_count == len(values)


@settings(max_examples=200, deadline=None)
@given(st.lists(lat, min_size=1, max_size=50), st.floats(0, 1))
def test_quantile_bounds_and_order(values, q):
    v = quantile(values, q)
    assert min(values) <= v <= max(values)
    assert quantile(values, 0) == min(values) and quantile(values, 1) == max(values)


def test_unknown_zones_counted_apart_and_empty_ratio_nan():
    s = zone_split([(None, "a", 1.0), ("a", "a", 2.0)])
    assert s.unknown == 1 and s.same_count == 1
    assert math.isnan(s.ratio)


def test_by_node_with_zone_labels():
    nodes = {
        "kind": "List",
        "items": [
            {"metadata": {"name": "n1", "labels": {"topology.kubernetes.io/zone": "us-east-1a"}}},
            {"metadata": {"name": "n2", "labels": {"topology.kubernetes.io/zone": "us-east-1a"}}},
            {"metadata": {"name": "n3", "labels": {"failure-domain.beta.kubernetes.io/zone": "us-east-1b"}}},
            {"metadata": {"name": "n4", "labels": {}}},
        ],
    }
    zones = zones_from_nodes(json.dumps(nodes))
    assert zones == {"n1": "us-east-1a", "n2": "us-east-1a", "n3": "us-east-1b"}
    s = zone_split_by_node([("n1", "n2", 0.010), ("n1", "n3", 0.031), ("n2", "n4", 5.0)], zones)
    assert s.ratio == pytest.approx(3.1) and s.unknown == 1


def test_bad_nodes_json():
    with pytest.raises(InputError):
        zones_from_nodes("{not json")
