"""Scenario results for a terminal and as JUnit XML (for CI).

The terminal shows one line per scenario, then for each failure what was expected and what
happened, and notes (a judge skipped); it ends with `N passed, N failed`. JUnit XML has a
`testsuite` per scenario file and a `testcase` per scenario (classname: the desk), each
failure's details in `failure`, the call's timeline in `system-out`.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

from voicehub.scenarios.suite import ScenarioResult

__all__ = ["format_result", "format_summary", "junit_xml"]


def format_result(result: ScenarioResult) -> str:
    if result.skipped is not None:
        return f"SKIP  {result.source.name} :: {result.name}  ({result.skipped})"
    mark = "PASS" if result.passed else "FAIL"
    lines = [f"{mark}  {result.source.name} :: {result.name}  ({result.seconds:.1f} s)"]
    lines += [f"      {failure}" for failure in result.failures]
    lines += [f"      note: {note}" for note in result.notes]
    return "\n".join(lines)


def format_summary(results: Sequence[ScenarioResult]) -> str:
    failed = sum(not r.passed for r in results)
    skipped = sum(r.skipped is not None for r in results)
    summary = f"{len(results) - failed - skipped} passed, {failed} failed"
    return f"{summary}, {skipped} skipped" if skipped else summary


def junit_xml(results: Sequence[ScenarioResult]) -> str:
    root = ET.Element("testsuites", name="voicehub test")
    by_file: dict[Path, list[ScenarioResult]] = {}
    for result in results:
        by_file.setdefault(result.source, []).append(result)
    for source, found in by_file.items():
        suite = ET.SubElement(
            root,
            "testsuite",
            name=str(source),
            tests=str(len(found)),
            failures=str(sum(not r.passed for r in found)),
            errors="0",
            skipped=str(sum(r.skipped is not None for r in found)),
            time=f"{sum(r.seconds for r in found):.3f}",
        )
        for result in found:
            case = ET.SubElement(
                suite,
                "testcase",
                classname=result.desk,
                name=result.name,
                time=f"{result.seconds:.3f}",
            )
            if result.skipped is not None:
                ET.SubElement(case, "skipped", message=result.skipped)
            if result.failures:
                failure = ET.SubElement(
                    case, "failure", message=str(result.failures[0]), type="ScenarioFailure"
                )
                failure.text = "\n".join(str(f) for f in result.failures)
            out = "\n".join([*(f"note: {n}" for n in result.notes), result.timeline])
            ET.SubElement(case, "system-out").text = out
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
