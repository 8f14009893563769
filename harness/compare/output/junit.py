"""The comparison as JUnit XML (junit.xml): one test case per cell, failing on its blocking
findings, so that CI test viewers list regressions by cell."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence

from harness.compare.comparison import Comparison
from harness.compare.findings import BLOCKING, Finding
from harness.store.records import Cell, CellKey


def to_junit(c: Comparison) -> str:
    """One test case per cell (baseline and candidate), failing on its blocking findings."""
    by_cell: dict[CellKey | tuple[()], list[Finding]] = {}
    for f in c.findings:
        by_cell.setdefault(f.cell.key if f.cell else (), []).append(f)
    cases = [_testcase(cell, by_cell.get(cell.key, [])) for cell in c.cells]
    failures = sum(1 for case in cases if case.find("failure") is not None)
    suite = ET.Element(
        "testsuite",
        name="harness compare",
        tests=str(len(cases)),
        failures=str(failures),
        errors="0",
        skipped="0",
    )
    suite.extend(cases)
    run_wide = by_cell.get((), [])
    if run_wide:
        ET.SubElement(suite, "system-out").text = "\n".join(
            f"{f.severity}: [{f.kind}] {f.message}" for f in run_wide
        )
    root = ET.Element(
        "testsuites", name="harness compare", tests=str(len(cases)), failures=str(failures)
    )
    root.append(suite)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def _testcase(cell: Cell, findings: Sequence[Finding]) -> ET.Element:
    case = ET.Element(
        "testcase", classname=f"harness.{cell.exporter}.{cell.model}", name=cell.cell_id, time="0"
    )
    blocking = [f for f in findings if f.severity == BLOCKING]
    if blocking:
        failure = ET.SubElement(
            case, "failure", message="; ".join(f.message for f in blocking), type=blocking[0].kind
        )
        failure.text = "\n".join(
            f"[{f.kind}] {f.message}"
            + (f"\n  evidence: {f.evidence}" if f.evidence else "")
            + (f"\n  minimal repro: {f.repro} ({f.repro_note})" if f.repro else "")
            for f in blocking
        )
    others = [f for f in findings if f.severity != BLOCKING]
    if others:
        ET.SubElement(case, "system-out").text = "\n".join(
            f"{f.severity}: [{f.kind}] {f.message}" for f in others
        )
    return case
