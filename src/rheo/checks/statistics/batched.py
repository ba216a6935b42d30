"""The batched torch protocol: whole batches of cycles on tensors, for the statistical checks
at engine scale (docs/gate.md, "The batched protocol").

An implementation may provide one or both of these, next to or instead of the
per-request ``build_tree`` / ``verify`` (rheo.checks.protocol):

``build_tree_batch(draft_logits, params, temperature, randomness) -> DraftTree``
    draft_logits: ``DraftQuery -> [b, n, V]`` logits (``rheo.fastpath.DraftQuery``: the
                  token paths ``prefixes [b, n, L]`` of the nodes to expand, -1 padded)
    params:       ``rheo.fastpath.Params`` (float64; the case's configuration)
    temperature:  [b] float64 tensor
    randomness:   ``rheo.fastpath.Uniforms`` (docs/spec.md §7, as tensors) when it follows
                  the uniforms, else a seeded ``torch.Generator`` (``follows_uniforms = False``)
    returns:      a ``rheo.fastpath.DraftTree`` (the fastpath's tree tensors; the engine
                  formats convert to and from it: rheo.integrations.tree_formats)

``verify_batch(tree, target_logits, params, temperature, randomness) -> result``
    tree:          a ``DraftTree`` (its own, or the fastpath's when it builds none)
    target_logits: [b, R+1, V]: row 0 the root, row i+1 node i (untempered, unfiltered)
    result:        ``rheo.fastpath.VerifyResult`` or a dict with ``tokens`` [b, D+1]
                   (accepted tokens then the bonus/correction token, -1 padded) and
                   ``lengths`` [b] (1..D+1), integer tensors

The tensors live on the implementation's ``device`` attribute (default: CUDA when torch
sees it, else the CPU). A part it does not provide is the fastpath's (which equals the
reference decision by decision). The checks:

- ``check_output_law_batched``: the per-request output-law check at batch scale: on
  each case of ``output_law_cases``, ``cycles`` cycles (1,000,000 in the quick profile),
  each output continued to D+1 by exact sampling from the judged target law, against
  p_T(Seq) (chi-square, Bonferroni over the cases, the detectable TV per case).
- ``check_large_vocabulary``: V = 32,000, draft_top_k = 128, depth 6: the first token's
  law is p_T, and the second token's given each frequent first token is p_T(. | first).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch

from rheo.checks import parallel
from rheo.checks.outcome import Outcome
from rheo.checks.protocol.inputs import law_instance
from rheo.checks.protocol.load import Implementation, implementation_of, message_of, shipped
from rheo.checks.protocol.outputs import BadOutput
from rheo.checks.protocol.watch import watched
from rheo.checks.statistics.goodness_of_fit import gof
from rheo.checks.statistics.output_law import STATISTICAL_MIN_CASES, check_output_law, gof_json, metered_shards
from rheo.checks.statistics.sampling import _continue, table_law
from rheo.fastpath import DraftTree, FastConfig, Params, Uniforms, VerifyResult, build_tree, verify
from rheo.progress import Meter
from rheo.reference.instance import Instance
from rheo.testing import HashTableModel, ReferenceTableModel

BATCH = 20_000  # cycles per call in the output-law check (a [b, R+1, V] float64 tensor per call)
LARGE_VOCAB = 32_000
LARGE_CFG = FastConfig(K=4, depth=6, budget=16, m=1, beam=1, draft_top_k=128)
LARGE_BATCH = 128  # [b, R+1, V] float32 target logits per call: 278 MB at V = 32,000
LARGE_SECOND = 3  # second-token tests: given each of this many most frequent first tokens


def device_of(impl: Implementation) -> torch.device:
    dev = getattr(impl.obj, "device", None)
    if dev is None:
        dev = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(dev)


def _int_tensor(value: Any, name: str, shape: tuple[int, ...]) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise BadOutput(f"{name} must be a torch tensor, got {type(value).__name__}")
    if value.dtype.is_floating_point or value.dtype.is_complex or value.dtype == torch.bool:
        raise BadOutput(f"{name} must hold integers; got {value.dtype}")
    if tuple(value.shape) != shape:
        raise BadOutput(f"{name} has shape {list(value.shape)}, expected {list(shape)}")
    return value.to(torch.int64)


def read_result_batch(res: Any, b: int, D: int, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(tokens [b, D+1], lengths [b]) of a ``verify_batch`` answer, checked: integer tensors
    of those shapes, lengths in 1..D+1, the tokens before each length in the vocabulary."""
    if isinstance(res, VerifyResult):
        tokens, lengths = res.tokens, res.lengths
    elif isinstance(res, dict) and "tokens" in res and "lengths" in res:
        tokens, lengths = res["tokens"], res["lengths"]
    else:
        raise BadOutput(f"expected a VerifyResult or a dict with tokens and lengths, got {type(res).__name__}")
    tokens = _int_tensor(tokens, "tokens", (b, D + 1))
    lengths = _int_tensor(lengths, "lengths", (b,))
    bad = (lengths < 1) | (lengths > D + 1)
    if bool(bad.any()):
        i = int(bad.nonzero()[0, 0])
        raise BadOutput(f"lengths: request {i} has length {int(lengths[i])}, outside 1..depth + 1 = {D + 1}")
    inside = torch.arange(D + 1, device=tokens.device)[None, :] < lengths[:, None]
    out = inside & ((tokens < 0) | (tokens >= n))
    if bool(out.any()):
        i, j = (int(x) for x in out.nonzero()[0])
        raise BadOutput(f"tokens: request {i} emits {int(tokens[i, j])} at position {j}, outside 0..{n - 1}")
    return tokens, lengths


def _tree(impl: Implementation, inst: Instance | None, draft, params: Params, T, u: Uniforms, g) -> DraftTree:
    if getattr(impl.obj, "build_tree_batch", None) is None:
        return build_tree(draft, params, T, u)
    rand = u if impl.follows_uniforms else g
    try:
        tree = watched("build_tree_batch", inst, impl.obj.build_tree_batch, draft, params, T, rand)
    except NotImplementedError:
        raise
    except Exception as e:
        raise BadOutput(f"build_tree_batch raised {type(e).__name__}: {message_of(e)}") from None
    if not isinstance(tree, DraftTree):
        raise BadOutput(f"build_tree_batch must return a rheo.fastpath.DraftTree, got {type(tree).__name__}")
    if tree.tokens.dim() != 2 or tree.tokens.shape[0] != T.shape[0]:
        raise BadOutput(f"build_tree_batch: tree.tokens has shape {list(tree.tokens.shape)}, expected [b, R]")
    return tree


def _verify(impl: Implementation, inst: Instance | None, tree, logits, params: Params, T, u: Uniforms, g, n: int):
    b, D = T.shape[0], params.depth
    if getattr(impl.obj, "verify_batch", None) is None:
        res: Any = verify(tree, logits, T, params, u)
    else:
        rand = u if impl.follows_uniforms else g
        try:
            res = watched("verify_batch", inst, impl.obj.verify_batch, tree, logits, params, T, rand)
        except NotImplementedError:
            raise
        except Exception as e:
            raise BadOutput(f"verify_batch raised {type(e).__name__}: {message_of(e)}") from None
    try:
        return read_result_batch(res, b, D, n)
    except BadOutput as e:
        raise BadOutput(f"verify_batch returned a malformed answer: {e}") from None


@contextmanager
def cpu_threads(device: torch.device, threads: int = 1) -> Iterator[None]:
    """On the CPU, torch's intra-op threads set to ``threads`` while the block runs: on a
    shared 2-core machine two threads that wait for each other run 10-40 times slower when
    another process holds a core, one thread never does (rheo bench gate measures both)."""
    if device.type != "cpu":
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def output_counts(
    impl: Implementation,
    inst: Instance,
    cycles: int,
    seed: int,
    batch: int = BATCH,
    progress: Callable[[str], object] | None = None,
    label: str = "",
) -> Counter:
    """Counts of the implementation's cycle outputs (token tuples) over ``cycles`` cycles
    of ``inst`` in batches: one seeded ``torch.Generator`` gives the uniforms (or is handed
    to an implementation with its own randomness)."""
    dev = device_of(impl)
    params = inst.config.in_arithmetic("float64")
    model = ReferenceTableModel(inst, min(batch, cycles), dtype=torch.float64, device=dev)
    g = torch.Generator(device=dev).manual_seed(seed)
    counts: Counter = Counter()
    with cpu_threads(dev):
        _run_batches(impl, inst, model, params, cycles, batch, g, counts, progress, label)
    return counts


def _run_batches(impl, inst, model, params, cycles, batch, g, counts, progress, label) -> None:
    dev = model.device
    done = 0
    meter = Meter(label, cycles, progress, unit="cycles") if progress is not None else None
    while done < cycles:
        b = min(batch, cycles - done)
        model.batch = b
        T = torch.full((b,), inst.config.temperature.value, dtype=torch.float64, device=dev)
        u = Uniforms.random(b, params.K, params.B, params.depth, g, device=dev)
        tree = _tree(impl, inst, model.draft_logits, params, T, u, g)
        tokens, lengths = _verify(impl, inst, tree, model.target_logits(tree), params, T, u, g, inst.n)
        _count_outputs(counts, tokens, lengths)
        done += b
        parallel.tick(b)
        if meter is not None:
            meter.update(done)
    if meter is not None:
        meter.close()


def output_shard(ref: Implementation | str, case: dict, cycles: int, seed: int, batch: int = BATCH) -> Counter:
    """One shard of the batched output-law check (a piece of work: rheo.checks.parallel)."""
    return output_counts(implementation_of(ref), law_instance(case), cycles, seed, batch)


def _count_outputs(counts: Counter, tokens: torch.Tensor, lengths: torch.Tensor) -> None:
    """Add each output (the first ``lengths[i]`` tokens of row i) to ``counts``."""
    padded = tokens.clone()
    cols = torch.arange(tokens.shape[1], device=tokens.device)[None, :]
    padded[cols >= lengths[:, None]] = -1
    uniq, cnt = torch.unique(padded.cpu(), dim=0, return_counts=True)
    for row, c in zip(uniq.tolist(), cnt.tolist()):
        counts[tuple(t for t in row if t >= 0)] += c


def continued_counts(outputs: Counter, judged: Instance, rng: np.random.Generator) -> Counter:
    """The outputs continued to length D+1 by exact sampling from ``judged.target_law``:
    the c copies of an output o become a multinomial draw of c over its continuations,
    with probabilities p_T(rest | o) (the same law as continuing each copy in turn)."""
    L, n = judged.seq_len, judged.n
    out: Counter = Counter()
    for o, c in outputs.items():
        if len(o) >= L or any(not 0 <= t < n for t in o):
            out[o] += c
            continue
        rests: list[tuple[tuple, float]] = [((), 1.0)]
        for _ in range(L - len(o)):
            nxt = []
            for rest, pr in rests:
                law = judged.target_law(o + rest)
                nxt += [(rest + (x,), pr * float(law[x])) for x in range(n) if law[x] > 0]
            rests = nxt
        probs = np.array([pr for _, pr in rests], dtype=np.float64)
        for (rest, _), k in zip(rests, rng.multinomial(c, probs / probs.sum())):
            if k:
                out[o + rest] += int(k)
    return out


def check_output_law_batched(
    impl: Implementation,
    cycles: int,
    family_alpha: float = 1e-6,
    seed: int = 0,
    level: str = "quick",
    extra_cases: list[dict] | tuple = (),
    progress: Callable[[str], object] | None = None,
    min_cases: int = STATISTICAL_MIN_CASES,
    batch: int = BATCH,
) -> Outcome:
    """Losslessness in law at batch scale (docs/spec.md §5): the per-request output-law
    check (``harness.check_output_law``), its counts from the batched protocol
    (``batched_counts``)."""

    def counted(impl, name, case, judged, cycles, seed, case_index, progress) -> Counter:
        return batched_counts(impl, case, judged, cycles, seed, case_index, batch, progress, name)

    return check_output_law(
        impl,
        cycles,
        family_alpha,
        seed,
        level,
        extra_cases,
        progress,
        min_cases,
        counted=counted,
        check="output law, batched",
        data_extra={"device": str(device_of(impl))},
    )


def batched_counts(
    impl: Implementation,
    case: dict,
    judged: Instance,
    cycles: int,
    seed: int,
    case_index: int,
    batch: int = BATCH,
    progress: Callable[[str], object] | None = None,
    name: str = "",
) -> Counter:
    """One case's outputs through the batched protocol, in shards of
    ``parallel.SHARD_CYCLES_BATCHED`` cycles with their own seeds (``output_shard``),
    continued to D+1 (``continued_counts``)."""
    calls = [
        (shipped(impl), case, n, parallel.shard_seed(seed, case_index, k), batch)
        for k, n in enumerate(parallel.shards(cycles, parallel.SHARD_CYCLES_BATCHED))
    ]
    outputs = metered_shards(output_shard, calls, f"output law, batched, {name}", progress)
    return continued_counts(outputs, judged, np.random.default_rng([seed, case_index]))


def first_two_counts(
    impl: Implementation, model: HashTableModel, params: Params, temperature: float, cycles: int, seed: int
) -> tuple[Counter, Counter]:
    """Cycles of a shared-context table model through the batched protocol: counts of the
    first emitted token, and of (first, second), an output of length 1 continued by one
    target sample (``rheo.checks.statistics.sampling.sample_first_two``, for any implementation)."""
    dev = model.device
    g = torch.Generator(device=dev).manual_seed(seed)
    first: Counter = Counter()
    pairs: Counter = Counter()
    done = 0
    while done < cycles:
        b = min(LARGE_BATCH, cycles - done)
        if model.batch != b:
            model.batch, model.context = b, model.context[:1].expand(b).clone()
        T = torch.full((b,), float(temperature), dtype=torch.float64, device=dev)
        u = Uniforms.random(b, params.K, params.B, params.depth, g, device=dev)
        tree = _tree(impl, None, model.draft_logits, params, T, u, g)
        tokens, lengths = _verify(impl, None, tree, model.target_logits(tree), params, T, u, g, model.vocab_size)
        toks, _ = _continue(model, params, T, tokens, lengths, 2, g)
        uniq, cnt = torch.unique(toks.cpu(), dim=0, return_counts=True)
        for row, c in zip(uniq.tolist(), cnt.tolist()):
            pairs[tuple(row)] += c
        done += b
    for (t1, _), c in pairs.items():
        first[t1] += c
    return first, pairs


def check_large_vocabulary(
    impl: Implementation, cycles: int, family_alpha: float = 1e-6, seed: int = 0, progress=None
) -> Outcome:
    """V = 32,000, draft_top_k = 128, K = 4, depth 6, budget 16, T = 1 (a hashed table
    model): the first token against p_T, the second given each of the most frequent first
    tokens against p_T(. | first); alpha split over those tests."""
    config = {**LARGE_CFG.to_protocol(LARGE_VOCAB), "temperature": 1.0}
    if not impl.supports(config):
        return Outcome("skip", "the implementation does not support the large-vocabulary case (supports is False)")
    dev = device_of(impl)
    model = HashTableModel(
        LARGE_VOCAB,
        LARGE_BATCH,
        seed=3,
        rows=64,
        scale=8.0,
        draft_noise=1.0,
        shared_context=True,
        device=dev,
    )
    alpha = family_alpha / (1 + LARGE_SECOND)
    t0 = time.perf_counter()
    try:
        with cpu_threads(dev):
            first, pairs = first_two_counts(impl, model, LARGE_CFG, 1.0, cycles, seed)
    except NotImplementedError:
        return Outcome("skip", "the implementation raised NotImplementedError on the large-vocabulary case")
    except BadOutput as e:
        return Outcome("fail", f"the implementation broke the protocol on the large-vocabulary case: {e}")
    seconds = time.perf_counter() - t0
    tests = [("first token", gof(first, table_law(model, (), LARGE_CFG, 1.0), alpha))]
    for x, _ in first.most_common(LARGE_SECOND):
        second = {t2: c for (t1, t2), c in pairs.items() if t1 == x}
        tests.append((f"second token | first = {x}", gof(second, table_law(model, (x,), LARGE_CFG, 1.0), alpha)))
    bad = [(what, r) for what, r in tests if r.reject]
    lines = [f"{what}: {'NOT p_T' if r.reject else 'p_T'} ({r.describe()})" for what, r in tests]
    data = {
        "cycles": cycles,
        "seconds": seconds,
        "device": str(dev),
        "tests": {what: gof_json(r) for what, r in tests},
    }
    head = (
        f"V={LARGE_VOCAB}, draft_top_k 128, K=4, depth 6, budget 16, T=1: {cycles} cycles in {seconds:.1f} s on {dev}"
    )
    if bad:
        what, r = bad[0]
        saved = {"check": "large vocabulary", "implementation": impl.name, "test": what, "result": r.describe()}
        return Outcome("fail", f"not lossless: {what} is off p_T ({head}): " + "; ".join(lines), saved, data)
    return Outcome("pass", f"lossless as far as these tests show ({head}): " + "; ".join(lines), data=data)
