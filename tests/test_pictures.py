"""Pictures of findings (rheo.checks.gate.pictures): counterexample payloads of real checks on
planted bugs, a hand-built draft tree, and ``rheo exact --plot``. Each PNG is read back and
must be a picture: its size, many colours, the bars' own colours, not blank."""

from __future__ import annotations

import json
import sys

import pytest

pytest.importorskip("matplotlib")

from matplotlib.image import imread

from rheo.casefile import builtin_examples, load_case
from rheo.checks.exact.certify import certify_implementation
from rheo.checks.exact.check import counterexample
from rheo.checks.gate import drawing, pictures
from rheo.checks.protocol import load_implementation
from rheo.checks.statistics.output_law import check_output_law
from rheo.cli import main
from rheo.reference import certify, continued_sequence_law, target_sequence_probability
from rheo.reference.generate import hashed_case

RHEO_M1 = hashed_case(3, 1, 2, policy="rheo", K=2, m=1, budget=3, beam=2, temperature="1/2")


def rgb(hex_colour: str) -> tuple[int, int, int]:
    return tuple(int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))  # type: ignore[return-value]


def read_picture(path, min_width: int = 700, min_height: int = 350, colours=(drawing.OBSERVED, drawing.TARGET)):
    """The PNG at ``path`` as integer RGB pixels, checked: at least this size, not blank
    (a tenth of it not white, many distinct colours) and holding each of ``colours``."""
    img = imread(path)
    assert img.ndim == 3, img.shape
    height, width = img.shape[:2]
    assert width >= min_width and height >= min_height, (width, height)
    pixels = (img[..., :3] * 255).round().astype(int).reshape(-1, 3)
    assert (pixels < 245).any(axis=1).mean() > 0.05, "the picture is (nearly) blank"
    distinct = {tuple(p) for p in pixels[:: max(1, len(pixels) // 20000)]}
    assert len(distinct) >= 20, len(distinct)
    for colour in colours:
        hits = (pixels == rgb(colour)).all(axis=1).sum()
        assert hits > 500, f"colour {colour} covers only {hits} pixels"
    return pixels


@pytest.fixture(scope="module")
def exact_payload():
    impl = load_implementation("examples.buggy_impl:TokenTieBreak")
    cert = certify_implementation(impl, RHEO_M1)
    assert cert.verdict == "not lossless"
    return counterexample(impl, cert, shrunk=False)


@pytest.fixture(scope="module")
def law_payload():
    impl = load_implementation("examples.buggy_impl:ReusedUniform")
    outcome = check_output_law(impl, 2000, level="smoke")
    assert not outcome.passed and outcome.counterexample["worst_sequences"]
    return outcome.counterexample


# a realistic tree in the protocol's form: root -> lead 1 (accepted), sample 2; lead 1 ->
# lead 0, sample 1 (accepted, a leaf); the bonus token 2 closes the walk
TREE = {
    "tokens": [1, 2, 0, 1, 3],
    "parents": [-1, -1, 0, 0, 1],
    "kinds": [0, 1, 0, 1, 0],
    "accepted": [0, 3],
    "emitted": [1, 1, 2],
    "last": "bonus",
    "probability": 0.0123,
}


def test_the_exact_certificate_is_drawn_worst_sequence_first(exact_payload, tmp_path):
    rows, note = pictures._exact_rows(json.loads(json.dumps(exact_payload)))  # as read back from its file
    assert not note and len(rows) == drawing.ROWS
    assert list(rows[0].sequence) == exact_payload["worst_sequence"]
    assert float(rows[0].value) == pytest.approx(exact_payload["worst_continued"], abs=1e-12)
    assert float(rows[0].target) == pytest.approx(exact_payload["worst_target"], abs=1e-12)
    devs = [abs(float(r.deviation)) for r in rows]
    assert devs == sorted(devs, reverse=True)
    out = pictures.write_counterexample_picture(exact_payload, tmp_path / "exact.png")
    assert out == tmp_path / "exact.png"
    read_picture(out)


def test_an_exact_certificate_without_its_law_shows_its_worst_sequence(exact_payload, tmp_path):
    payload = {k: v for k, v in exact_payload.items() if k != "output_law"}
    rows, note = pictures._exact_rows(payload)
    assert [list(r.sequence) for r in rows] == [exact_payload["worst_sequence"]] and note
    read_picture(pictures.write_counterexample_picture(payload, tmp_path / "worst.png"), min_height=200)


def test_the_output_law_finding_is_drawn_with_its_intervals(law_payload, tmp_path):
    bars = pictures._payload_bars(law_payload)
    assert bars is not None and bars.interval_label and not bars.lossless
    cycles = law_payload["cycles"]
    for row, entry in zip(bars.rows, law_payload["worst_sequences"]):
        assert list(row.sequence) == entry["sequence"] and row.value == entry["observed"]
        assert row.low <= row.value <= row.high and row.high - row.low < 0.1  # 99% Wilson interval, 2000 cycles
        se = (entry["p_T"] * (1 - entry["p_T"]) / cycles) ** 0.5
        assert row.z == pytest.approx((entry["observed"] - entry["p_T"]) / se)
    assert abs(bars.rows[0].z) > 5  # the worst sequence is far outside its sampling error
    read_picture(pictures.write_counterexample_picture(law_payload, tmp_path / "law.png"))


def test_a_worst_tree_adds_a_panel(law_payload, tmp_path):
    without = {k: v for k, v in law_payload.items() if k != "worst_tree"}  # the check adds its own
    plain = read_picture(pictures.write_counterexample_picture(without, tmp_path / "plain.png"))
    out = pictures.write_counterexample_picture({**law_payload, "worst_tree": TREE}, tmp_path / "tree.png")
    pixels = read_picture(out, min_width=1100, colours=(drawing.OBSERVED, drawing.TARGET, drawing.ACCEPTED))
    assert len(pixels) > 1.3 * len(plain)
    # a rejection at an inner node ends with a correction token (default for "last"), drawn alone
    corrected = {**TREE, "accepted": [0], "emitted": [1, 2], "probability": None}
    del corrected["last"]
    assert drawing._tree_layout(corrected)["final"] == {"token": 2, "kind": "correction", "parent": 0}
    alone = pictures.write_counterexample_picture(
        {"check": "decision equality", "worst_tree": corrected}, tmp_path / "t.png"
    )
    read_picture(alone, min_width=400, min_height=250, colours=(drawing.ACCEPTED,))


@pytest.mark.parametrize(
    "tree, field",
    [
        ({**TREE, "kinds": [0, 1, 0, 1]}, "differ in length"),
        ({**TREE, "parents": [-1, 2, 1, 0, 1]}, "do not form a tree|hang from the root"),
        ({**TREE, "accepted": [3]}, "walk down from the root"),
        ({**TREE, "kinds": [0, 1, 0, 5, 0]}, "kinds"),
        ({k: v for k, v in TREE.items() if k != "tokens"}, "tokens"),
    ],
)
def test_a_malformed_worst_tree_names_the_field_and_writes_nothing(law_payload, tmp_path, tree, field):
    with pytest.raises(ValueError, match=f"worst_tree: .*({field})"):
        pictures.write_counterexample_picture({**law_payload, "worst_tree": tree}, tmp_path / "bad.png")
    assert not (tmp_path / "bad.png").exists()


def test_a_payload_with_nothing_to_draw_writes_nothing(tmp_path):
    payload = {"check": "decision equality", "implementation": "x:Y", "difference": "tree: ..."}
    assert pictures.write_counterexample_picture(payload, tmp_path / "none.png") is None
    assert not (tmp_path / "none.png").exists()


def test_the_rows_are_the_continued_law_and_the_search_finds_the_same(monkeypatch):
    inst = load_case(builtin_examples()["abc-constant"])
    report = certify(inst)
    law = report.cycle.law
    full = continued_sequence_law(inst, law)
    rows = pictures.continued_rows(inst, law, 9)
    assert {r.sequence: r.value for r in rows} == full
    assert all(r.target == target_sequence_probability(inst, r.sequence) for r in rows)
    assert (
        rows[0].sequence == report.deviation.sequence
        and rows[0].deviation == report.deviation.continued - report.deviation.target
    )
    monkeypatch.setattr(drawing, "FULL_SEARCH", 0)  # the best-first search, which large cases use
    searched = pictures.continued_rows(inst, law, 5)  # it collects 4 x 5 > 9 sequences: all of them
    assert [(r.sequence, r.value, r.target) for r in searched] == [(r.sequence, r.value, r.target) for r in rows[:5]]
    # with room for 4, it finds the 4 likeliest (by the larger of the two laws) and keeps the worst of them
    likeliest = sorted(full, key=lambda s: -max(full[s], target_sequence_probability(inst, s)))[:4]
    worst = max(likeliest, key=lambda s: abs(full[s] - target_sequence_probability(inst, s)))
    assert [r.sequence for r in pictures.continued_rows(inst, law, 1)] == [worst]
    included = pictures.continued_rows(inst, law, 9, include=[(0, 0)])
    assert (0, 0) in {r.sequence for r in included}


def test_rheo_exact_plot_draws_the_law(tmp_path, capsys):
    out = tmp_path / "abc-constant.png"
    assert main(["exact", "--example", "abc-constant", "--plot", str(out), "--json"]) == 1
    printed = json.loads(capsys.readouterr().out)  # stdout stays one JSON object
    assert printed["plot"] == str(out) and printed["lossless"] is False
    read_picture(out, min_width=1200)
    lossless = tmp_path / "abc.png"
    assert main(["exact", "--plot", str(lossless)]) == 0
    read_picture(lossless, min_width=1200)


def test_rheo_exact_plot_into_a_missing_folder_is_bad_input(tmp_path, capsys):
    assert main(["exact", "--plot", str(tmp_path / "no" / "x.png")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rheo: error: --plot: cannot write")


def test_without_matplotlib_plot_is_bad_input(tmp_path, capsys, monkeypatch):
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.setitem(sys.modules, name, None)  # every import of matplotlib now fails
    assert not pictures.have_matplotlib()
    out = tmp_path / "x.png"
    assert main(["exact", "--example", "abc-constant", "--plot", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == 'rheo: error: --plot: needs matplotlib; pip install "rheosampling[notebooks]"\n'
    assert main(["exact", "--plot", str(out), "--json"]) == 2
    assert json.loads(capsys.readouterr().out) == {"error": f"--plot: {pictures.MATPLOTLIB_MISSING}"}
    assert pictures.write_counterexample_picture({"worst_tree": TREE}, out) is None
    assert not out.exists()


def test_findings_carry_a_draft_tree_that_yields_their_worst_sequence(exact_payload, law_payload):
    """Both kinds of finding of a tree-building implementation carry ``worst_tree``: one of
    its cycles whose emitted tokens begin the worst sequence, accepted nodes walking down
    the tree from the root."""
    for payload, worst in (
        (exact_payload, exact_payload["worst_sequence"]),
        (law_payload, law_payload["worst_sequences"][0]["sequence"]),
    ):
        tree = payload["worst_tree"]
        assert list(worst[: len(tree["emitted"])]) == tree["emitted"]
        parent = -1
        for i in tree["accepted"]:
            assert tree["parents"][i] == parent
            parent = i
        assert tree["emitted"][:-1] == [tree["tokens"][i] for i in tree["accepted"]]
        assert tree["last"] in ("bonus", "correction")


def test_the_gate_writes_a_picture_beside_each_failing_law(tmp_path):
    """rheo gate --impl on a lossy verifier: the output-law finding's PNG lies beside its
    JSON, the report names it, and --json gives its path."""
    out = tmp_path / "out"
    argv = ["gate", "--impl", "examples.buggy_impl:ReusedUniform", "--profile", "smoke", "--only", "output law ("]
    code = main([*argv, "--out", str(out), "--json"])
    assert code == 1
    [png] = sorted(out.glob("*.png"))
    assert png.with_suffix(".json").is_file() and png.stem == "examples-buggy-impl-reuseduniform-output-law"
    read_picture(png, colours=(drawing.OBSERVED, drawing.TARGET, drawing.ACCEPTED))
