"""reference/choices.py: the uniforms' shapes (docs/spec.md §7) and the inverse-CDF draw's
float edge (issue 24: mutation-testing survivors)."""

import numpy as np
import pytest

from rheo.reference.choices import UniformChooser, Uniforms


@pytest.mark.parametrize("K, B, D", [(1, 1, 1), (3, 2, 4), (4, 4, 2)])
def test_fresh_uniforms_have_the_documented_shapes(K, B, D):
    u = Uniforms.random(np.random.default_rng(0), K, B, D)
    assert len(u.u_draw) == 1 + B * (D - 1)
    assert len(u.u_sample) == D + 1 and len(u.u_final) == D + 1
    assert len(u.u_det) == D + 1 and all(len(row) == K for row in u.u_det)
    assert all(0 <= x < 1 for x in [*u.u_draw, *u.u_sample, *u.u_final, *(x for r in u.u_det for x in r)])


def test_lookup_by_name_and_an_unknown_name():
    u = Uniforms([0.1, 0.2], [0.3], [[0.4, 0.5]], [0.6])
    assert [u.lookup(("draw", 1)), u.lookup(("sample", 0)), u.lookup(("det", 0, 1)), u.lookup(("final", 0))] == [
        0.2,
        0.3,
        0.5,
        0.6,
    ]
    with pytest.raises(KeyError) as err:
        u.lookup(("bogus", 0))  # type: ignore[arg-type]
    assert err.value.args == (("bogus", 0),)


def test_a_draw_never_picks_a_token_without_mass():
    # float masses summing to a hair below u: the last token WITH mass wins, not the zero after it
    items = [(0, 0.3), (1, 0.7 - 2**-50), (2, 0.0)]
    u = Uniforms([1 - 2**-53], [], [], [])
    chooser = UniformChooser(u)
    assert chooser.draw(("draw", 0), items) == 1
    assert chooser.decisions == [(("draw", 0), 1)]
    # inverse CDF: the first token whose running mass exceeds u, skipping zeros
    for x, want in [(0.0, 0), (0.29, 0), (0.3, 1), (0.99, 1)]:
        assert UniformChooser(Uniforms([x], [], [], [])).draw(("draw", 0), [(0, 0.3), (2, 0.0), (1, 0.7)]) == want


def test_coins_accept_iff_u_below_a():
    chooser = UniformChooser(Uniforms([], [], [[0.5, 0.25]], []))
    assert chooser.coin(("det", 0, 0), 0.5) is False and chooser.coin(("det", 0, 1), 0.5) is True
    assert chooser.decisions == [(("det", 0, 0), False), (("det", 0, 1), True)]
