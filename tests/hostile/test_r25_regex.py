"""Issue 25: no pattern a parser applies to untrusted text may backtrack (nested or overlapping
quantifiers): one 1 MiB line must not cost minutes. Every compiled pattern under
``clusterdoctor.observe`` (and the message catalogue's, and :mod:`clusterdoctor.redact`'s) is timed on
adversarial lines built from its own pieces (:mod:`tests.hostile.r25_regex_probe`, in a child process
with a timeout, so a pattern that hangs fails this test instead of freezing it); the patterns
rewritten for it are checked against their old selves on random lines made of their pieces."""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterdoctor.observe.paste import KNOWN_PROGRAMS
from tests.hostile import r25_regex_probe as probe

pytestmark = pytest.mark.hostile

ROOT = Path(__file__).resolve().parents[2]


def test_r25_regex_every_parser_pattern_is_linear_on_1mib_lines(tmp_path):
    """Each pattern on its worst adversarial line: under 5 s at 1 MiB and growing less than 8x from
    256 KiB (generous caps; a backtracking pattern takes minutes or hours there)."""
    log = tmp_path / "probe.jsonl"
    with log.open("w") as out:
        p = subprocess.Popen([sys.executable, "-m", "tests.hostile.r25_regex_probe"], cwd=ROOT, stdout=out,
                             stderr=subprocess.STDOUT)  # fmt: skip
        try:
            rc = p.wait(timeout=1500)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            rc = None
    rows = [json.loads(x) for x in log.read_text().splitlines() if x.startswith("{")]
    started = [r["start"] for r in rows if "start" in r]
    if rc is None:
        pytest.fail(f"the probe ran past its timeout, last at {started[-1:]}")
    assert rc == 0, log.read_text()[-3000:]
    total = rows[0]["patterns"]
    done = [r for r in rows if "ok" in r]
    assert total > 400 and len(done) == total, (total, len(done))
    slow = [f"{r['where']} on {r['line']}: screen {r['screen_s']} s, n {r.get('n_s')} s, 4n {r.get('4n_s')} s"
            for r in done if not r["ok"]]  # fmt: skip
    assert not slow, "\n".join(slow)


# (module, attribute, the pattern before issue 25, its flags): the oracle for the rewrites
OLD = [
    ("clusterdoctor.observe.comm.flight_recorder", "_ELLIPSIS_LINE", "^\\s*\\.\\.\\.\\s*,?\\s*$", re.M),
    (
        "clusterdoctor.observe.comm.flight_recorder",
        "_FR_HEAD",
        "^\\s*(?P<kind>Not all ranks joining collective|Collective|Sizes? mismatch|Type mismatch|Dtype mismatch|Mismatch)\\b(?P<rest>[^\\n]*)$",
        re.M,
    ),
    ("clusterdoctor.observe.comm.nccl_log", "_NET", "Using network (?P<net>.+?)\\s*$", 0),
    (
        "clusterdoctor.observe.comm.nccl_log",
        "_ENV",
        "(?P<name>NCCL_\\w+) set by environment to (?P<value>.*?)\\.?\\s*$",
        0,
    ),
    (
        "clusterdoctor.observe.comm.nccl_tests",
        "_ROW",
        "^(?:[ \\t]*(?:\\[\\d+,\\d+\\]<std(?:out|err)>:|\\[[A-Za-z_][\\w.\\-]*\\]:|\\[\\d+\\][ \\t]|\\d+:|[A-Za-z0-9][\\w.\\-]*:[ \\t]))*\\s*(?P<size>\\d+)\\s+(?P<count>\\d+)\\s+(?P<type>[a-z0-9_]+)\\s+(?P<redop>[a-z]+)(?P<rest>(?:\\s+(?:-?[\\d.]+(?:[eE][-+]?\\d+)?|N/A))+)\\s*$",
        re.M,
    ),
    (
        "clusterdoctor.observe.comm.nccl_tests",
        "_SNIFF",
        b"#\\s+size\\s+count\\s+type\\s+redop|# Avg bus bandwidth|_perf\\b.*-b\\s|# nThread \\d+ nGpus \\d+ minBytes \\d",
        0,
    ),
    (
        "clusterdoctor.observe.comm.pytraceback",
        "_EXC",
        "(?:^|[\\]:>\\s])(?P<type>[A-Za-z_][\\w.]{0,200}?(?:Error|Exception|Interrupt|Exit|Failure|Timeout))(?:: (?P<msg>[^\\n]{0,2000}))?\\s*$",
        0,
    ),
    (
        "clusterdoctor.observe.comm.sources",
        "_PARTIAL_TAIL",
        '\\s*(?:"(?:[^"\\\\\\x00-\\x1f]|\\\\.)*\\\\?|-?[\\d.eE+-]*|t(?:r(?:u)?)?|f(?:a(?:l(?:s)?)?)?|n(?:u(?:l)?)?)\\s*',
        0,
    ),
    ("clusterdoctor.observe.control.etcd_records", "_DUR_RE", "([0-9]*\\.?[0-9]+)(ns|us|µs|μs|ms|s|m|h)", 0),
    (
        "clusterdoctor.observe.control.etcdctl_text",
        "_TABLE_BORDER",
        "^\\s*[+\\-=─━┌┬┐├┼┤└┴┘╭╮╰╯│|\\s]{3,}$",
        0,
    ),
    ("clusterdoctor.observe.control.logs", "_LOGFMT_PAIR", '(\\w[\\w.-]*)=("(?:[^"\\\\]|\\\\.)*"|\\S+)', 0),
    ("clusterdoctor.observe.control.log_events", "_RE_KV", '(\\w+)=("(?:[^"\\\\]|\\\\.)*"|\\S+)', 0),
    (
        "clusterdoctor.observe.control.log_events",
        "_RE_PUBLISHED",
        "\\{Name:(\\S*) ClientURLs:\\[([^\\]]*)\\]\\}",
        0,
    ),
    (
        "clusterdoctor.observe.control.logs",
        "_SNIFF_PATTERNS[9]",
        b"^\\s+Type\\s+Reason\\s+Age\\s+From\\s+Message",
        re.M,
    ),
    (
        "clusterdoctor.observe.control.prom_careful",
        "_TAIL_PAIR_RE",
        '[ \\t]*([a-zA-Z_][a-zA-Z0-9_]*)=\\"([^\\"\\\\\\n]*)\\"',
        0,
    ),
    (
        "clusterdoctor.observe.control.prom_careful",
        "_LABELS_FULL_RE",
        '(?:[ \\t]*[a-zA-Z_][a-zA-Z0-9_]*[ \\t]*=[ \\t]*"(?:[^"\\\\\\n]|\\\\.)*"[ \\t]*,)*(?:[ \\t]*[a-zA-Z_][a-zA-Z0-9_]*[ \\t]*=[ \\t]*"(?:[^"\\\\\\n]|\\\\.)*")?[ \\t]*,?[ \\t]*',
        0,
    ),
    (
        "clusterdoctor.observe.control.prom_careful",
        "_LABEL_PAIR_RE",
        '([a-zA-Z_][a-zA-Z0-9_]*)[ \\t]*=[ \\t]*\\"((?:[^\\"\\\\\\n]|\\\\.)*)\\"',
        0,
    ),
    (
        "clusterdoctor.observe.gpu.dcgmi",
        "_SECTION_LINE",
        "^\\s*[|+]-{3,}\\s+(?P<name>[A-Za-z][A-Za-z /]*?)\\s+-{2,}",
        0,
    ),
    (
        "clusterdoctor.observe.gpu.kernel_log",
        "_BAR",
        "region assigned to your NVIDIA device is invalid:.*?(?P<bar>BAR\\d+) is (?P<size>\\S+) @ \\S+ \\(PCI:(?P<bus>[0-9a-fA-F:.]+)\\)",
        0,
    ),
    (
        "clusterdoctor.observe.gpu.nvidia_smi_table",
        "_FIRST",
        "^\\s*(?P<idx>\\d{1,3})\\s+(?P<name>.*?)\\s+(?P<pm>On|Off|N/A|ERR!)\\s*$",
        0,
    ),
    ("clusterdoctor.observe.gpu.nvidia_smi_table", "_POWER", "(?P<use>\\S+)\\s*/\\s*(?P<cap>\\S+)\\s*$", 0),
    (
        "clusterdoctor.observe.gpu.nvlink",
        "_HDR",
        "^GPU (?P<idx>\\d+): (?P<model>.*?)\\s*\\(UUID: (?P<uuid>[^)]*)\\)\\s*$",
        0,
    ),
    (
        "clusterdoctor.observe.network.fabric",
        "_SNIFF_LINK",
        b"^\\s{0,64}(?:0x[0-9A-Fa-f]{16}\\s{1,4})?\\d{1,6}\\s{1,8}\\d{1,3}\\[[\\w ]{0,3}\\]\\s==\\(",
        re.M,
    ),
    (
        "clusterdoctor.observe.network.fabric",
        "_NODE_HDR",
        "^(?:Switch|CA): 0x[0-9A-Fa-f]{16} (?P<name>[^\\n]{1,160}?):?\\s*$",
        0,
    ),
    ("clusterdoctor.observe.network.ibports", "_PAREN_SUFFIX", "\\s*\\(\\d{1,3}\\)\\s*$", 0),
    (
        "clusterdoctor.observe.network.ibports",
        "_KV",
        "^\\s{0,40}(?P<key>[A-Za-z][\\w ]{0,40}?)\\s*:\\s*(?P<val>\\S[^\\n]{0,200}?)?\\s*$",
        0,
    ),
    ("clusterdoctor.observe.network.ibports", "_LSHCA_MARK", "\\s*(?:>!<|\\*)\\s*$", 0),
    (
        "clusterdoctor.observe.network.ibports",
        "_SNIFF[0]",
        b"^(?:CA|Switch) '[^'\\n]{1,64}'\\s*$\\n(?:\\s[^\\n]{0,200}\\n){0,12}?\\s+Port \\d{1,3}:\\s*$",
        re.M,
    ),
    (
        "clusterdoctor.observe.network.nic_stats",
        "_KV",
        "^\\s*(?:-\\s+)?([A-Za-z_][\\w .\\-]*?)\\s*:\\s+(-?\\d[\\d,]*)\\s*(?:Bps\\s*=.*)?$",
        0,
    ),
    ("clusterdoctor.observe.network.nic_stats", "_PAIRS", "([A-Za-z][\\w-]*):\\s+(\\d+)", 0),
    ("clusterdoctor.observe.network.nic_stats", "_SNIFF[4]", b"^\\s*[a-z_0-9]+: [\\d,]+ Bps\\s+=", re.M),
    (
        "clusterdoctor.observe.network.perftest",
        "_SPLIT",
        "\\t+|\\s{2,}(?=[A-Za-z][\\w.#\\-]{0,20}(?: [\\w.#\\-]{1,20}){0,3}\\s{1,20}: )",
        0,
    ),
    ("clusterdoctor.observe.network.rdma", "_SNIFF_HW", b"^\\s*Port \\d+ hw counters:", re.I | re.M),
    (
        "clusterdoctor.observe.paste",
        "_BARE_CMD",
        r"^\s{0,4}(?:sudo\s+)?(?:[\w./\-]*/)?(?:"
        + "|".join(re.escape(p) for p in KNOWN_PROGRAMS)
        + r")(?:\s+[^\s:][^\n]{0,400})?\s*$",
        0,
    ),
]

# how a rewrite is compared with the old pattern: "all" (findall, match, fullmatch, sub, split all
# equal); "findall" (the pairs found: a match may now begin with the dots or digits before a key,
# which findall never shows); "groups" (the groups of every match finditer finds, and whether one is
# found: a match may now start after blank lines rather than before them); "bool" (a sniffer)
HOW = {
    "_LOGFMT_PAIR": "findall",
    "_LABEL_PAIR_RE": "findall",
    "_TAIL_PAIR_RE": "findall",
    "_ELLIPSIS_LINE": "bool",
    "_FR_HEAD": "groups",
    "_ROW": "groups",
    "_SNIFF": "bool",
    "_SNIFF[0]": "bool",
    "_SNIFF[4]": "bool",
    "_SNIFF_HW": "bool",
    "_SNIFF_LINK": "bool",
    "_SNIFF_PATTERNS[9]": "bool",
    "_BAR": "groups",
    "_EXC": "groups",
}


def _new(mod: str, attr: str) -> re.Pattern:
    name, _, idx = attr.partition("[")
    v = getattr(importlib.import_module(mod), name)
    return v[int(idx[:-1])] if idx else v


def _pieces(rx: re.Pattern) -> list:
    chars: set[str] = set()
    pieces: list[str] = []
    pat = rx.pattern if isinstance(rx.pattern, str) else rx.pattern.decode("latin-1")
    probe._sample(probe.P.parse(pat, rx.flags), chars, pieces)
    out = sorted({*pieces, *chars, " ", "  ", "\t", "\n", "a", "Ab", "0", "12", ":", "=", '"', "\\", ".", "-",
                  "/", "(", ")", ",", "x="})  # fmt: skip
    return out


def _results(rx: re.Pattern, s, how: str):
    if how == "bool":
        return rx.search(s) is not None
    if how == "findall":
        return rx.findall(s)
    if how == "groups":
        return [m.groups() for m in rx.finditer(s)], rx.search(s) is not None
    m, f = rx.match(s), rx.fullmatch(s)
    rep = b"#" if isinstance(s, bytes) else "#"
    return (rx.findall(s), m and m.groups(), f and f.groups(), rx.sub(rep, s), rx.split(s))


@pytest.mark.parametrize(
    "mod, attr, old, flags", OLD, ids=[f"{m.rsplit('.', 1)[1]}.{a}" for m, a, _, _ in OLD]
)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_r25_regex_rewrites_match_as_before(mod, attr, old, flags, data):
    new = _new(mod, attr)
    was = re.compile(old, flags)
    pieces = _pieces(was)
    s = "".join(data.draw(st.lists(st.sampled_from(pieces), max_size=12)))
    if isinstance(old, bytes):
        s = s.encode("utf-8")
    how = HOW.get(attr, "all")
    assert _results(new, s, how) == _results(was, s, how), repr(s)
