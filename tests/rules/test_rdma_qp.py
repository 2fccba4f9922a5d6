"""Per-QP RDMA: `rdma statistic qp show` and `rdma res show qp -j` as published (tests/data/rdma_qp), the
QP error-state and per-QP transport-error rules (issue 23)."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from clusterdoctor import diagnosis
from clusterdoctor.observe.network.rdma_qp import parse_qp_json, parse_qp_stat, sniff_rdma_qp

DATA = Path(__file__).resolve().parents[1] / "data" / "rdma_qp"
STAT = DATA / "rdma_statistic_qp_show_mlx5_ib_send_bw.txt"
RTR = DATA / "rdma_res_show_qp_jp_dd_hns_rtr_iproute2_bug.json"
GSI = DATA / "rdma_res_show_qp_jp_dd_hns_gsi_after_fix.json"


def _diagnose(*paths):
    obs = diagnosis.new_observations(lambda: 0.0)
    refs = diagnosis.load_sources(obs, list(paths))
    return diagnosis.run(obs, refs)


def test_statistic_qp_show_wrapped_by_mail_is_one_counter_of_ib_send_bw():
    (c,) = parse_qp_stat(STAT.read_text(), str(STAT))
    assert (c.name, c.cntn, c.pid, c.comm, c.lqpns) == ("mlx5_2/1", 4, 9829, "ib_send_bw", [258])
    assert len(c.counters) == 18 and set(c.counters.values()) == {0}
    assert c.counters["out_of_sequence"] == 0  # "out_of_sequence\n0": read across the wrap


def test_iproute2s_broken_json_is_read_key_by_key():
    with_rtr = parse_qp_json(RTR.read_text())
    assert [(q.device, q.lqpn, q.type, q.state, q.pid, q.comm, q.kernel) for q in with_rtr] == [
        ("hns_0", 41, "RC", "RTR", 1523, "ib_send_bw", False)
    ]
    (gsi,) = parse_qp_json(GSI.read_text())
    assert (gsi.device, gsi.lqpn, gsi.type, gsi.state, gsi.kernel) == ("hns_2", 1, "GSI", "RTS", True)
    for p in (RTR, GSI):
        json_ok = True
        try:
            json.loads(p.read_text())
        except ValueError:
            json_ok = False
        assert not json_ok  # both are real iproute2 output that is not valid JSON


def test_healthy_real_outputs_are_read_and_quiet():
    d = _diagnose(STAT, RTR, GSI)
    assert len(d.sources) == 3 and not [w for w in d.warnings if "not used" in w]
    assert not [f for f in d.findings if f.rule.startswith("RDMA02")]


def test_a_qp_in_err_and_errors_on_its_counter_name_the_process(tmp_path):
    # derived from the real outputs: the RC QP 41's state set to ERR, and counters of the real
    # statistic output raised on the same process's QP (no public paste of a QP in ERR was found)
    res = tmp_path / "res.json"
    res.write_text(RTR.read_text().replace('"state": "RTR"', '"state": "ERR"'))
    stat = tmp_path / "stat.txt"
    stat.write_text(
        STAT.read_text()
        .replace("mlx5_2/1", "hns_0/1")
        .replace("pid 9829 comm ib_send_bw", "pid 1523 comm ib_send_bw")
        .replace("local_ack_timeout_err 0", "local_ack_timeout_err 57")
        .replace("LQPN: <258>", "LQPN: <41>")
    )
    d = _diagnose(res, stat)
    err = next(f for f in d.findings if f.rule == "RDMA021")
    assert err.subject == "hns_0/1 (pid 1523 ib_send_bw)" and "QP 41" in err.summary
    tx = next(f for f in d.findings if f.rule == "RDMA022")
    assert tx.subject == "hns_0/1 (pid 1523 ib_send_bw)" and "local_ack_timeout_err 57" in tx.summary
    assert any(e.description.startswith("their states") and e.value == "ERR" for e in tx.evidence)


def test_statistic_json_with_lqpn_lists():
    text = json.dumps(
        [{"ifname": "mlx5_0", "port": 1, "cntn": 2, "qp-type": "RC", "pid": 7, "comm": "python",
          "lqpn": [178, "200-202"], "rnr_nak_retry_err": 3}]
    )  # fmt: skip
    (c,) = parse_qp_stat(text)
    assert c.lqpns == [178, 200, 201, 202] and c.counters == {"rnr_nak_retry_err": 3} and c.qp_type == "RC"


def test_sniffs_only_qp_outputs():
    assert sniff_rdma_qp(STAT.read_bytes()) and sniff_rdma_qp(RTR.read_bytes())
    assert not sniff_rdma_qp(b"link mlx5_0/1 rx_write_requests 0 rx_read_requests 0\n")  # port counters
    assert not sniff_rdma_qp(b'[{"ifname": "mlx5_0", "port": 1, "state": "ACTIVE"}]\n')  # rdma -j link


@given(st.text(max_size=400))
def test_parsers_never_raise_anything_but_input_error(text):
    from clusterdoctor.errors import InputError

    for fn in (parse_qp_stat, parse_qp_json):
        try:
            fn("link mlx5_0/1 cntn 1 " + text)
        except InputError:
            pass
