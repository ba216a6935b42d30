"""rheo.testing.models: a case's tables as causal LMs (docs/adapters.md, "Library loops that
call a model"). The logits are the tables' rows at every position (batched, padded), the
depth convention holds (the draft's deepest row beyond its table, an error for the target
past D), the transformers wrapper answers the same, and a plain speculative-sampling loop
written against the models is certified lossless exactly while a planted off-by-one is not."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("torch")

import torch

from rheo.checks.exact.check import check_exact
from rheo.checks.gate.coverage import supported_cases
from rheo.checks.protocol.load import Implementation
from rheo.testing import TableCausalLM, TableDepthError, as_transformers, table_models, transformers_classes

V, D = 5, 3
PROMPT = (4, 0, 2)


def row_of(path: tuple[int, ...]) -> np.ndarray:
    """A fixed logit row per path (token 3 impossible after token 1)."""
    row = np.array([math.sin(1.7 * (i + 1) * (1 + sum((t + 1) * 5**k for k, t in enumerate(path)))) for i in range(V)])
    if path and path[-1] == 1:
        row[3] = -np.inf
    return row


class Recorder:
    """A table function that remembers every path it was asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[int, ...]] = []

    def __call__(self, paths):
        self.asked.extend(tuple(p) for p in paths)
        return np.stack([row_of(tuple(p)) for p in paths])


def test_logits_are_the_tables_at_every_position_of_a_batch():
    target = TableCausalLM(Recorder(), PROMPT, D, "target")
    drafts = [(1, 3, 0), (2, 2, 4), (0, 1, 1)]
    ids = torch.tensor([list(PROMPT) + list(d) for d in drafts])  # [3, 6]
    out = target(ids)
    assert out.shape == (3, 6, V) and out.dtype == torch.float64 and target.vocab_size == V
    for b, d in enumerate(drafts):
        assert (out[b, : len(PROMPT) - 1] == 0).all()  # before the root: zeros
        for i in range(D + 1):  # position len(prompt) - 1 + i: the path of the first i drafts
            assert np.array_equal(out[b, len(PROMPT) - 1 + i].numpy(), row_of(d[:i]))


def test_padding_is_left_out_and_answers_zeros():
    model = TableCausalLM(Recorder(), PROMPT, D, "target")
    ids = torch.tensor([[9, 9, *PROMPT, 1], [*PROMPT, 2, 3, 0]])  # row 0 left-padded with 9s
    mask = torch.tensor([[0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]])
    out = model(ids, attention_mask=mask)
    assert (out[0, :4] == 0).all()
    assert np.array_equal(out[0, 4].numpy(), row_of(())) and np.array_equal(out[0, 5].numpy(), row_of((1,)))
    assert torch.equal(out[1], model(ids[1:])[0])
    with pytest.raises(ValueError, match="does not begin with the prompt"):
        model(ids)  # the padding read as tokens
    with pytest.raises(ValueError, match="outside the vocabulary"):
        model(torch.tensor([[*PROMPT, V]]))
    short = model(torch.tensor([list(PROMPT[:2])]))  # all before the root
    assert short.shape == (1, 2, V) and (short == 0).all()


def test_the_draft_beyond_its_table_answers_its_deepest_row():
    table = Recorder()
    draft = TableCausalLM(table, PROMPT, D, "draft")
    path = (2, 0, 1, 4)  # D + 1 tokens: positions at depths D and D + 1
    out = draft(torch.tensor([[*PROMPT, *path]]))[0, len(PROMPT) - 1 :]
    for i in range(D):
        assert np.array_equal(out[i].numpy(), row_of(path[:i]))
    for i in (D, D + 1):
        assert np.array_equal(out[i].numpy(), row_of(path[: D - 1]))
    assert max(len(p) for p in table.asked) == D - 1  # the draft table is never asked past D - 1


def test_the_target_past_the_depth_raises():
    table = Recorder()
    target = TableCausalLM(table, PROMPT, D, "target")
    target(torch.tensor([[*PROMPT, 1, 1, 1]]))  # D drafts: paths of 0..D tokens
    with pytest.raises(TableDepthError, match="past the depth D = 3"):
        target(torch.tensor([[*PROMPT, 1, 1, 1, 1]]))
    assert max(len(p) for p in table.asked) == D


def test_the_transformers_wrapper_answers_the_same():
    transformers = pytest.importorskip("transformers")
    lm = TableCausalLM(Recorder(), PROMPT, D, "draft")
    model = as_transformers(lm)
    assert isinstance(model, transformers.PreTrainedModel)
    assert model.config.vocab_size == V and model.device == torch.device("cpu") and model.dtype == torch.float64
    ids = torch.tensor([[0, *PROMPT, 1, 2], [*PROMPT, 3, 3, 3]])
    mask = torch.tensor([[0, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]])
    out = model(input_ids=ids, attention_mask=mask)
    assert torch.equal(out.logits, lm(ids, mask))
    assert torch.equal(model(input_ids=ids, attention_mask=mask, logits_to_keep=2).logits, out.logits[:, -2:])
    with pytest.raises(NotImplementedError, match="cache-free"):
        model(input_ids=ids, past_key_values=object())


def test_table_models_take_the_config():
    config = {"vocab_size": V, "depth": D, "prompt": [1, 2], "generated": [0]}
    draft, target = table_models(Recorder(), Recorder(), config)
    assert (draft.table, target.table, draft.prompt, target.depth) == ("draft", "target", (1, 2, 0), D)
    assert table_models(Recorder(), Recorder(), {"vocab_size": V, "depth": D})[0].prompt == (0,)


# ---- end to end: a library-style loop written against the models, certified exactly ----


class ModelChainLoop:
    """Speculative sampling on a chain, as a library writes it against models: draft L
    tokens with the draft model (one forward over the whole sequence per token, no cache),
    verify them with one target forward, standard rejection sampling over ``torch.rand``."""

    follows_uniforms = False
    transformers = False  # the models as transformers PreTrainedModels
    late_target_rows = False  # the planted bug: each token verified against the row after it

    def supports(self, config):
        filters = ("draft_top_k", "target_top_k", "target_top_p", "target_min_p")
        return config["K"] == 1 and config["temperature"] > 0 and all(config[f] is None for f in filters)

    def forward(self, model, ids):
        return model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits if self.transformers else model(ids)

    def draft_laws(self, draft, ids, P, L, qs, temperature):
        return qs  # the laws the tokens were drawn from, as they were drawn

    def cycle(self, draft_logits, target_logits, config, temperature):
        prompt = [0, 0]  # the root is its last position
        draft, target = table_models(draft_logits, target_logits, config, prompt, transformers=self.transformers)
        V, L = config["vocab_size"], min(config["depth"], config["budget"])
        ids = torch.tensor([prompt])
        P = ids.shape[1]
        coins = torch.rand(L, dtype=torch.float64)  # one fixed schedule
        drafts, qs = [], []
        for _ in range(L):
            q = torch.softmax(self.forward(draft, ids)[0, -1] / temperature, -1)
            u = torch.rand(1, dtype=torch.float64)
            x = int(torch.searchsorted(torch.cumsum(q, 0), u).clamp(max=V - 1))
            drafts.append(x)
            qs.append(q)
            ids = torch.cat([ids, torch.tensor([[x]])], dim=1)
        qs = self.draft_laws(draft, ids, P, L, qs, temperature)
        logits = self.forward(target, ids)[0]  # [P + L, V]: rows P - 1 .. P - 1 + L are the chain's
        late = int(self.late_target_rows)
        ps = torch.softmax(logits[[min(P - 1 + i + late, P - 1 + L) for i in range(L + 1)]] / temperature, -1)
        last = torch.rand(1, dtype=torch.float64)  # drawn whatever happens
        for i, x in enumerate(drafts):
            if bool(coins[i] * qs[i][x] <= ps[i][x]):
                continue
            r = torch.clamp(ps[i] - qs[i], min=0)
            return drafts[:i] + [int(torch.searchsorted(torch.cumsum(r / r.sum(), 0), last).clamp(max=V - 1))]
        return drafts + [int(torch.searchsorted(torch.cumsum(ps[L], 0), last).clamp(max=V - 1))]


class WholeChainDraftLoop(ModelChainLoop):
    """The same loop through the transformers wrappers, re-reading the draft laws from one
    draft forward over the whole chain: its last row is asked one step past the draft
    table (the depth convention's row), and not used."""

    transformers = True

    def __init__(self):
        transformers_classes()  # transformers imported here, not inside a traced cycle

    def draft_laws(self, draft, ids, P, L, qs, temperature):
        rows = self.forward(draft, ids)[0, P - 1 :]  # [L + 1, V]
        return list(torch.softmax(rows / temperature, -1)[:L])


class LateTargetRows(ModelChainLoop):
    late_target_rows = True


def certify(obj):
    impl = Implementation(obj, type(obj).__name__)
    return check_exact(impl, supported_cases(impl, "exact", "smoke").cases)


@pytest.mark.parametrize("loop", [ModelChainLoop, WholeChainDraftLoop])
def test_a_loop_written_against_the_models_is_certified_lossless(loop):
    if loop.transformers:
        pytest.importorskip("transformers")
    outcome = certify(loop())
    assert outcome.verdict == "pass" and outcome.detail.startswith("lossless (exact) on 8 cases"), outcome.detail


def test_a_planted_off_by_one_target_row_is_not():
    outcome = certify(LateTargetRows())
    assert outcome.verdict == "fail" and outcome.detail.startswith("not lossless (exact)"), outcome.detail
