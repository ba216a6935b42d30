"""The gate's mixed-batch check for an implementation with ``cycle_batch`` (docs/adapters.md,
"Mixed batches"): rows of one call that are different requests.

Catches what a batch of copies of one request cannot show: a row read at a neighbour's
offset, one row's temperature or filter applied to others, one generator shared by every row
(each a planted bug in ``examples/mixed_batch.py``). Why not easier: the exact check and the
output law call ``cycle`` one request at a time, and ``cycle_batch`` is otherwise handed
copies of one request, in which every row's offset, temperature and filter are the same.
"""

from __future__ import annotations

from typing import Any

from rheo.checks.cases.mixed import mixed_batches, one_batch
from rheo.checks.exact.mixed import certify_mixed
from rheo.checks.gate.coverage import supported_cases
from rheo.checks.outcome import FAMILY_ALPHA, Check, Outcome, Profile
from rheo.checks.protocol.calls import mixed_batches as takes_mixed
from rheo.checks.protocol.inputs import case_config
from rheo.checks.protocol.load import Implementation
from rheo.checks.statistics.mixed import mixed_row_laws, permutation_check

NAME = "impl: mixed batches"
CALLS = {"smoke": 500, "quick": 3_000, "deep": 20_000}  # calls of the whole mixed batch, per profile
TRIALS = {"smoke": 5, "quick": 20, "deep": 100}  # permutation check: seed sets
REFUSAL = (
    "cycle_batch takes rows copies of one request; a mixed batch (rows of different requests: "
    "temperatures, draft lengths, filters, seeds) needs per-row cases: set mixed_batches = True and read "
    "draft_logits[r], target_logits[r], config[r] and temperature[r] for row r (docs/adapters.md, "
    '"Mixed batches")'
)


def mixed_checks(impl: Implementation, stem: str, owner: str | None) -> list[Check]:
    """The mixed-batch check, for an implementation with ``cycle_batch`` (none otherwise)."""
    if not callable(getattr(impl.obj, "cycle_batch", None)):
        return []

    def run(profile: Profile, progress) -> Outcome:
        if not takes_mixed(impl):
            return Outcome("skip", f"refused: {REFUSAL}", data={"applicable": False})
        sel = supported_cases(impl, "exact", profile.matrix)
        batches = mixed_batches(sel.cases, lambda case: impl.supports(case_config(case)))
        if not batches:
            why = "no two supported small cases of one vocabulary, or none of their mixed batches supported"
            return Outcome("skip", f"not applicable: {why}", data={"applicable": False})
        seeded = bool(getattr(impl.obj, "row_seeds", False))
        lines: list[str] = []
        bad: list[str] = []
        data: dict[str, Any] = {"exact": [], "rows": [], "permutation": None}
        for i, batch in enumerate(batches):
            seeds = [101 * (i + 1) + r for r in range(len(batch))] if seeded else None
            cert = certify_mixed(impl, batch, seeds)
            data["exact"].append(cert.to_json())
            line = f"exact on [{cert.name}]: {cert.verdict}: {cert.detail} ({cert.runs} runs, {cert.seconds:.1f} s)"
            lines.append(line)
            if progress:
                progress(f"        {line}")
            if cert.verdict in ("not lossless", "crashed"):
                bad.append(line)
        calls = CALLS.get(profile.name, CALLS["quick"])
        taken: list[list[dict]] = []  # the batches the statistical run and the permutation check use
        for batch in [one_batch(batches)] + (batches if len(batches) > 1 else []):
            if taken and len(taken[0]) > len(batch):
                break  # all rows at once were taken
            try:
                results = mixed_row_laws(
                    impl, batch, calls, FAMILY_ALPHA / len(batch) / len(batches), progress=progress
                )
            except NotImplementedError as e:
                lines.append(f"statistical on [{' | '.join(str(c.get('name')) for c in batch)}]: unsupported ({e})")
                continue
            taken.append(batch)
            for case, res in results:
                line = f"row {case.get('name')}: {res.describe()}"
                data["rows"].append(
                    {
                        "case": case.get("name"),
                        "chi2": res.statistic,
                        "df": res.bins - 1,
                        "p": res.p_value,
                        "tv": res.detectable_tv,
                    }
                )
                if progress:
                    progress(f"        {line}")
                if res.reject:
                    bad.append(f"statistical, mixed batch of {len(batch)}: {line}")
        if not taken:
            return Outcome("skip", "the implementation takes none of the mixed batches: " + "; ".join(lines), data=data)
        if seeded:
            ok, line, pdata = permutation_check(impl, taken[0], TRIALS.get(profile.name, TRIALS["quick"]))
            data["permutation"] = {"passed": ok, "line": line, **pdata}
            if progress:
                progress(f"        permutation: {line}")
            if not ok:
                bad.append(f"permutation: {line}")
        else:
            data["permutation"] = {"passed": None, "line": "not run: row_seeds is not declared"}
        if bad:
            return Outcome("fail", f"{len(bad)} finding(s); first: {bad[0]}", {"findings": bad, **data}, data)
        certified = sum(1 for e in data["exact"] if e["verdict"] == "lossless")
        perm = "; the permutation check passed" if seeded else "; no permutation check (row_seeds not declared)"
        rows = sum(len(batch) for batch in taken)
        detail = (
            f"lossless: {certified} of {len(batches)} mixed batches certified exactly, {rows} rows at "
            f"{calls} calls each within their own laws{perm}"
        )
        return Outcome("pass", detail, None, data)

    return [
        Check(
            f"{NAME} ({impl.provides()})",
            "implementation",
            run,
            needs_torch=False,
            file_stem=f"{stem}-mixed",
            owner=owner,
        )
    ]
