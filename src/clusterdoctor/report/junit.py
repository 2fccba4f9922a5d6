"""JUnit XML for CI systems: one testcase per rule (findings fail it; skipped rules are skipped)."""

from __future__ import annotations

from xml.etree import ElementTree as ET

from clusterdoctor.escape import shown, terminal_safe
from clusterdoctor.model import Diagnosis, Severity


def _xml_safe(tree: ET.Element) -> ET.Element:
    """Every attribute of ``tree`` shown safely (:func:`clusterdoctor.escape.shown`) and every text
    passed through :func:`clusterdoctor.escape.terminal_safe` (its own newlines kept; the fields in it
    were shown safely when it was written): XML 1.0 cannot hold control characters or lone surrogates
    at all, so a name carrying one would make the file not well-formed; escaped, it is visible and
    the file parses."""
    for el in tree.iter():
        for k, v in el.attrib.items():
            el.set(k, shown(v))
        if el.text:
            el.text = terminal_safe(el.text)
    return tree


def render_junit(
    diag: Diagnosis, *, suite: str = "clusterdoctor", fail_on: Severity = Severity.WARNING
) -> str:
    """One testcase per rule run or skipped; a rule with findings at or above ``fail_on`` fails."""
    by_rule: dict[str, list] = {}
    for f in diag.findings:
        by_rule.setdefault(f.rule, []).append(f)
    ts = ET.Element("testsuite", name=suite, hostname=diag.host, timestamp=diag.generated_at)
    failures = skipped = tests = 0
    for rid in diag.rules_run:
        tests += 1
        tc = ET.SubElement(ts, "testcase", classname=f"{suite}.rules", name=rid)
        bad = [f for f in by_rule.get(rid, []) if f.severity >= fail_on]
        if bad:
            failures += 1
            msg = "; ".join(f"{f.subject + ': ' if f.subject else ''}{f.summary}" for f in bad)
            fe = ET.SubElement(tc, "failure", message=msg[:1000], type=str(max(f.severity for f in bad)))
            fe.text = "\n\n".join(
                f"{shown(f.title)}\n{shown(f.summary)}\nfix: {shown(f.fix)}\nverify: {shown('; '.join(f.verify))}"
                for f in bad
            )
    for s in diag.skipped:
        tests += 1
        skipped += 1
        tc = ET.SubElement(ts, "testcase", classname=f"{suite}.rules", name=s.rule)
        ET.SubElement(tc, "skipped", message=s.reason)
    ts.set("tests", str(tests))
    ts.set("failures", str(failures))
    ts.set("skipped", str(skipped))
    ts.set("errors", "0")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(_xml_safe(ts), encoding="unicode") + "\n"


def render_junit_cases(suite: str, cases: list[tuple[str, str | None, str]]) -> str:
    """A suite from (name, failure message or None, details) tuples — used by ``numa check``."""
    ts = ET.Element("testsuite", name=suite, tests=str(len(cases)))
    fails = 0
    for name, failure, details in cases:
        tc = ET.SubElement(ts, "testcase", classname=suite, name=name)
        if failure:
            fails += 1
            fe = ET.SubElement(tc, "failure", message=failure[:1000])
            fe.text = details
        elif details:
            ET.SubElement(tc, "system-out").text = details
    ts.set("failures", str(fails))
    ts.set("errors", "0")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(_xml_safe(ts), encoding="unicode") + "\n"
