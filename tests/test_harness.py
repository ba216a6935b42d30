"""The --impl harness: the independent loop implementation in examples/ passes, each
example bug is caught with a shrunk, replayable counterexample, the output-law check judges
losslessness (against the implementation's own sampler law when it declares one), and the
protocol's edges (one entry point only, malformed output, crashes, unsupported
configurations, NotImplementedError, an implementation with its own randomness, loading
by file path from anywhere, errors while loading) are handled. Whatever an implementation
returns (a fuzz of shapes, dtypes, NaN, huge ints, strings) is read or refused with a
one-line finding, never converted and never a crash."""

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rheo.checks.cases import space
from rheo.checks.cases.composition import composition_cases
from rheo.checks.differential.decision_equality import check_decisions, compare_decisions
from rheo.checks.protocol.inputs import float_instance
from rheo.checks.protocol.judged import JudgedInstance, judged_instance
from rheo.checks.protocol.load import Implementation, ImplLoadError, load_implementation
from rheo.checks.protocol.outputs import BadOutput, read_tree
from rheo.checks.statistics.cycle_law import check_cycle_law
from rheo.checks.statistics.output_law import check_output_law
from rheo.reference import Uniforms
from rheo.reference.generate import hashed_case

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from examples.buggy_impl import ReusedUniform, TokenTieBreak  # noqa: E402
from examples.loop_impl import LoopImplementation  # noqa: E402


def rheo(*args):
    return subprocess.run(
        [sys.executable, "-m", "rheo.cli", *args], capture_output=True, text=True, cwd=ROOT, timeout=600
    )


def test_correct_loop_implementation_passes(rheo_checker):
    """Through the pytest plugin's fixture: decision equality on 300 shrinkable cases, exact
    certification on the smoke matrix and the output law on the smoke spread (4000 cycles per
    case: smaller than the gate's, to keep the test short)."""
    rheo_checker.cycles = 4000
    rheo_checker.level, rheo_checker.exact_search, rheo_checker.prefix_cycles = "smoke", 0, 300
    decisions, exact, law, large, *_ = rheo_checker.check(LoopImplementation())
    assert large.name.startswith("impl: output law, beyond exact reach") and large.verdict == "pass", large.detail
    # the smoke matrix, the coverage cases and the filter-composition cases
    drawn = len(space.select(lambda c: True, "exact", "smoke").cases) + len(composition_cases())
    assert exact.verdict == "pass" and exact.detail.startswith(f"lossless (exact) on {drawn} cases"), exact.detail
    assert "shortfall" not in exact.data and exact.data["coverage"]["depth"]["covered"] == ["1", "2", "3"]
    assert decisions.data["equal"] >= 150, decisions.detail
    assert decisions.detail.startswith("same decisions as the reference on")
    spread = len(space.select(lambda c: True, "statistical", "smoke").cases)
    assert law.name.startswith("impl: output law") and len(law.data["cases"]) == spread, law.detail
    assert all(case["detectable_tv"] < 0.1 for case in law.data["cases"].values()), law.detail
    assert law.detail.count(": lossless within detectable TV") == spread, law.detail


@pytest.mark.parametrize(
    "bug,needle", [("TokenTieBreak", "tree:"), ("ReusedUniform", "verify on the reference's tree")]
)
def test_each_example_bug_is_caught_by_the_gate(bug, needle, tmp_path):
    out = tmp_path / "out"
    r = rheo("gate", "--impl", f"examples.buggy_impl:{bug}", "--only", "decision", "--json", "--out", str(out))
    assert r.returncode == 1, r.stderr[-2000:]
    res = json.loads(r.stdout)
    dec = res["checks"][0]
    assert dec["verdict"] == "fail" and needle in dec["detail"]
    assert dec["detail"].startswith("not the specified algorithm: ")  # sameness, not losslessness
    saved = json.loads(Path(dec["counterexample"]).read_text())
    difference = dec["detail"].removeprefix("not the specified algorithm: ").split(" (shrunk")[0]
    assert saved["case"]["vocab_size"] <= 5 and saved["difference"] == difference
    again = rheo("gate", "--impl", f"examples.buggy_impl:{bug}", "--replay", dec["counterexample"], "--json")
    assert again.returncode == 1 and json.loads(again.stdout)["status"] == "differs"
    fixed = rheo("gate", "--impl", "examples.loop_impl:LoopImplementation", "--replay", dec["counterexample"])
    assert fixed.returncode == 0 and fixed.stdout.startswith("equal")


def test_the_plugin_fixture_raises_with_the_counterexample(rheo_checker):
    """``check`` runs every check (at the smoke sizes, as above) and raises; the message
    names decision equality's counterexample file."""
    rheo_checker.cycles = 1000
    rheo_checker.level, rheo_checker.exact_search, rheo_checker.prefix_cycles = "smoke", 0, 300
    with pytest.raises(AssertionError, match="counterexample: .*decision-equality.json"):
        rheo_checker.check(ReusedUniform())


def test_token_tie_break_shrinks_to_a_small_tie():
    """Shrunk to two paths with one score (the same two factors in either order) that the
    slot path and the token path order differently."""
    r = check_decisions(Implementation(TokenTieBreak(), "t"), 300)
    assert not r.passed and r.detail.startswith("not the specified algorithm: tree:")
    case = r.counterexample["case"]
    assert case["depth"] <= 2 and case["vocab_size"] <= 5, case


def test_fragile_ties_are_set_aside_not_blamed():
    """A tie between q = 1/4 and 1/2 * 1/2 is exact in the reference, but a float
    implementation's softmax rounds 1/4 and 1/2 on its own, so a tree whose budget cuts
    between them is set aside. A tie between 1/2 * 1/4 and 1/4 * 1/2 (the same two factors
    from one vector, in either order) is exact for any float implementation: compared."""
    from rheo.checks.differential.decision_equality import fragile_tree
    from rheo.reference import UniformChooser
    from rheo.reference.tree import build_tree

    case = {
        "vocab_size": 3,
        "target": {"*": ["1/3", "1/3", "1/3"]},
        "draft": {"*": ["1/2", "1/4", "1/4"]},
        "policy": "topk",
        "K": 2,
        "depth": 2,
        "beam": 2,
    }
    u = Uniforms.random(np.random.default_rng(0), 2, 2, 2)
    for budget, fragile in ((2, True), (4, False)):  # cut between [1] and [0, 0]; between [0, 1] and [1, 0]
        inst = float_instance({**case, "budget": budget})
        assert fragile_tree(inst, u, build_tree(inst, UniformChooser(u))) is fragile, budget


class BuilderOnly:
    def __init__(self, inner):
        self.build_tree = inner.build_tree


class VerifierOnly:
    def __init__(self, inner):
        self.verify = inner.verify


@pytest.mark.parametrize("wrap,bug", [(BuilderOnly, TokenTieBreak), (VerifierOnly, ReusedUniform)])
def test_one_entry_point_is_enough(wrap, bug):
    good = Implementation(wrap(LoopImplementation()), "good")
    assert check_decisions(good, 120).passed
    assert check_cycle_law(good, 3000).passed
    assert check_output_law(good, 1000, level="smoke").passed
    assert not check_decisions(Implementation(wrap(bug()), "bad"), 300).passed


def test_an_implementation_of_the_other_part_is_not_blamed():
    """A buggy verifier offered only as a tree builder passes (its verifier is not used)."""
    assert check_decisions(Implementation(BuilderOnly(ReusedUniform()), "b"), 120).passed


def _case_and_uniforms():
    case = hashed_case(4, 3, 2, policy="rheo", K=3, m=1, budget=5, beam=2)
    inst = float_instance(case)
    return inst, Uniforms.random(np.random.default_rng(1), 3, 2, 2)


def _tampered(method: str, tamper) -> str:
    """The decision-equality detail for the loop implementation with ``method``'s answer
    passed through ``tamper``; asserts it is a difference."""

    class Tampered(LoopImplementation):
        pass

    setattr(Tampered, method, lambda self, *a: tamper(getattr(LoopImplementation, method)(self, *a)))
    inst, u = _case_and_uniforms()
    got = compare_decisions(Implementation(Tampered(), "b"), inst, u)
    assert got.check.status == "differs", got.check.detail
    return got.check.detail


@pytest.mark.parametrize(
    "broken,needle",
    [
        (lambda t: {**t, "kinds": t["kinds"] + 5}, "kind"),
        (lambda t: {k: v for k, v in t.items() if k != "slots"}, "missing 'slots'"),
        (lambda t: {**t, "sample_probs": t["sample_probs"][:, :2]}, "sample_probs has shape"),
        (lambda t: {**t, "parents": (np.arange(len(t["parents"])) + 1) % len(t["parents"])}, "cycle"),
        (lambda t: {**t, "tokens": t["tokens"] + 0.4}, "tokens must hold integers; got float64"),
        (lambda t: {**t, "tokens": [str(x) for x in t["tokens"]]}, "tokens must hold integers; got <U"),
        (lambda t: {**t, "kinds": t["kinds"] == 1}, "kinds must hold integers; got bool"),
        (lambda t: {**t, "sample_probs": t["sample_probs"] * np.nan}, "is not a law"),
        (lambda t: {**t, "sample_probs": t["sample_probs"] * 2}, "is not a law"),
        (lambda t: {**t, "slots": [[s] for s in t["slots"]]}, "slots has shape"),
    ],
    ids=[
        "kind",
        "missing",
        "probs shape",
        "cycle",
        "float tokens",
        "string tokens",
        "bool kinds",
        "nan",
        "sum 2",
        "2-D slots",
    ],
)
def test_malformed_trees_are_reported_not_crashed(broken, needle):
    detail = _tampered("build_tree", broken)
    assert needle in detail, detail


@pytest.mark.parametrize(
    "broken,needle",
    [
        (lambda r: {**r, "tokens": [t + 0.4 for t in r["tokens"]]}, "tokens must hold integers; got float64"),
        (lambda r: {**r, "tokens": [str(t) for t in r["tokens"]]}, "tokens must hold integers"),
        (lambda r: {**r, "tokens": r["tokens"] + [0]}, "then one bonus or correction token"),
        (lambda r: {**r, "tokens": r["tokens"][:-1] + [99]}, "outside the vocabulary"),
        (lambda r: {**r, "accepted": r["accepted"] + [10**6]}, "is not a path down the tree"),
        (lambda r: {**r, "accepted": [2**70]}, "accepted must hold integers; got object"),
    ],
    ids=["float tokens", "string tokens", "extra token", "token out of range", "not a path", "huge index"],
)
def test_malformed_results_are_findings_never_coerced(broken, needle):
    detail = _tampered("verify", broken)
    assert needle in detail and "verify returned a malformed result" in detail, detail


def test_a_crash_is_a_finding():
    class Crash(LoopImplementation):
        def verify(self, *a):
            raise IndexError("out of range")

    inst, u = _case_and_uniforms()
    got = compare_decisions(Implementation(Crash(), "c"), inst, u)
    assert got.check.status == "differs" and "IndexError: out of range" in got.check.detail


def test_unsupported_configurations_are_skipped_and_counted():
    class NoFilters(LoopImplementation):
        def supports(self, config):
            return config["target_top_p"] is None and config["target_top_k"] is None and config["target_min_p"] is None

    r = check_decisions(Implementation(NoFilters(), "nf"), 100)
    # unsupported configurations are left out before the search: no example is spent on them
    assert r.passed and 0 < r.data["supported_configurations"] < r.data["configurations"]
    assert r.data["unsupported"] == 0 and r.data["equal"] + r.data["near"] == 100


class SupportsNothing(LoopImplementation):
    def supports(self, config):
        return False


def test_an_implementation_that_supports_nothing_fails_every_check():
    impl = Implementation(SupportsNothing(), "n")
    r = check_decisions(impl, 30)
    assert not r.passed and "nothing is proven" in r.detail and r.data["supported_configurations"] == 0, r.detail
    for check in (check_output_law(impl, 100, level="smoke"), check_cycle_law(impl, 100)):
        assert not check.passed and "nothing is proven" in check.detail, check.detail


class RecordsTemperature(LoopImplementation):
    """Supports everything; writes down the temperature each entry point's config carries."""

    def __init__(self):
        self.seen = {"supports": set(), "build_tree": set(), "verify": set()}

    def supports(self, config):
        self.seen["supports"].add(config["temperature"])
        return True

    def build_tree(self, draft_logits, config, temperature, u_draw):
        assert config["temperature"] == temperature
        self.seen["build_tree"].add(temperature)
        return super().build_tree(draft_logits, config, temperature, u_draw)

    def verify(self, tree, target_logits, config, temperature, uniforms):
        assert config["temperature"] == temperature
        self.seen["verify"].add(temperature)
        return super().verify(tree, target_logits, config, temperature, uniforms)


def test_supports_and_the_entry_points_see_the_temperature():
    impl = RecordsTemperature()
    assert check_decisions(Implementation(impl, "t"), 40).passed
    assert check_output_law(Implementation(impl, "t"), 200, level="quick").passed
    assert {0.0, 1 / 3, 0.5, 1.0, 1.5} <= impl.seen["supports"]  # 3/2: the matrix's float64 cases
    assert {0.5, 1.0, 1.5} <= impl.seen["build_tree"] and {0.5, 1.0, 1.5} <= impl.seen["verify"]


class GreedyNotImplemented(LoopImplementation):
    """Says it supports everything, but raises NotImplementedError at T = 0."""

    def verify(self, tree, target_logits, config, temperature, uniforms):
        if temperature == 0:
            raise NotImplementedError("greedy verification")
        return super().verify(tree, target_logits, config, temperature, uniforms)


def test_not_implemented_error_counts_as_unsupported_not_as_a_failure():
    impl = Implementation(GreedyNotImplemented(), "g")
    inst, u = _case_and_uniforms()
    greedy = float_instance({**hashed_case(4, 3, 2, policy="rheo", K=3, m=1, budget=5, beam=2), "temperature": "0"})
    assert compare_decisions(impl, greedy, u).check.status == "unsupported"
    assert compare_decisions(impl, inst, u).check.status == "equal"
    r = check_decisions(impl, 150)
    assert r.passed and r.data["unsupported"] > 0 and r.data["differs"] == 0, r.detail
    greedy_case = {**hashed_case(3, 5, 1, policy="topk", K=2, budget=2), "temperature": "0", "name": "greedy"}
    law = check_output_law(impl, 300, level="smoke", extra_cases=[greedy_case])
    assert law.passed and law.data["unsupported"] == ["greedy"], law.detail
    assert "unsupported: greedy" in law.detail

    class AlwaysNotImplemented(LoopImplementation):
        def build_tree(self, *a):
            raise NotImplementedError

    never = Implementation(AlwaysNotImplemented(), "never")
    for check in (check_decisions(never, 30), check_output_law(never, 100, level="smoke")):
        assert not check.passed and "nothing is proven" in check.detail, check.detail


def test_decision_equality_states_its_minimum_and_fails_below_it():
    r = check_decisions(Implementation(LoopImplementation(), "l"), 20, min_compared=50)
    assert not r.passed and "fewer than the minimum 50" in r.detail and r.data["minimum"] == 50, r.detail
    r = check_decisions(Implementation(LoopImplementation(), "l"), 20, min_compared=5)
    assert r.passed and "minimum 5" in r.detail


def test_own_randomness_runs_only_the_statistical_check():
    class OwnRng(LoopImplementation):
        follows_uniforms = False

    r = check_decisions(Implementation(OwnRng(), "o"), 10)
    assert r.passed and r.data["skipped"]


def test_load_implementation_by_file_path(monkeypatch):
    monkeypatch.chdir(ROOT)
    impl = load_implementation("examples/loop_impl.py:LoopImplementation")
    assert impl.builds_trees and impl.verifies and impl.provides() == "tree builder and verifier"


def test_load_implementation_by_file_path_from_another_directory(tmp_path, monkeypatch):
    """A file inside a package is imported by its dotted name from the package root (so
    examples/buggy_impl.py's `from examples.loop_impl import ...` works); a loose file by
    path, with its folder importable (so its sibling imports work); relative paths too."""
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "helper_for_rheo_test.py").write_text("SCALE = 1\n")
    (tmp_path / "mine" / "engine_for_rheo_test.py").write_text(
        "from helper_for_rheo_test import SCALE\n\nclass Engine:\n    def verify(self, *a):\n        return SCALE\n"
    )
    monkeypatch.chdir(tmp_path)
    impl = load_implementation(f"{ROOT / 'examples' / 'buggy_impl.py'}:ReusedUniform")
    assert type(impl.obj).__name__ == "ReusedUniform" and impl.builds_trees
    mine = load_implementation("mine/engine_for_rheo_test.py:Engine")
    assert mine.verifies and not mine.builds_trees and mine.obj.verify() == 1
    with pytest.raises(ImplLoadError, match="no such file"):
        load_implementation("mine/nothing.py:Engine")


@pytest.mark.parametrize(
    "source,needle",
    [
        (
            "class Engine:\n    def __init__(self):\n        raise ValueError('no GPU\\nfound')\n\n"
            "    def verify(self):\n        pass\n",
            "constructing Engine raised ValueError: no GPU found",
        ),
        ("class Engine(:\n    pass\n", "syntax error"),
        ("raise RuntimeError('import-time failure')\n", "raised RuntimeError: import-time failure"),
        ("import no_such_module_for_rheo_tests\n", "raised ModuleNotFoundError: No module named"),
    ],
    ids=["constructor", "syntax", "import-time", "missing-dependency"],
)
def test_load_errors_are_one_line(tmp_path, source, needle):
    path = tmp_path / f"broken_{abs(hash(source))}.py"
    path.write_text(source)
    with pytest.raises(ImplLoadError) as err:
        load_implementation(f"{path}:Engine")
    assert needle in str(err.value) and "\n" not in str(err.value), str(err.value)


class OwnRandomness(LoopImplementation):
    """The loop implementation drawing its own uniforms from numpy (the handed ones unused)."""

    follows_uniforms = False

    def __init__(self):
        self.rng = np.random.default_rng(7)

    def build_tree(self, draft_logits, config, temperature, u_draw):
        return super().build_tree(draft_logits, config, temperature, self.rng.random(len(u_draw)))

    def verify(self, tree, target_logits, config, temperature, uniforms):
        own = {k: self.rng.random(np.shape(v)) for k, v in uniforms.items()}
        return super().verify(tree, target_logits, config, temperature, own)


@pytest.mark.parametrize("impl", [LoopImplementation, OwnRandomness], ids=lambda c: c.__name__)
def test_output_law_passes_lossless_implementations(impl):
    r = check_output_law(Implementation(impl(), impl.__name__), 2000, level="smoke")
    assert r.passed and r.detail.startswith("lossless on 3 cases, each within detectable TV"), r.detail
    assert r.detail.count(": lossless within detectable TV") == 3 and r.data["judged_against"] == "spec"
    assert "sampler_law_differs_from_spec" not in r.data


def test_output_law_rejects_a_lossy_verifier_with_its_worst_sequences():
    """ReusedUniform correlates two coins: the continued output law is off p_T."""
    r = check_output_law(Implementation(ReusedUniform(), "r"), 2000, level="smoke")
    assert not r.passed and r.detail.startswith("not lossless on "), r.detail
    saved = r.counterexample
    assert saved["check"] == "output law" and saved["seed"] == 0 and saved["case"]["name"] == saved["case_name"]
    worst = saved["worst_sequences"][0]
    assert len(worst["sequence"]) == saved["case"]["depth"] + 1 and abs(worst["observed"] - worst["p_T"]) > 0.01
    json.dumps(saved)  # written as a counterexample file


def _without_filters(config):
    return {**config, "target_top_k": None, "target_top_p": None, "target_min_p": None}


class TiesKeptTopK(LoopImplementation):
    """A verifier whose target top-k keeps every token tied with the k-th (as transformers'
    warper does): lossless for its own law, not for docs/spec.md §0's."""

    def target_law(self, logits, config, temperature):
        p = super().target_law(logits, _without_filters(config), temperature)
        k = config.get("target_top_k")
        if k is not None and k < len(p):
            p = np.where(p >= np.sort(p)[-k], p, 0.0)
            p = p / p.sum()
        with np.errstate(divide="ignore"):
            return super().target_law(np.log(p), {**config, "target_top_k": None}, 1.0)


class DeclaredTiesKeptTopK(TiesKeptTopK):
    def sampler_law(self, logits, config, temperature):
        return self.target_law(np.asarray(logits, dtype=np.float64), config, temperature)


TIED = {
    "name": "tied at the k-th place",
    "vocab_size": 3,
    "target": {"*": ["1/2", "1/4", "1/4"]},
    "draft": {"*": ["1/6", "1/3", "1/2"]},
    "policy": "rheo",
    "K": 2,
    "m": 0,
    "depth": 1,
    "budget": 2,
    "target_top_k": 2,
}


def test_an_implementation_is_judged_against_its_declared_sampler_law():
    declared = check_output_law(Implementation(DeclaredTiesKeptTopK(), "d"), 1000, level="smoke", extra_cases=[TIED])
    assert declared.passed and "against its own sampler_law" in declared.detail, declared.detail
    differs = declared.data["sampler_law_differs_from_spec"]
    assert (
        differs["max_abs_difference"] >= 0.25 - 1e-12 and "sampler_law differs from docs/spec.md §0" in declared.detail
    )
    silent = check_output_law(Implementation(TiesKeptTopK(), "s"), 1000, level="smoke", extra_cases=[TIED])
    assert not silent.passed and silent.data["cases"][TIED["name"]]["reject"], silent.detail
    assert silent.data["cases"][TIED["name"]]["impossible"]  # token 2 has probability 0 under docs/spec.md §0

    class DeclaresTheSpecLaw(LoopImplementation):
        def sampler_law(self, logits, config, temperature):
            return self.target_law(np.asarray(logits), config, temperature)

    same = check_output_law(Implementation(DeclaresTheSpecLaw(), "d"), 300, level="smoke", extra_cases=[TIED])
    assert same.passed and same.data["sampler_law_differs_from_spec"]["max_abs_difference"] < 1e-12
    assert "Its sampler_law equals docs/spec.md §0's law" in same.detail


@pytest.mark.parametrize(
    "law,needle",
    [
        (lambda p: p[:-1], "sampler_law returned shape [2], expected [V] = [3]"),
        (lambda p: p - 0.5, "negative"),
        (lambda p: p * 2, "sums to"),
        (lambda p: np.full(3, np.nan), "not a finite number"),
    ],
    ids=["length", "negative", "sum", "nan"],
)
def test_a_malformed_sampler_law_is_a_finding_that_names_the_field(law, needle):
    class Malformed(LoopImplementation):
        def sampler_law(self, logits, config, temperature):
            return law(self.target_law(np.asarray(logits), config, temperature))

    small = {**TIED, "target_top_k": None, "name": "small"}
    r = check_output_law(Implementation(Malformed(), "m"), 50, level="smoke", extra_cases=[small])
    assert not r.passed and needle in r.detail and "sampler_law" in r.detail, r.detail


def test_judged_instance_is_the_instance_itself_without_sampler_law():
    inst = float_instance(TIED)
    assert judged_instance(Implementation(TiesKeptTopK(), "t"), inst) is inst
    judged = judged_instance(Implementation(DeclaredTiesKeptTopK(), "d"), inst)
    assert isinstance(judged, JudgedInstance) and judged.draft is inst.draft and judged.config is inst.config
    assert judged.target_law(()) == pytest.approx((0.5, 0.25, 0.25))
    assert inst.target_law(()) == pytest.approx((2 / 3, 1 / 3, 0.0))  # docs/spec.md §0: the lower id is kept
    assert judged.node_laws(()).residual == inst.node_laws(()).residual  # the draft side is untouched


@pytest.mark.parametrize("name", ["IgnoresDraftTopK", "UntemperedResidual", "SkippedFilters"])
def test_more_realistic_bugs_are_caught(name):
    """examples/buggy_impl.py's three further bugs: decision equality catches each and says
    what it shows (not the specified algorithm: the first two are still lossless, which
    tests/test_exact_impl.py proves exactly)."""
    import examples.buggy_impl as bugs

    r = check_decisions(Implementation(getattr(bugs, name)(), name), 300)
    assert not r.passed and r.detail.startswith("not the specified algorithm: "), r.detail
    print(f"{name}: {r.detail}")


def test_counterexample_files_are_named_by_implementation(tmp_path):
    """The README walkthrough: both buggy examples into one folder, then replay the first."""
    from rheo.checks.differential.decision_equality import replay
    from rheo.checks.gate.checklist import impl_checks
    from rheo.checks.gate.run import run_checks
    from rheo.checks.outcome import Profile

    profile = Profile("t", "smoke", 0, False, 0, 0, 300, 2000)
    files = {}
    for bug in ("TokenTieBreak", "ReusedUniform"):
        impl = load_implementation(f"examples.buggy_impl:{bug}")
        checks = impl_checks(impl)
        assert checks[0].name.startswith("impl: decision equality"), checks[0].name
        (dec,) = run_checks(checks[:1], profile, tmp_path)  # the check that writes the file; the rest take minutes
        assert dec.verdict == "fail"
        files[bug] = dec.counterexample
    assert files["TokenTieBreak"].endswith("examples-buggy-impl-tokentiebreak-decision-equality.json")
    assert len(set(files.values())) == 2
    assert (
        replay(load_implementation("examples.buggy_impl:TokenTieBreak"), files["TokenTieBreak"]).check.status
        == "differs"
    )


def _arrays():
    """Anything an implementation might hand back as one field: arrays of every dtype and
    shape (NaN, inf, huge ints, strings, booleans), lists, scalars, None."""
    from hypothesis.extra import numpy as hnp

    dtypes = st.one_of(hnp.integer_dtypes(), hnp.floating_dtypes(), hnp.boolean_dtypes(), hnp.unicode_string_dtypes())
    arrays = hnp.arrays(dtypes, hnp.array_shapes(min_dims=0, max_dims=3, max_side=6))
    scalars = st.one_of(st.integers(-(2**80), 2**80), st.floats(), st.text(max_size=5), st.none(), st.booleans())
    return st.one_of(arrays, st.lists(scalars, max_size=6), scalars)


@given(tree_fields=st.dictionaries(st.sampled_from(["tokens", "parents", "kinds", "slots", "sample_probs"]), _arrays()))
@settings(max_examples=300, deadline=None)
def test_any_returned_tree_is_read_or_refused_as_a_finding(tree_fields):
    inst, _ = _case_and_uniforms()
    try:
        read_tree(tree_fields, inst)
    except BadOutput as e:
        assert "\n" not in str(e)


@given(result=st.dictionaries(st.sampled_from(["tokens", "accepted"]), _arrays()))
@settings(max_examples=300, deadline=None)
def test_any_returned_result_is_read_or_refused_as_a_finding(result):
    from rheo.checks.protocol.outputs import read_result

    tree = {"tokens": [1, 2, 0], "parents": [-1, 0, 0]}
    try:
        read_result(result, tree, 4)
    except BadOutput as e:
        assert "\n" not in str(e)


class WholeCycle:
    """A chain of transformers_style's as one whole cycle (the protocol's ``cycle``): its
    own tree builder, then its verifier on the target rows of the chain's paths."""

    def __init__(self, chain) -> None:
        self.inner = chain
        self.supports = chain.supports
        self.sampler_law = chain.sampler_law

    def cycle(self, draft_logits, target_logits, config, temperature):
        tree = self.inner.build_tree(draft_logits, config, temperature, None)
        tokens = np.asarray(tree["tokens"]).tolist()
        paths = [()] + [tuple(tokens[: i + 1]) for i in range(len(tokens))]  # the root, then each node
        result = self.inner.verify(tree, target_logits(paths), config, temperature, {})
        return result["tokens"]


def test_whole_cycles_are_judged_exactly_and_in_law():
    """An implementation that has only ``cycle`` (draft, verify, emit in one call, its own
    randomness) is certified exactly and sampled; a lossy one is caught both ways."""
    from examples.transformers_style import EarlyStopChain, GreedyDraftChain
    from rheo.checks.exact.certify import certify_implementation
    from rheo.checks.gate.checklist import impl_checks

    good = Implementation(WholeCycle(EarlyStopChain()), "good")
    bad = Implementation(WholeCycle(GreedyDraftChain()), "bad")
    assert good.runs_cycles and not good.follows_uniforms and good.provides() == "whole cycles"
    assert [c.name for c in impl_checks(good)] == [
        "impl: exact certification (whole cycles)",
        "impl: output law (whole cycles)",
        "impl: output law, beyond exact reach (whole cycles)",
        "impl: real vocabulary sizes, exactly (whole cycles)",
        "impl: rows without a law (whole cycles)",
    ]
    case = {**TIED, "K": 1, "depth": 2, "budget": 2, "target_top_k": None, "draft": {"*": ["1/2", "1/4", "1/4"]}}
    assert certify_implementation(good, case).verdict == "lossless"
    cert = certify_implementation(bad, case)
    assert cert.verdict == "not lossless" and cert.deviation > 0.01, cert.detail
    assert check_output_law(good, 2000, level="smoke").passed
    assert not check_output_law(bad, 4000, level="smoke").passed


@pytest.mark.parametrize(
    "tokens, needle",
    [([], "must hold 1 to depth + 1"), ([0, 1, 2, 0], "must hold 1 to depth + 1"), ([7], "outside the vocabulary"),
     ([0.5], "must hold integers")],
)  # fmt: skip
def test_a_whole_cycle_that_emits_a_malformed_answer_is_a_finding(tokens, needle):
    from rheo.checks.protocol.calls import call_cycle
    from rheo.checks.protocol.inputs import law_instance

    class Emits:
        def cycle(self, *_):
            return tokens

    inst = law_instance({**TIED, "K": 1, "depth": 2, "budget": 2})
    with pytest.raises(BadOutput, match=re.escape(needle)):
        call_cycle(Implementation(Emits(), "e"), inst)
