"""The gate's reports: the text table and JUnit XML (one testcase per check)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from rheo.checks.gate.run import gate_verdict, slug, summary
from rheo.checks.outcome import CheckResult


def coverage_lines(coverage: dict) -> list[str]:
    """The coverage table of an implementation check (``rheo.checks.cases.space``): per
    dimension the values covered, those supported but not covered, and those refused."""
    rows = [("  coverage", "covered", "supported, not covered", "refused")]
    for dim, c in coverage.items():
        rest = [v for v in c["supported"] if v not in c["covered"]]
        refused = "does not apply (own design)" if c.get("not_applicable") else ", ".join(c["refused"]) or "-"
        rows.append((f"  {dim}", ", ".join(c["covered"]) or "-", ", ".join(rest) or "-", refused))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]


def render(results: list[CheckResult], profile: str, header: str = "", strict: bool = False) -> str:
    """The table, then a line per check that did not pass (and per implementation check,
    whose detail says what it showed), then the verdict."""
    rows = [("check", "verdict", "time", "counterexample")]
    for r in results:
        rows.append((r.name, r.verdict.upper(), f"{r.seconds:.1f} s", r.counterexample or "-"))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = [header] if header else []
    for j, row in enumerate(rows):
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
        if j == 0:
            lines.append("  ".join("-" * w for w in widths))
    s = summary(results)
    lines.append("")
    for r in results:
        if r.verdict != "pass" or r.group in ("implementation", "engine"):
            lines.append(f"{r.verdict.upper()} {r.name}: {r.detail}")
            lines += [f"  {v['line']}" for v in r.data.get("verdicts", ())]
            if r.picture:
                lines.append(f"  picture: {r.picture}")
            if r.data.get("coverage"):
                lines += coverage_lines(r.data["coverage"])
    passed, why = gate_verdict(results, strict)
    thin = s["thin_evidence"]
    lines.append(
        f"gate {'PASSED' if passed else 'FAILED'} ({profile}): {s['pass']} passed, {s['fail']} failed, "
        f"{s['skip']} skipped in {s['seconds']} s"
        + (f": {why}" if why and not s["fail"] else "")
        + (
            f"; thin evidence in {len(thin)} (detectable TV up to {max(thin.values()):.2f}): {', '.join(thin)}"
            if thin
            else ""
        )
    )
    return "\n".join(lines)


def junit_xml(results: list[CheckResult], suite: str = "rheo gate", strict: bool = False) -> str:
    """JUnit XML (one testcase per check; failures carry the detail and the counterexample
    path). A gate that fails with no failed check (every check skipped, or a skip under
    --strict) gets one more failing testcase, "rheo gate: verdict", saying why."""
    s = summary(results)
    passed, why = gate_verdict(results, strict)
    verdict_case = not passed and not s["fail"]
    root = ET.Element(
        "testsuite",
        name=suite,
        tests=str(len(results) + verdict_case),
        failures=str(s["fail"] + verdict_case),
        skipped=str(s["skip"]),
        errors="0",
        time=f"{s['seconds']:.3f}",
    )
    for r in results:
        case = ET.SubElement(
            root, "testcase", classname=f"rheo.checks.gate.{slug(r.group)}", name=r.name, time=f"{r.seconds:.3f}"
        )
        if r.data.get("coverage"):
            props = ET.SubElement(case, "properties")
            for dim, c in r.data["coverage"].items():
                for side in ("covered", "supported", "refused"):
                    ET.SubElement(props, "property", name=f"coverage.{dim}.{side}", value=",".join(c[side]))
        text = r.detail + (f"\ncounterexample: {r.counterexample}" if r.counterexample else "")
        if r.verdict == "fail":
            ET.SubElement(case, "failure", message=r.detail[:200]).text = text
        elif r.verdict == "skip":
            ET.SubElement(case, "skipped", message=r.detail[:200])
        else:
            ET.SubElement(case, "system-out").text = text
    if verdict_case:
        case = ET.SubElement(root, "testcase", classname="rheo.checks.gate", name="rheo gate: verdict", time="0.000")
        ET.SubElement(case, "failure", message=str(why)).text = str(why)
    return ET.tostring(root, encoding="unicode", xml_declaration=True)
