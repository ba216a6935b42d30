"""Converters between tree formats (rheo.integrations.tree_formats): the gate's protocol
tree, the fastpath's DraftTree, EAGLE's and SGLang's tensors.

- Round trips (Hypothesis): random valid protocol trees (any node order) and DraftTrees
  built by the fastpath on a table model go to each engine format and back as the same
  tree: the same arrays when the carried fields travel along, the same token paths, parents
  and sibling order (slots as ranks, kinds lead) when only the engine's own tensors do.
- The engine tensors obey their format's rules, checked here from the tree itself, not
  from the converters: one path per leaf in lexicographic order, the candidates along them,
  the ancestor mask, depths as positions, the sibling links in slot order.
- A hand-checked tree of five nodes (and a one-node second request) in every format, its
  tensors written down from the formats' rules.
- Malformed input: a ValueError that names the field.
- The engine-format adapter (examples/engine_format_adapter.py) passes the gate's smoke
  profile in process, and draws exactly what examples/eagle_style.py draws on the same
  seeds: the round trip changes no decision.
"""

from __future__ import annotations

import doctest
import random
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rheo.checks.cases import space

torch = pytest.importorskip("torch")

from rheo.casefile import load_case  # noqa: E402
from rheo.checks.cases.composition import composition_cases  # noqa: E402
from rheo.checks.gate.checklist import impl_checks  # noqa: E402
from rheo.checks.gate.run import run_checks  # noqa: E402
from rheo.checks.outcome import PROFILES  # noqa: E402
from rheo.checks.protocol.inputs import protocol_config, reference_tree, target_logits  # noqa: E402
from rheo.checks.protocol.load import Implementation  # noqa: E402
from rheo.fastpath import FastConfig, Uniforms, build_tree  # noqa: E402
from rheo.integrations import tree_formats  # noqa: E402
from rheo.integrations.tree_formats import (  # noqa: E402
    EagleTree,
    SGLangTree,
    draft_tree_to_eagle,
    draft_tree_to_protocol,
    draft_tree_to_sglang,
    eagle_result_to_protocol,
    eagle_to_draft_tree,
    eagle_to_protocol,
    gather_paths,
    protocol_rows,
    protocol_to_draft_tree,
    protocol_to_eagle,
    protocol_to_sglang,
    sglang_result_to_protocol,
    sglang_to_draft_tree,
    sglang_to_protocol,
)
from rheo.reference import UniformChooser  # noqa: E402
from rheo.reference import Uniforms as ReferenceUniforms  # noqa: E402
from rheo.reference.generate import hashed_case  # noqa: E402
from rheo.reference.tree import build_tree as reference_build_tree  # noqa: E402
from rheo.testing import HashTableModel  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from examples.eagle_style import EagleVerifier  # noqa: E402
from examples.engine_format_adapter import EagleFormatAdapter  # noqa: E402

TREE_FIELDS = ("tokens", "parents", "kinds", "slots")
DRAFT_TREE_FIELDS = (
    "tokens",
    "parents",
    "depth",
    "slots",
    "kinds",
    "valid",
    "num_nodes",
    "attention_mask",
    "position_ids",
    "children",
    "prefixes",
    "retrieve_indices",
)


# ---- strategies ----


@st.composite
def protocol_trees(draw, max_nodes: int = 12, samples: bool | None = None, V: int | None = None):
    """A valid protocol tree: R nodes (R >= 1) under K slots per parent and a depth cap,
    siblings with distinct slots and distinct tokens (V >= K), any kinds, and (``samples``
    True, or drawn when None) sample_probs [R, V] with a law on each sample row; node order
    shuffled, so that a child may come before its parent."""
    K = draw(st.integers(1, 4 if V is None else min(4, V)), label="K")
    max_depth = draw(st.integers(1, 4), label="depth")
    V = draw(st.integers(K, 10), label="V") if V is None else V
    R = draw(st.integers(1, max_nodes), label="R")
    parents, slots, tokens, kinds, depth = [], [], [], [], []
    free = {-1: list(range(K))}
    for _ in range(R):
        open_parents = [p for p, s in free.items() if s and (p == -1 or depth[p] < max_depth)]
        if not open_parents:
            break
        p = draw(st.sampled_from(open_parents))
        slot = draw(st.sampled_from(free[p]))
        free[p].remove(slot)
        used = {tokens[i] for i in range(len(tokens)) if parents[i] == p}
        tokens.append(draw(st.sampled_from([t for t in range(V) if t not in used])))
        parents.append(p)
        slots.append(slot)
        kinds.append(draw(st.integers(0, 2)))
        depth.append(1 if p == -1 else depth[p] + 1)
        free[len(tokens) - 1] = list(range(K))
    n = len(tokens)
    perm = draw(st.permutations(range(n)))  # new index of old node i: perm[i]
    tree = {
        "tokens": np.zeros(n, dtype=np.int64),
        "parents": np.zeros(n, dtype=np.int64),
        "kinds": np.zeros(n, dtype=np.int64),
        "slots": np.zeros(n, dtype=np.int64),
    }
    for i in range(n):
        j = perm[i]
        tree["tokens"][j], tree["kinds"][j], tree["slots"][j] = tokens[i], kinds[i], slots[i]
        tree["parents"][j] = -1 if parents[i] == -1 else perm[parents[i]]
    if samples or (samples is None and draw(st.booleans())):
        probs = np.zeros((n, V))
        for j in range(n):
            if tree["kinds"][j] == 1:
                w = np.array(draw(st.lists(st.integers(0, 5), min_size=V, max_size=V).filter(any)), dtype=np.float64)
                probs[j] = w / w.sum()
        tree["sample_probs"] = probs
    return tree


@st.composite
def fastpath_trees(draw):
    """(DraftTree, Params, V) from the fastpath's build_tree on a HashTableModel: random K,
    m, depth, budget, beam, draft top-k, temperatures and seeds (float64)."""
    K = draw(st.integers(1, 4), label="K")
    m = draw(st.integers(0, K - 1), label="m")
    depth = draw(st.integers(1, 3), label="depth")
    beam = draw(st.integers(1, K), label="beam")
    budget = draw(st.integers(1, K * (1 + beam * (depth - 1))), label="budget")
    V = draw(st.integers(K + 1, 24), label="V")
    draft_top_k = draw(st.one_of(st.none(), st.integers(K, V)), label="draft_top_k")
    b = draw(st.integers(1, 4), label="batch")
    seed = draw(st.integers(0, 2**16), label="seed")
    cfg = FastConfig(K=K, m=m, depth=depth, budget=budget, beam=beam, draft_top_k=draft_top_k)
    zero = draw(st.sampled_from([0.0, 0.3]), label="zero_fraction")
    model = HashTableModel(V, b, seed=seed, dtype=torch.float64, zero_fraction=zero)
    T = torch.tensor(draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 1.5]), min_size=b, max_size=b)), dtype=torch.float64)
    u = Uniforms.random(b, cfg.K, cfg.B, cfg.depth, torch.Generator().manual_seed(seed))
    return build_tree(model.draft_logits, cfg, T, u), cfg, V


# ---- reading trees independently of the converters ----


def token_path(tree: dict, i: int) -> tuple[int, ...]:
    path = []
    while i != -1:
        path.append(int(tree["tokens"][i]))
        i = int(tree["parents"][i])
    return tuple(reversed(path))


def node_set(tree: dict, with_slots_and_kinds: bool = True) -> set:
    """Each node as (token path, slot path, kind), or its token path alone."""
    out = set()
    for i in range(len(tree["tokens"])):
        slots, j = [], i
        while j != -1:
            slots.append(int(tree["slots"][j]))
            j = int(tree["parents"][j])
        out.add(
            (token_path(tree, i), tuple(reversed(slots)), int(tree["kinds"][i]))
            if with_slots_and_kinds
            else token_path(tree, i)
        )
    return out


def children_in_slot_order(tree: dict) -> dict[tuple, list[int]]:
    """Token path of a parent (() = the root) -> its children's tokens by slot."""
    kids: dict[tuple, list[tuple[int, int]]] = {}
    for i in range(len(tree["tokens"])):
        p = int(tree["parents"][i])
        kids.setdefault(token_path(tree, p) if p >= 0 else (), []).append(
            (int(tree["slots"][i]), int(tree["tokens"][i]))
        )
    return {k: [t for _, t in sorted(v)] for k, v in kids.items()}


def assert_same_arrays(a: dict, b: dict) -> None:
    for name in TREE_FIELDS:
        assert np.array_equal(np.asarray(a[name]), np.asarray(b[name])), name
    assert ("sample_probs" in a) == ("sample_probs" in b)
    if "sample_probs" in a:
        assert np.array_equal(a["sample_probs"], b["sample_probs"])


def stripped_eagle(e: EagleTree) -> EagleTree:
    return EagleTree(e.draft_tokens, e.tree_mask, e.tree_position_ids, e.retrieve_indices, e.candidates)


def stripped_sglang(s: SGLangTree) -> SGLangTree:
    return SGLangTree(
        s.draft_tokens, s.positions, s.tree_mask, s.retrive_index, s.retrive_next_token, s.retrive_next_sibling
    )


def check_engine_only_round_trip(tree: dict, back: dict) -> None:
    """Without the carried fields: the same token paths and shape, siblings in the same
    order (their slots now ranks), every kind a lead, sample laws dropped."""
    assert node_set(back, False) == node_set(tree, False)
    assert children_in_slot_order(back) == children_in_slot_order(tree)
    for kids in children_in_slot_order_slots(back).values():
        assert kids == list(range(len(kids)))
    assert set(np.asarray(back["kinds"]).tolist()) <= {0} and "sample_probs" not in back


def children_in_slot_order_slots(tree: dict) -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for i in range(len(tree["tokens"])):
        kids.setdefault(int(tree["parents"][i]), []).append(int(tree["slots"][i]))
    return {p: sorted(v) for p, v in kids.items()}


def check_eagle_rules(tree: dict, e: EagleTree, root: int) -> None:
    """EAGLE's format, read from the tree: the root first; each node's mask row is the root,
    its ancestors and itself; positions are depths; one path per leaf, rows sorted
    lexicographically, W = the deepest depth + 1, candidates the tokens along them; the
    children of a node, in the order the rows meet them, are its children by slot."""
    tokens = e.draft_tokens[0].tolist()
    N = len(tree["tokens"])
    assert e.draft_tokens.shape == (1, N + 1) and tokens[0] == root
    rows = e.retrieve_indices.tolist()
    assert rows == sorted(rows, key=lambda r: [x if x >= 0 else N + 5 for x in r])  # EAGLE's sort
    leaves = {
        p for p in node_set(tree, False) if not any(q[: len(p)] == p and len(q) > len(p) for q in node_set(tree, False))
    }
    paths = [tuple(tokens[x] for x in row[1:] if x >= 0) for row in rows]
    assert sorted(paths) == sorted(leaves) and len(paths) == len(leaves)
    assert e.retrieve_indices.shape[1] == max(len(p) for p in leaves) + 1
    assert e.candidates.tolist() == [[tokens[x] if x >= 0 else -1 for x in row] for row in rows]
    parent = {}
    for row in rows:
        row = [x for x in row if x >= 0]
        for a, c in zip(row, row[1:]):
            parent[c] = a
    mask = e.tree_mask[0, 0].tolist()
    for j in range(N + 1):
        anc, k = {0, j}, j
        while k in parent:
            k = parent[k]
            anc.add(k)
        assert [c for c in range(N + 1) if mask[j][c] == 1] == sorted(anc)
        assert int(e.tree_position_ids[j]) == (len(anc) - 1 if j else 0)  # the depth
    met: dict[tuple, list[int]] = {}
    for row in rows:
        row = [x for x in row if x >= 0]
        for d in range(1, len(row)):
            key = tuple(tokens[x] for x in row[1:d])
            if tokens[row[d]] not in met.setdefault(key, []):
                met[key].append(tokens[row[d]])
    assert met == children_in_slot_order(tree)


def check_sglang_rules(trees: list[dict], s: SGLangTree, roots: list[int], seq_lens: list[int]) -> None:
    """SGLang's format, read from the trees: each block starts with the root token at
    position seq_len; walking retrive_next_token then retrive_next_sibling reaches every
    node once, children by slot, each at position seq_len + depth; retrive_index b*n + i."""
    n = s.num_draft_tokens
    tokens = s.draft_tokens.reshape(len(trees), n).tolist()
    pos = s.positions.reshape(len(trees), n).tolist()
    assert s.retrive_index.tolist() == [[b * n + i for i in range(n)] for b in range(len(trees))]
    for b, tree in enumerate(trees):
        assert tokens[b][0] == roots[b] and pos[b][0] == seq_lens[b]
        met: dict[tuple, list[int]] = {}
        seen = []
        stack: list[tuple[int, tuple]] = [(0, ())]  # (entry, its token path)
        while stack:
            v, path = stack.pop()
            c = int(s.retrive_next_token[b, v])
            while c != -1:
                seen.append(c)
                met.setdefault(path, []).append(tokens[b][c])
                assert pos[b][c] == seq_lens[b] + len(path) + 1
                stack.append((c, path + (tokens[b][c],)))
                c = int(s.retrive_next_sibling[b, c])
        assert sorted(seen) == list(range(1, len(tree["tokens"]) + 1))
        assert met == children_in_slot_order(tree)


# ---- round trips ----


@given(protocol_trees(), st.integers(0, 50))
def test_protocol_to_eagle_and_back_is_the_same_tree(tree, root):
    e = protocol_to_eagle(tree, root)
    check_eagle_rules(tree, e, root)
    assert_same_arrays(eagle_to_protocol(e), tree)
    assert node_set(eagle_to_protocol(e)) == node_set(tree)
    check_engine_only_round_trip(tree, eagle_to_protocol(stripped_eagle(e)))


@given(st.data())
def test_protocol_to_sglang_and_back_is_the_same_batch(data):
    V = data.draw(st.integers(1, 10), label="V")  # one vocabulary for the batch
    trees = data.draw(st.lists(protocol_trees(samples=True, V=V), min_size=1, max_size=4), label="trees")
    b = len(trees)
    roots = data.draw(st.lists(st.integers(0, 99), min_size=b, max_size=b))
    seq_lens = data.draw(st.lists(st.integers(0, 20), min_size=b, max_size=b))
    extra = data.draw(st.integers(0, 3))
    n = max(len(t["tokens"]) for t in trees) + 1 + extra
    s = protocol_to_sglang(trees, roots, seq_lens, num_draft_tokens=n)
    check_sglang_rules(trees, s, roots, seq_lens)
    for got, tree in zip(sglang_to_protocol(s), trees):
        assert_same_arrays(got, tree)
    for got, tree in zip(sglang_to_protocol(stripped_sglang(s)), trees):
        check_engine_only_round_trip(tree, got)


@given(fastpath_trees(), st.data())
def test_draft_tree_to_each_engine_format_and_back_is_the_same_tree(built, data):
    tree, cfg, V = built
    b = tree.tokens.shape[0]
    roots = data.draw(st.lists(st.integers(0, V - 1), min_size=b, max_size=b))
    eagles = [draft_tree_to_eagle(tree, i, roots[i], vocab_size=V) for i in range(b)]
    for i, e in enumerate(eagles):
        check_eagle_rules(draft_tree_to_protocol(tree, i), e, roots[i])
    s = draft_tree_to_sglang(tree, roots, vocab_size=V)
    check_sglang_rules([draft_tree_to_protocol(tree, i) for i in range(b)], s, roots, [0] * b)
    for back in (
        eagle_to_draft_tree(eagles, K=cfg.K, depth=cfg.depth, budget=cfg.budget),
        sglang_to_draft_tree(s, K=cfg.K, depth=cfg.depth, budget=cfg.budget),
    ):
        for name in DRAFT_TREE_FIELDS:
            assert torch.equal(getattr(back, name), getattr(tree, name)), name
        for i in range(b):
            assert back.request(i) == tree.request(i)
            assert np.array_equal(
                draft_tree_to_protocol(back, i, V)["sample_probs"], draft_tree_to_protocol(tree, i, V)["sample_probs"]
            )
    for i in range(b):  # the engine's own tensors alone: the same token paths, siblings in order
        tree_i = draft_tree_to_protocol(tree, i)
        check_engine_only_round_trip(tree_i, eagle_to_protocol(stripped_eagle(eagles[i])))
        check_engine_only_round_trip(tree_i, sglang_to_protocol(stripped_sglang(s))[i])


@given(protocol_trees(samples=True))
def test_protocol_to_draft_tree_and_back_is_the_same_tree(tree):
    dt = protocol_to_draft_tree([tree])
    back = draft_tree_to_protocol(dt, 0, vocab_size=tree["sample_probs"].shape[1])
    assert node_set(back) == node_set(tree)
    by_path = {token_path(back, i): back["sample_probs"][i] for i in range(len(back["tokens"]))}
    for i in range(len(tree["tokens"])):
        if tree["kinds"][i] == 1:
            assert np.array_equal(by_path[token_path(tree, i)], tree["sample_probs"][i])
    assert all(int(p) < i for i, p in enumerate(back["parents"]))  # the DraftTree's parents come first


def test_the_module_docstring_examples_run():
    assert doctest.testmod(tree_formats).failed == 0


# ---- a hand-checked tree ----

# Five nodes, given in a shuffled order: A (token 7, slot 0, lead) and B (4, slot 2, fill)
# under the root; C (2, slot 0, lead) and D (9, slot 1, sample) under A; G (3, slot 0, lead)
# under C. Protocol indices: D 0, B 1, A 2, G 3, C 4.
HAND = {
    "tokens": np.array([9, 4, 7, 3, 2]),
    "parents": np.array([2, -1, -1, 4, 2]),
    "kinds": np.array([1, 2, 0, 0, 0]),
    "slots": np.array([1, 2, 0, 0, 0]),
}
ONE_NODE = {"tokens": np.array([8]), "parents": np.array([-1]), "kinds": np.array([0]), "slots": np.array([0])}


def test_hand_checked_tree_in_eagle_format():
    """Engine order by depth, then slot path: A 1, B 2, C 3, D 4, G 5. Leaves B, D, G; their
    index paths sorted: [0,1,3,5], [0,1,4,-1], [0,2,-1,-1]."""
    e = protocol_to_eagle(HAND, root_token=11)
    assert e.draft_tokens.tolist() == [[11, 7, 4, 2, 9, 3]]
    assert e.tree_position_ids.tolist() == [0, 1, 1, 2, 2, 3]
    assert e.tree_mask.tolist() == [
        [
            [
                [1, 0, 0, 0, 0, 0],
                [1, 1, 0, 0, 0, 0],
                [1, 0, 1, 0, 0, 0],
                [1, 1, 0, 1, 0, 0],
                [1, 1, 0, 0, 1, 0],
                [1, 1, 0, 1, 0, 1],
            ]
        ]
    ]
    assert e.retrieve_indices.tolist() == [[0, 1, 3, 5], [0, 1, 4, -1], [0, 2, -1, -1]]
    assert e.candidates.tolist() == [[11, 7, 2, 3], [11, 7, 9, -1], [11, 4, -1, -1]]
    assert e.node_ids.tolist() == [-1, 2, 1, 4, 0, 3]
    assert e.slots.tolist() == [-1, 0, 2, 0, 1, 0] and e.kinds.tolist() == [-1, 0, 2, 0, 1, 0]
    assert protocol_rows(e).tolist() == [0, 3, 2, 5, 1, 4]
    # accepted A then C (row 0, two tokens), then token 42: the protocol's nodes 2 and 4
    assert eagle_result_to_protocol(e, 0, 2, 42) == {"tokens": [7, 2, 42], "accepted": [2, 4]}
    logits = torch.arange(6, dtype=torch.float64).unsqueeze(1)  # row j holds j
    gathered = gather_paths(e, logits)[..., 0]
    assert gathered[0].tolist() == [0, 1, 3, 5] and gathered[2, :2].tolist() == [0, 2]
    assert torch.isnan(gathered[2, 2:]).all() and torch.isnan(gathered[1, 3])


def test_hand_checked_batch_in_sglang_format():
    """Request 0 is the tree above (root 11, 10 committed tokens); request 1 one node
    (root 12, 3 committed), padded to n = 6."""
    s = protocol_to_sglang([HAND, ONE_NODE], root_tokens=[11, 12], seq_lens=[10, 3])
    assert s.num_draft_tokens == 6
    assert s.draft_tokens.tolist() == [11, 7, 4, 2, 9, 3, 12, 8, 0, 0, 0, 0]
    assert s.positions.tolist() == [10, 11, 11, 12, 12, 13, 3, 4, 3, 3, 3, 3]
    assert s.retrive_index.tolist() == [[0, 1, 2, 3, 4, 5], [6, 7, 8, 9, 10, 11]]
    assert s.retrive_next_token.tolist() == [[1, 3, -1, 5, -1, -1], [1, -1, -1, -1, -1, -1]]
    assert s.retrive_next_sibling.tolist() == [[-1, 2, -1, 4, -1, -1], [-1, -1, -1, -1, -1, -1]]
    mask = s.tree_mask.reshape(2, 6, 6).to(torch.int64).tolist()
    assert mask[0] == [
        [1, 0, 0, 0, 0, 0],
        [1, 1, 0, 0, 0, 0],
        [1, 0, 1, 0, 0, 0],
        [1, 1, 0, 1, 0, 0],
        [1, 1, 0, 0, 1, 0],
        [1, 1, 0, 1, 0, 1],
    ]
    assert mask[1][:2] == [[1, 0, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0]] and mask[1][4] == [1, 0, 0, 0, 1, 0]
    assert s.node_ids.tolist() == [[-1, 2, 1, 4, 0, 3], [-1, 0, -1, -1, -1, -1]]
    assert protocol_rows(s).tolist() == [[0, 3, 2, 5, 1, 4], [0, 1, -1, -1, -1, -1]]
    # request 0 accepts A then C, then 42; request 1 accepts nothing and emits 13
    accept_index = torch.tensor([[0, 1, 3, -1], [6, -1, -1, -1]])
    predicts = torch.zeros(12, dtype=torch.int64)
    predicts[0], predicts[1], predicts[3], predicts[6] = 7, 2, 42, 13
    got = sglang_result_to_protocol(s, accept_index, torch.tensor([2, 0]), predicts)
    assert got == [{"tokens": [7, 2, 42], "accepted": [2, 4]}, {"tokens": [13], "accepted": []}]


def test_hand_checked_tree_as_a_draft_tree():
    """A child comes before its parent in HAND, so the DraftTree takes the engine order
    (A 0, B 1, C 2, D 3, G 4; root-included +1); K = 3 slots, depth 3, budget 6."""
    dt = protocol_to_draft_tree([{**HAND, "sample_probs": np.eye(10)[[9, 0, 0, 0, 0]]}], K=3, depth=3, budget=6)
    assert dt.tokens.tolist() == [[7, 4, 2, 9, 3, 0]] and dt.parents.tolist() == [[-1, -1, 0, 0, 2, -1]]
    assert dt.children[0].tolist() == [[1, -1, 2], [3, 4, -1], [-1, -1, -1], [5, -1, -1], [-1] * 3, [-1] * 3, [-1] * 3]
    assert dt.retrieve_indices[0].tolist() == [[0, 2, -1, -1], [0, 1, 4, -1], [0, 1, 3, 5]] + [[-1] * 4] * 3
    assert dt.prefixes[0, 5].tolist() == [7, 2, 3] and dt.position_ids[0].tolist() == [0, 1, 1, 2, 2, 3, 0]
    assert dt.sample_ids[0, 3, 0] == 9 and dt.sample_probs[0, 3, 0] == 1.0 and dt.num_nodes.tolist() == [5]


# ---- malformed input ----


def _with(tree: dict, **changes) -> dict:
    return {**tree, **{k: np.asarray(v) for k, v in changes.items()}}


def _eagle(**changes) -> EagleTree:
    e = protocol_to_eagle(HAND, 11)
    return EagleTree(**{**e.__dict__, **changes})


def _sglang(**changes) -> SGLangTree:
    s = protocol_to_sglang([HAND, ONE_NODE], [11, 12], [10, 3])
    return SGLangTree(**{**s.__dict__, **changes})


def _set(t: torch.Tensor, index, value) -> torch.Tensor:
    t = t.clone()
    t[index] = value
    return t


MALFORMED = {
    "missing slots": (lambda: protocol_to_eagle({k: v for k, v in HAND.items() if k != "slots"}, 0), "'slots'"),
    "lengths differ": (lambda: protocol_to_eagle(_with(HAND, kinds=[0, 0]), 0), "one length"),
    "float tokens": (lambda: protocol_to_eagle(_with(HAND, tokens=[1.0, 2, 3, 4, 5]), 0), "tree.tokens"),
    "parent out of range": (lambda: protocol_to_eagle(_with(HAND, parents=[2, -1, -1, 7, 2]), 0), "tree.parents"),
    "cycle": (lambda: protocol_to_eagle(_with(HAND, parents=[4, -1, 0, 4, 0]), 0), "cycle"),
    "kind 3": (lambda: protocol_to_eagle(_with(HAND, kinds=[3, 2, 0, 0, 0]), 0), "tree.kinds"),
    "shared slot": (lambda: protocol_to_eagle(_with(HAND, slots=[0, 2, 0, 0, 0]), 0), "tree.slots"),
    "shared token": (lambda: protocol_to_eagle(_with(HAND, tokens=[2, 4, 7, 3, 2]), 0), "tree.tokens"),
    "sample_probs shape": (lambda: protocol_to_eagle(_with(HAND, sample_probs=np.zeros((4, 10))), 0), "sample_probs"),
    "negative root": (lambda: protocol_to_eagle(HAND, -1), "root_token"),
    "eagle row not at root": (lambda: eagle_to_protocol(_eagle(retrieve_indices=torch.tensor([[1, 3, 5]]))), "row 0"),
    "eagle node on no path": (
        lambda: eagle_to_protocol(_eagle(retrieve_indices=torch.tensor([[0, 1, 3, 5], [0, 2, -1, -1]]))),
        "node 4 is on no path",
    ),
    "eagle two parents": (
        lambda: eagle_to_protocol(
            _eagle(retrieve_indices=torch.tensor([[0, 1, 3, 5], [0, 2, 4, -1], [0, 1, 4, -1]]), candidates=None)
        ),
        "one parent",
    ),
    "eagle row to an inner node": (
        lambda: eagle_to_protocol(
            _eagle(
                retrieve_indices=torch.tensor([[0, 1, 3, 5], [0, 1, 4, -1], [0, 1, -1, -1], [0, 2, -1, -1]]),
                candidates=None,
            )
        ),
        "has children",
    ),
    "eagle index after padding": (
        lambda: eagle_to_protocol(
            _eagle(retrieve_indices=torch.tensor([[0, 1, 3, 5], [0, 1, -1, 4], [0, 2, -1, -1]]), candidates=None)
        ),
        "after -1",
    ),
    "eagle mask": (
        lambda: eagle_to_protocol(_eagle(tree_mask=_set(_eagle().tree_mask, (0, 0, 5, 2), 1.0))),
        "tree_mask: row 5",
    ),
    "eagle positions": (
        lambda: eagle_to_protocol(_eagle(tree_position_ids=torch.tensor([0, 1, 1, 2, 2, 2]))),
        "tree_position_ids",
    ),
    "eagle candidates": (
        lambda: eagle_to_protocol(_eagle(candidates=_set(_eagle().candidates, (1, 2), 5))),
        "candidates",
    ),
    "eagle slots against path order": (
        lambda: eagle_to_protocol(_eagle(slots=torch.tensor([-1, 2, 0, 0, 1, 0]))),
        "slot order",
    ),
    "eagle node_ids": (lambda: eagle_to_protocol(_eagle(node_ids=torch.tensor([-1, 0, 0, 1, 2, 3]))), "node_ids"),
    "eagle draft_tokens batch": (
        lambda: eagle_to_protocol(_eagle(draft_tokens=torch.zeros((2, 6), dtype=torch.int64))),
        "draft_tokens",
    ),
    "eagle best_candidate": (lambda: eagle_result_to_protocol(_eagle(), 3, 0, 1), "best_candidate"),
    "eagle accept_length": (lambda: eagle_result_to_protocol(_eagle(), 2, 2, 1), "accept_length"),
    "sglang retrive_index": (
        lambda: sglang_to_protocol(_sglang(retrive_index=_set(_sglang().retrive_index, (1, 0), 0))),
        "retrive_index",
    ),
    "sglang cycle": (
        lambda: sglang_to_protocol(_sglang(retrive_next_sibling=_set(_sglang().retrive_next_sibling, (0, 2), 1))),
        "reached twice",
    ),
    "sglang gap": (
        lambda: sglang_to_protocol(
            _sglang(retrive_next_token=_set(_sglang().retrive_next_token, (1, 0), 2), tree_mask=None)
        ),
        "reached by no link",
    ),
    "sglang padding links": (
        lambda: sglang_to_protocol(_sglang(retrive_next_token=_set(_sglang().retrive_next_token, (1, 3), 4))),
        "padding entry 3",
    ),
    "sglang positions": (lambda: sglang_to_protocol(_sglang(positions=_set(_sglang().positions, 5, 12))), "positions"),
    "sglang mask": (
        lambda: sglang_to_protocol(_sglang(tree_mask=_set(_sglang().tree_mask, 5 * 6 + 2, True))),
        "tree_mask",
    ),
    "sglang root sibling": (
        lambda: sglang_to_protocol(_sglang(retrive_next_sibling=_set(_sglang().retrive_next_sibling, (0, 0), 2))),
        "root has sibling",
    ),
    "sglang accept path": (
        lambda: sglang_result_to_protocol(
            _sglang(), torch.tensor([[0, 2, 3], [6, -1, -1]]), torch.tensor([2, 0]), torch.zeros(12, dtype=torch.int64)
        ),
        "not a path",
    ),
    "sglang trees not a list": (lambda: protocol_to_sglang(HAND, 0), "list of protocol trees"),
    "sglang num_draft_tokens": (lambda: protocol_to_sglang([HAND], 0, num_draft_tokens=4), "num_draft_tokens"),
    "draft tree request": (lambda: draft_tree_to_protocol(protocol_to_draft_tree([ONE_NODE]), 1), "not a request"),
    "draft tree sample law": (lambda: protocol_to_draft_tree([HAND]), "without sample_probs"),
    "draft tree K": (lambda: protocol_to_draft_tree([ONE_NODE, HAND], K=2), "K = 2 is too small"),
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed_input_is_a_value_error_naming_the_field(name):
    call, needle = MALFORMED[name]
    with pytest.raises(ValueError, match=needle.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        call()


# ---- the engine-format adapter ----

SMALL_CASES = [
    hashed_case(4, 1, 2, policy="rheo", K=3, m=1, budget=5, temperature="1/2", target_top_p="9/10"),
    hashed_case(3, 2, 3, policy="topk", K=2, budget=5, beam=2, temperature="1"),
    hashed_case(5, 3, 2, policy="rheo", K=3, m=0, budget=4, temperature="0", target_top_k=2),
]


@pytest.mark.parametrize("case", SMALL_CASES, ids=["rheo-top-p", "topk-depth-3", "greedy-top-k"])
def test_adapter_draws_what_the_protocol_verifier_draws(case):
    """On the reference's trees and the same seeds, the adapter (protocol -> EAGLE format ->
    EAGLE's rule on paths -> protocol result) and examples/eagle_style.py (EAGLE's rule on the
    protocol tree, children by slot) return the same answer, cycle after cycle."""
    inst = load_case({**case, "arithmetic": "float64"})
    config, T = protocol_config(inst), inst.config.temperature.value
    rng = np.random.default_rng(0)
    c = inst.config
    for k in range(60):
        tree = reference_tree(
            inst, reference_build_tree(inst, UniformChooser(ReferenceUniforms.random(rng, c.K, c.B, c.depth)))
        )
        protocol = {name: tree[name] for name in ("tokens", "parents", "kinds", "slots", "sample_probs")}
        logits = target_logits(inst, tree["paths"])
        answers = []
        for impl in (EagleFormatAdapter(), EagleVerifier()):
            random.seed(k)
            torch.manual_seed(k)
            answers.append(impl.verify(protocol, logits, config, T, {}))
        assert answers[0] == answers[1], (k, answers)


def test_adapter_passes_the_smoke_gate(tmp_path):
    """Every check rheo gate --impl runs, in process, at the smoke profile's sizes (exact
    certification on the smoke matrix, the output law on its spread)."""
    impl = Implementation(EagleFormatAdapter(), "examples.engine_format_adapter:EagleFormatAdapter")
    results = run_checks(impl_checks(impl), PROFILES["smoke"], tmp_path)
    assert [r.name for r in results] == [
        "impl: exact certification (verifier)",
        "impl: output law (verifier)",
        "impl: output law, beyond exact reach (verifier)",
        "impl: real vocabulary sizes, exactly (verifier)",
        "impl: rows without a law (verifier)",
    ]
    assert all(r.verdict == "pass" for r in results), [r.detail for r in results]
    # it supports every configuration: the smoke matrix and the filter-composition cases
    drawn = len(space.select(lambda c: True, "exact", "smoke").cases) + len(composition_cases())
    assert results[0].detail.startswith(f"lossless (exact) on {drawn} cases"), results[0].detail
