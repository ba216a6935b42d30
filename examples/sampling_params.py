"""Sampling parameters under speculation (docs/spec.md §9), written from the specification's
text alone: the loop implementation (``examples.loop_impl``) whose verifier applies the
request's parameters itself to the raw target logits, at every position with that
position's own history; five subclasses with one defect each that serving engines have
shipped; and one lossless departure (a biased draft). All follow the handed uniforms.

    rheo gate --impl examples.sampling_params:SamplingParamsVerifier --profile smoke   # passes
    rheo gate --impl examples.sampling_params:StalePenaltyState --only "exact certification"   # exits 1

The logit processing (``process_logits``) is numpy float64 and imports nothing from
``rheo``: it is an independent reading of §9, not a call into the reference, so that the
gate compares two implementations of the text. At the position after the path ``pi`` (the
tokens accepted since the cycle root) the history is h = prompt + generated + pi and the
output o = generated + pi; the steps are §9's, in its order: allowed tokens, bad words,
no-repeat n-grams, min_tokens (masks), then logit and sequence bias, repetition penalty,
frequency and presence penalties; then temperature and the target filters of §0.

Lossless:

- ``SamplingParamsVerifier``: every verified node, the bonus token and the correction token
  read the processed law along the node's own path.

Lossless, yet not docs/spec.md's algorithm:

- ``DraftOnlyLogitBias``: the logit bias applied to the draft's law as well (the target's is
  right): another draft, and losslessness holds for any draft.

Lossy (each declares only the parameters its defect needs, so that its cases are drawn from
that part of the space):

- ``StalePenaltyState``: the penalty state of the cycle's start is reused at every position.
- ``ProcessedOnlyAtTheEnd``: the parameters reach the bonus and correction token, not the
  acceptance tests.
- ``DraftSideLogitBias``: the logit bias reaches the draft and the bonus token, not the
  target's verified positions.
- ``BadWordsOnAcceptedPrefix``: a bad word is matched only when it starts in the accepted
  prefix, so a word that starts at a draft position of the cycle is missed.
- ``MinTokensAtTheRootOnly``: min_tokens masks the end of sequence only at the cycle root.

Their docstrings name the engine defect each one models.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import numpy as np

from examples.loop_impl import SAMPLE, LoopImplementation, inverse_cdf
from rheo.reference.sampling import PARAMETERS  # the names only: the processing below is this file's own


def ends_with(seq: Sequence[int], suffix: Sequence[int]) -> bool:
    """Whether ``seq`` ends with ``suffix`` (an empty suffix: always)."""
    k = len(suffix)
    return k == 0 or (len(seq) >= k and list(seq[len(seq) - k :]) == list(suffix))


def bad_word_bans(words, scope: Sequence[int], starts_before: int | None = None) -> set[int]:
    """The last tokens of the bad words that apply after ``scope`` (docs/spec.md §9, step 2):
    a one-token word always; a longer word w when ``scope`` ends with w[:-1]. With
    ``starts_before``, a match counts only when it starts at an index of ``scope`` below it
    (``BadWordsOnAcceptedPrefix``'s defect)."""
    banned = set()
    for w in words:
        w = [int(t) for t in w]
        if len(w) == 1:
            banned.add(w[0])
        elif ends_with(scope, w[:-1]) and (starts_before is None or len(scope) - (len(w) - 1) < starts_before):
            banned.add(w[-1])
    return banned


def ngram_bans(h: Sequence[int], n: int) -> set[int]:
    """Step 3: the tokens t such that h[-(n-1):] + [t] occurs as n consecutive tokens of h."""
    if n == 1:
        return set(int(t) for t in h)
    if len(h) < n - 1:
        return set()
    tail = list(h[len(h) - (n - 1) :])
    return {int(h[i + n - 1]) for i in range(len(h) - n + 1) if list(h[i : i + n - 1]) == tail}


def mask(logits: np.ndarray, tokens) -> None:
    for t in tokens:
        if 0 <= t < len(logits):
            logits[t] = -np.inf


def eos_ids(config: dict) -> list[int]:
    eos = config.get("eos_token_id")
    if eos is None:
        return []
    return [int(eos)] if isinstance(eos, (int, np.integer)) else [int(t) for t in eos]


def process_logits(
    logits: np.ndarray,
    config: dict,
    path: Sequence[int],
    steps: Sequence[int] = (1, 2, 3, 4, 5, 6, 7),
    penalty_path: Sequence[int] | None = None,
) -> np.ndarray:
    """Steps 1-7 of docs/spec.md §9 on a raw logits row, at the position after ``path`` (the
    tokens since the cycle root): a new float64 array. ``steps`` picks the steps applied
    (all by default); ``penalty_path`` is the path the penalties of steps 6-7 read (the
    position's own by default). Absent parameters are off."""
    prompt = [int(t) for t in config.get("prompt") or []]
    generated = [int(t) for t in config.get("generated") or []]
    path = [int(t) for t in path]
    h, o = prompt + generated + path, generated + path
    out = np.array(logits, dtype=np.float64)
    V = len(out)
    if 1 in steps and config.get("allowed_token_ids") is not None:
        allowed = np.zeros(V, dtype=bool)
        allowed[[int(t) for t in config["allowed_token_ids"] if 0 <= int(t) < V]] = True
        out[~allowed] = -np.inf
    if 2 in steps and config.get("bad_words"):
        scope = o if config.get("bad_words_scope", "prompt_and_generated") == "generated" else h
        mask(out, bad_word_bans(config["bad_words"], scope))
    if 3 in steps and config.get("no_repeat_ngram_size") is not None:
        mask(out, ngram_bans(h, int(config["no_repeat_ngram_size"])))
    if 4 in steps and config.get("min_tokens") is not None and len(o) < int(config["min_tokens"]):
        mask(out, eos_ids(config))
    if 5 in steps:
        for t, b in (config.get("logit_bias") or {}).items():
            if 0 <= int(t) < V:
                out[int(t)] += float(b)
        for s, b in (config.get("sequence_bias") or {}).items():
            s = [int(t) for t in s]
            if 0 <= s[-1] < V and ends_with(h, s[:-1]):
                out[s[-1]] += float(b)
    ph = h if penalty_path is None else prompt + generated + [int(t) for t in penalty_path]
    po = o if penalty_path is None else generated + [int(t) for t in penalty_path]
    if 6 in steps and config.get("repetition_penalty") is not None:
        r = float(config["repetition_penalty"])
        seen = sorted({t for t in ph if 0 <= t < V})
        vals = out[seen]
        if config.get("repetition_penalty_form", "sign") == "divide":
            out[seen] = vals / r
        else:
            out[seen] = np.where(vals > 0, vals / r, vals * r)
    f, p = config.get("frequency_penalty"), config.get("presence_penalty")
    if 7 in steps and (f is not None or p is not None):
        counts = np.bincount([t for t in po if 0 <= t < V], minlength=V).astype(np.float64)
        out -= float(f or 0.0) * counts + float(p or 0.0) * (counts > 0)
    return out


class SamplingParamsVerifier(LoopImplementation):
    """The loop implementation with docs/spec.md §9's sampling parameters: the tree builder
    is the loop's (the draft side is untouched), the verifier applies the parameters to each
    raw target row with the history of that row's node (prompt + generated + the accepted
    path to it), then temperature and the target filters. Every parameter, both bad-word
    scopes and both repetition-penalty forms."""

    sampling_parameters: Collection[str] = PARAMETERS
    follows_uniforms = True

    # ---- the target law at the position after ``path``, by its use ----
    def law(self, logits: np.ndarray, config: dict, temperature: float, path: Sequence[int]) -> np.ndarray:
        """The processed target law after ``path``: steps 1-7, then temperature and filters."""
        return self.target_law(process_logits(logits, config, path), config, temperature)

    def test_law(self, logits: np.ndarray, config: dict, temperature: float, path: Sequence[int]) -> np.ndarray:
        """The law the acceptance tests at a verified node read."""
        return self.law(logits, config, temperature, path)

    def leaf_law(self, logits: np.ndarray, config: dict, temperature: float, path: Sequence[int]) -> np.ndarray:
        """The law the bonus token after a leaf is drawn from."""
        return self.law(logits, config, temperature, path)

    def correction_law(
        self, logits: np.ndarray, config: dict, temperature: float, path: Sequence[int]
    ) -> np.ndarray | None:
        """The law the correction token's residual starts from at a verified node; None: the
        acceptance tests' own (its residual is what they leave)."""
        return None

    def verify(self, tree: dict, target_logits, config: dict, temperature: float, uniforms: dict) -> dict:
        tokens, parents, kinds, slots = (np.asarray(tree[k]) for k in ("tokens", "parents", "kinds", "slots"))
        sample_probs = np.asarray(tree["sample_probs"])
        rows = np.asarray(target_logits, dtype=np.float64)
        children: dict = {}
        for i in sorted(range(len(tokens)), key=lambda i: slots[i]):
            children.setdefault(int(parents[i]), []).append(i)
        node, d = -1, 0
        out: list[int] = []
        accepted: list[int] = []
        path: list[int] = []
        while True:
            row = rows[node + 1]
            kids = children.get(node, [])
            if not kids:  # a bonus token after a leaf
                w = self.leaf_law(row, config, temperature, path)
                out.append(inverse_cdf(list(range(len(w))), w, float(uniforms["u_final"][d])))
                return {"tokens": out, "accepted": accepted}
            w = self.test_law(row, config, temperature, path)
            c = self.correction_law(row, config, temperature, path)  # kept beside w when it differs
            moved = None
            sample = [i for i in kids if kinds[i] == SAMPLE and config["policy"] == "rheo"]
            if sample:
                i = sample[0]
                y, r = int(tokens[i]), sample_probs[i]
                if self.coin_uniform(uniforms, d, 0, True) < min(1.0, w[y] / r[y]):
                    moved = i
                else:
                    w = residual(w, r)
                    c = None if c is None else residual(c, r)
            j = 0
            for i in kids:
                if moved is not None:
                    break
                if i in sample:
                    continue
                x = int(tokens[i])
                if self.coin_uniform(uniforms, d, j, False) < w[x]:
                    moved = i
                    break
                j += 1
                w = without(w, x)
                c = None if c is None else without(c, x)
                if w.sum() <= 0:
                    break
            if moved is None:  # the correction token, in token-id order
                law = c if c is not None and c.sum() > 0 else w
                out.append(inverse_cdf(list(range(len(law))), law, float(uniforms["u_final"][d])))
                return {"tokens": out, "accepted": accepted}
            out.append(int(tokens[moved]))
            accepted.append(moved)
            path.append(int(tokens[moved]))
            node, d = moved, d + 1


def residual(w: np.ndarray, r: np.ndarray) -> np.ndarray:
    """norm(max(w - r, 0)) after a rejected sample (an all-zero law stays zero)."""
    w = np.maximum(w - r, 0.0)
    s = w.sum()
    return w / s if s > 0 else w


def without(w: np.ndarray, x: int) -> np.ndarray:
    """w with token x removed, renormalized, after a rejected deterministic child."""
    w = w.copy()
    w[x] = 0.0
    s = w.sum()
    return w / s if s > 0 else w


class StalePenaltyState(SamplingParamsVerifier):
    """The penalty state of the cycle's start reused for every position of the cycle: the
    repetition, frequency and presence penalties read h = prompt + generated (and o =
    generated) at every depth, so a draft accepted earlier in the cycle is not penalised at
    the positions after it. This models vLLM #18902, fixed by PR #19482 ("Logit processors
    for rejection sampler"), which combines the request's output tokens with the cycle's
    speculative tokens before applying the penalties at each draft position."""

    sampling_parameters = {"repetition_penalty", "frequency_penalty", "presence_penalty"}

    def law(self, logits: np.ndarray, config: dict, temperature: float, path: Sequence[int]) -> np.ndarray:
        return self.target_law(process_logits(logits, config, path, penalty_path=()), config, temperature)


class ProcessedOnlyAtTheEnd(SamplingParamsVerifier):
    """The parameters applied to the bonus and the correction token but not to the verified
    positions: the acceptance tests read the unprocessed law (the raw logits, tempered and
    filtered), while the bonus token is drawn from the processed law and the correction
    token from the processed law's residual (the same rejected drafts removed). A draft the
    parameters forbid can then be accepted. This models vLLM PR #10198's defect: the
    sampler applied the request's logits processing to the token it sampled itself, and the
    rejection sampler compared the drafts with target probabilities computed without it."""

    sampling_parameters = {"logit_bias", "allowed_token_ids", "repetition_penalty"}

    def test_law(self, logits: np.ndarray, config: dict, temperature: float, path: Sequence[int]) -> np.ndarray:
        return self.target_law(np.asarray(logits, dtype=np.float64), config, temperature)

    def correction_law(
        self, logits: np.ndarray, config: dict, temperature: float, path: Sequence[int]
    ) -> np.ndarray | None:
        return self.law(logits, config, temperature, path)


class DraftOnlyLogitBias(SamplingParamsVerifier):
    """The logit bias applied to the draft's law too (before draft_top_k and the softmax),
    the target side right: lossless, since losslessness holds for any draft law (Theorem 1,
    docs/spec.md §5, asks nothing of it) when the verifier is handed the residual law each
    sample was drawn from, which the tree's ``sample_probs`` is. Only the trees, and how
    often drafts are accepted, change. (``presence_penalty`` is declared too, so that more
    than one case with the bias is drawn.)"""

    sampling_parameters = {"logit_bias", "presence_penalty"}

    def draft_law(self, logits: np.ndarray, config: dict) -> np.ndarray:
        return super().draft_law(process_logits(logits, config, (), steps=(5,)), config)


class DraftSideLogitBias(DraftOnlyLogitBias):
    """A logit bias applied to the draft and the bonus token, not to the target's verified
    positions.

    The plainer defect, "a logit bias applied to the draft's law and not to the target's",
    is *lossless* in this algorithm and so cannot be planted (``DraftOnlyLogitBias``, which
    exact certification passes): losslessness holds for any draft law, as long as the
    verifier is handed the law each sample was really drawn from, which the tree's
    ``sample_probs`` is. A biased draft only changes which tokens are proposed and
    how often they are accepted. What is lossy is the target side: here the tree is
    drafted from the biased law (``DraftOnlyLogitBias.draft_law``), the bonus
    token after a leaf is drawn from the fully processed law, but the acceptance tests and
    the correction token at a verified position read the law without the bias (the other
    parameters still applied). This models SGLang #10617: with EAGLE the logit bias did not
    reach every token (the verify step ignored it; fixed by SGLang PR #11555)."""

    sampling_parameters = {"logit_bias"}

    def test_law(self, logits: np.ndarray, config: dict, temperature: float, path: Sequence[int]) -> np.ndarray:
        unbiased = {**config, "logit_bias": None}
        return self.target_law(process_logits(logits, unbiased, path), config, temperature)


class BadWordsOnAcceptedPrefix(SamplingParamsVerifier):
    """Bad words checked against the accepted prefix (prompt + generated) but not across a
    draft position: a word of two or more tokens is matched only when its first token lies
    before the cycle's root, so a word whose first token is a draft position of the same
    cycle is missed and its last token is not banned after it. One-token words, and words
    that start in the accepted prefix and run into the draft, are still banned. This models
    the per-draft-position bad-words handling of TensorRT-LLM PRs #17955/#17701 (one-model
    speculative decoding), the bad-words counterpart of vLLM PR #19482.

    Like vLLM's ``bad_words`` (matched against the request's output tokens) it implements
    the "generated" scope only: ``supports`` refuses "prompt_and_generated". It declares
    ``presence_penalty`` beside ``bad_words``: with one declared parameter the supported
    space holds a single case with it (a T = 0 Top-K tree), on which the defect does not
    change the law."""

    sampling_parameters = {"bad_words", "presence_penalty"}

    def supports(self, config: dict) -> bool:
        return config.get("bad_words_scope") != "prompt_and_generated"

    def law(self, logits: np.ndarray, config: dict, temperature: float, path: Sequence[int]) -> np.ndarray:
        out = process_logits(logits, config, path, steps=(1, 3, 4, 5, 6, 7))
        if config.get("bad_words"):
            prompt, generated = list(config.get("prompt") or []), list(config.get("generated") or [])
            whole = config.get("bad_words_scope", "prompt_and_generated") != "generated"
            scope = (prompt if whole else []) + generated + list(path)
            mask(out, bad_word_bans(config["bad_words"], scope, starts_before=len(scope) - len(path)))
        return self.target_law(out, config, temperature)


class MinTokensAtTheRootOnly(SamplingParamsVerifier):
    """min_tokens ignored at drafted positions: the end-of-sequence ids are masked at the
    cycle's root while len(generated) < min_tokens, but not at depth d >= 1, where the
    output is generated + path and EOS must stay masked while len(generated) + d <
    min_tokens. An EOS can then be accepted (or emitted as the bonus token) before the
    request's minimum length. This models the min-tokens handling at draft positions of
    TensorRT-LLM PRs #17955/#17701, the min_tokens counterpart of vLLM PR #19482.

    It declares ``presence_penalty`` beside ``min_tokens``: with one declared parameter the
    supported space holds a single case with it (a T = 0 Top-K tree), on which the defect
    does not change the law."""

    sampling_parameters = {"min_tokens", "presence_penalty"}

    def law(self, logits: np.ndarray, config: dict, temperature: float, path: Sequence[int]) -> np.ndarray:
        steps = (1, 2, 3, 4, 5, 6, 7) if not path else (1, 2, 3, 5, 6, 7)
        return self.target_law(process_logits(logits, config, path, steps=steps), config, temperature)
