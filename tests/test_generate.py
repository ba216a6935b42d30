"""reference/generate.py: generated instances are reproducible from (vocab_size, seed,
max_weight, zero_share) and written with their defaults (issue 24: mutation survivors)."""

import hashlib
from fractions import Fraction

from rheo.reference.generate import hashed_case, hashed_instance, hashed_law, hashed_tables


def test_hashed_tables_are_the_hashed_laws_with_the_documented_defaults():
    target, draft = hashed_tables(12, seed=3)  # 36 weights: zero_share 1 would zero one of them
    assert (target.name, draft.name) == ("target", "draft")
    for prefix in [(), (1,), (0, 3)]:
        assert target.fn is not None and draft.fn is not None
        assert target.fn(prefix) == hashed_law(12, 3, prefix, 20, 0, "target")
        assert draft.fn(prefix) == hashed_law(12, 3, prefix, 20, 0, "draft")
        assert target.fn(prefix) != draft.fn(prefix)
    t9, _ = hashed_tables(4, seed=3, max_weight=9, zero_share=8)
    assert t9.fn is not None and t9.fn((2,)) == hashed_law(4, 3, (2,), 9, 8, "target")
    assert hashed_tables(12, seed=4)[0].fn(()) != target.fn(())  # type: ignore[misc]
    assert 0 not in target.fn(()) + target.fn((1,)) + target.fn((0, 3))  # the default zero_share is 0


def test_hashed_laws_by_their_weights():
    law = hashed_law(5, seed=1, prefix=(2,), max_weight=3)
    assert sum(law) == 1 and all(x > 0 for x in law) and max(law) / min(law) <= 3  # weights 1..3
    assert max(law) / min(law) in (Fraction(1), Fraction(3, 2), Fraction(2), Fraction(3))
    zeros = hashed_law(40, seed=0, prefix=(), zero_share=15)
    assert 0 < sum(1 for x in zeros if x == 0) < 40
    assert hashed_law(3, seed=0, prefix=(), zero_share=16) == (1, 0, 0)  # all zeroed: the first weight is 1


def test_hashed_law_is_the_documented_function_of_the_hash():
    """The docstring's recipe, byte by byte: a generated case named by its seed must come back
    the same in every version. Checked on laws with and without zeroed weights; z = 5 with a
    byte whose low 4 bits are exactly 5 is kept (the test is h mod 16 < z)."""
    for n, seed, prefix, w, z, salt in [
        (6, 0, (), 20, 0, "target"),
        (9, 7, (2, 5), 3, 0, "draft"),
        (40, 1, (1,), 20, 5, "target"),
        (40, 2, (0, 0), 11, 9, ""),
    ]:
        h = hashlib.shake_256(f"{salt}|{seed}|{','.join(map(str, prefix))}".encode()).digest(2 * n)
        weights = [0 if z > 0 and h[2 * i + 1] % 16 < z else 1 + h[2 * i] % w for i in range(n)]
        assert any(weights)
        assert hashed_law(n, seed, prefix, w, z, salt) == tuple(Fraction(x, sum(weights)) for x in weights)
        if z:
            assert 0 < weights.count(0) < n
            low = [h[2 * i + 1] % 16 for i in range(n)]
            assert z in low, "the boundary h mod 16 == z is exercised"


def test_a_float_instance_has_the_same_laws_as_floats():
    exact = hashed_instance(3, 5, policy="rheo", K=2, m=1, depth=2, budget=3)
    floats = hashed_instance(3, 5, policy="rheo", K=2, m=1, depth=2, budget=3, arithmetic="float64")
    for prefix in [(), (2,)]:
        assert floats.target.fn is not None and exact.target.fn is not None
        assert floats.target.fn(prefix) == tuple(float(x) for x in exact.target.fn(prefix))
        assert all(type(x) is float for x in floats.target_law(prefix))
        assert floats.draft.fn is not None and floats.draft.fn(prefix) == tuple(
            float(x) for x in exact.draft.fn(prefix)
        )  # type: ignore[misc]
    assert (floats.target.name, floats.draft.name) == ("target", "draft")
    case = hashed_case(3, 5, 1, policy="topk", K=1, budget=1, beam=None)
    assert "beam" not in case and case["depth"] == 1 and case["vocab_size"] == 3
    assert case["target"]["1"] == [f"{x.numerator}/{x.denominator}" for x in hashed_law(3, 5, (1,), salt="target")]


def test_a_generated_case_file_writes_the_hashed_tables():
    """hashed_case writes, at every prefix, the laws of hashed_tables with the same weights
    and zeros: the draft under its own salt, zero_share passed through (z = 12: most weights
    zeroed, so a dropped z shows)."""
    for w, z in [(20, 0), (6, 12)]:
        case = hashed_case(4, 9, 2, max_weight=w, zero_share=z, policy="rheo", K=2, m=1, budget=3)
        target, draft = hashed_tables(4, 9, w, z)
        assert target.fn is not None and draft.fn is not None
        for key in ["", "0", "3", "2,1"]:
            prefix = tuple(int(t) for t in key.split(",")) if key else ()
            tables = [("target", target.fn)] + [("draft", draft.fn)] * (len(prefix) < 2)  # no draft at the depth
            for table, fn in tables:
                assert case[table][key] == [f"{x.numerator}/{x.denominator}" for x in fn(prefix)], (table, key)
        assert "2,1" not in case["draft"]
        if z:
            assert any("0/1" in law for law in case["draft"].values())


def test_a_generated_instance_is_made_of_the_hashed_tables():
    for kw, (w, z) in [({}, (20, 0)), ({"max_weight": 7, "zero_share": 9}, (7, 9))]:
        for arithmetic in ("exact", "float64"):
            inst = hashed_instance(4, 2, **kw, policy="rheo", K=2, m=1, depth=1, budget=2, arithmetic=arithmetic)
            assert inst.target.fn is not None and inst.draft.fn is not None and inst.exact == (arithmetic == "exact")
            for prefix in [(), (3,)]:
                want_t, want_d = hashed_law(4, 2, prefix, w, z, "target"), hashed_law(4, 2, prefix, w, z, "draft")
                assert inst.target.fn(prefix) == tuple(want_t if inst.exact else map(float, want_t))
                assert inst.draft.fn(prefix) == tuple(want_d if inst.exact else map(float, want_d))
