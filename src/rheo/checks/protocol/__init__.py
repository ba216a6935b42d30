"""The protocol room: how the gate talks to an implementation it did not write
(``rheo gate --impl``). Loading it (``load``), every call watched (``watch``) and made
(``calls``; whole generations in ``generation``), what it is given (``inputs``), its
answers read strictly (``outputs``), the law it is judged against (``judged``: its
``sampler_law`` or docs/spec.md §0's), and the supervised worker process it runs in
(``worker``). The room may import ``rheo.reference``,
``rheo.casefile``, ``rheo.checks.outcome`` and ``rheo.checks.parallel``, nothing else of
ours: every check (``exact``, ``differential``, ``statistics``, ``gate``) builds on it.

The protocol, for implementers:

An implementation is any object (or a class constructible without arguments) with one or
both of these methods. Arrays are numpy (or anything ``numpy.asarray`` reads); ``V`` is
the vocabulary size, ``R`` the number of kept draft nodes, ``D`` the depth, ``K`` the slots.

``build_tree(draft_logits, config, temperature, u_draw) -> tree``   (docs/spec.md §1-§3)
    draft_logits: a function ``paths -> [len(paths), V]`` float64 array, the untruncated,
                  untempered draft logits (-inf = probability 0) at token paths from the
                  cycle root (the root is ``()``); call it with the nodes you expand
    config:       dict with the docs/spec.md §8 names: vocab_size, policy ("rheo" | "topk"), K, m,
                  depth, budget, beam, draft_top_k (None = no truncation), epsilon,
                  target_top_k, target_top_p, target_min_p (None = off), and temperature
                  (the same float as the argument; so that ``supports`` sees it too)
    temperature:  float >= 0 (0 = greedy)
    u_draw:       [1 + beam (D-1)] uniforms, u_draw[e] for the e-th expansion (docs/spec.md §7)
    tree:         dict (or object with these attributes), one entry per kept node:
                  tokens [R], parents [R] (-1 = the root, else an index into these arrays),
                  kinds [R] (0 lead, 1 sample, 2 fill), slots [R] (0..K-1, the slot in the
                  parent's pool), sample_probs [R, V] (the residual law r the sample was
                  drawn from, on sample rows; ignored elsewhere). Node order is free.

``verify(tree, target_logits, config, temperature, uniforms) -> result``   (docs/spec.md §0, §4)
    tree:          as above (the harness passes the reference's tree, nodes in order-key order)
    target_logits: [R+1, V] untempered, unfiltered target logits; row 0 the root, row i+1
                   node i (apply temperature and the config's filters yourself)
    uniforms:      dict: u_sample [D+1], u_det [D+1, K], u_final [D+1] (docs/spec.md §7)
    result:        dict: tokens (emitted: accepted tokens then the bonus/correction token)
                   and accepted (the accepted node indices, root to leaf)

Or, for an implementation that runs whole cycles with its own randomness (an engine's
``generate`` loop, where drafting and verification cannot be called apart):

``cycle(draft_logits, target_logits, config, temperature) -> tokens``
    draft_logits, target_logits: functions ``paths -> [len(paths), V]`` float64 arrays, the
                  untruncated, untempered logits at token paths from the cycle root
    tokens:       the emitted tokens (accepted drafts then the bonus/correction token),
                  1 to D+1 integer ids, as a sequence or a dict with "tokens"
    An implementation with ``cycle`` is judged on its cycles only: exact certification
    (its draws followed) and the output law; ``build_tree`` and ``verify`` are not called.

And, for an implementation that runs whole generations (many cycles, with state carried
from one to the next: a KV cache rolled back to the accepted prefix, an adaptive number of
draft tokens, the next cycle's root after a bonus or correction token), beside any of the
above or alone:

``generate(draft_logits, target_logits, config, temperature) -> tokens``
    draft_logits, target_logits: functions ``paths -> [len(paths), V]`` float64 arrays, the
                  untruncated, untempered logits at token paths from the START OF THE
                  GENERATION (its root is ``()``; a cycle's root is the path emitted so far).
                  Past ``n_tokens - 1`` tokens a path gets the law of its prefix of that
                  length (tokens after the n-th never count)
    config:       as above, plus ``n_tokens``: the new tokens to generate (docs/spec.md §8,
                  default depth + 1); depth, budget, K, ... describe each cycle's draft
    tokens:       exactly n_tokens integer ids (the first n_tokens the cycles emitted), as a
                  sequence or a dict with "tokens"
    An implementation with ``generate`` is judged on its generations too (the single-cycle
    checks stay as they are when it also has ``build_tree``, ``verify`` or ``cycle``): the
    law of the n tokens against the target's n-token law p_T, the product of the (judged)
    target law at each prefix: exactly (its draws followed, ``rheo.checks.exact.generation``)
    and statistically (``rheo.checks.statistics.generation_law``), on the generation cases
    (``rheo.checks.cases.generations``) and the user's ``--cases``.

Or, on tensors, batches of requests at once: ``build_tree_batch`` / ``verify_batch``, the
batched torch protocol (rheo.checks.statistics.batched, where it is documented).

Optional:
- ``supports(config) -> bool``: configurations it does not implement (config as above,
  temperature included) are not drawn, and counted. ``build_tree`` or ``verify`` raising
  ``NotImplementedError`` also counts the case as unsupported, not as a failure.
- ``follows_uniforms = False``: it draws its own randomness, so decision equality is not
  run (exact certification follows its draws, ``rheo.checks.exact``; the output law
  samples it).
- ``exact_tolerance``: overrides the float tolerance of exact certification, which the gate
  finds itself from the lowest precision that met a random value in the run (1e-9 float64,
  1e-6 float32; ``rheo.checks.exact.precision``).
- ``implements_spec = True``: it claims to implement docs/spec.md's algorithm itself, so
  its cycle law must equal the reference's; only then is the cycle-law check run (it is not
  listed otherwise: a lossless implementation of another algorithm has another cycle law).
- ``sampler_law(logits, config, temperature) -> probs``: logits [V] (a target row as given
  to ``verify``), probs [V]: the law its engine samples from when speculation is off (its
  own temperature and filters, e.g. ties kept at the k-th place). The output law is then
  judged against this law (``judged_instance``) instead of docs/spec.md §0's, and the gate
  reports where the two differ, without failing for it. probs must be finite,
  non-negative, of length V and sum to 1 within 1e-6.
  With a fourth parameter, ``sampler_law(logits, config, temperature, history)`` is given
  the position's history (prompt + generated + the path from the cycle root).
- ``sampling_parameters``: the sampling parameters it implements (docs/spec.md §9), names
  from ``rheo.reference.sampling.PARAMETERS``. Only then are cases with them drawn for it;
  their config has "prompt", "generated" and each parameter set (``Params.to_protocol``),
  and the target logits it gets are the case's raw logits, before the parameters.

Checks (``rheo.checks.differential.decision_equality.check_decisions``,
``rheo.checks.statistics.output_law.check_output_law``, ``...cycle_law.check_cycle_law``):
- decision equality (shows sameness, not losslessness): Hypothesis draws small cases from
  configurations the implementation supports (``supports`` is asked first) and uniforms;
  the implementation's tree (every node's token path, kind, slot path, and the sample's
  residual law within 1e-9) and its verifier's output and accepted path (on the reference's
  tree) must equal the reference's. Decisions within 1e-9 of a threshold are set aside and
  counted (``rheo.checks.differential.decisions``). A difference is shrunk to a minimal counterexample:
  "not the specified algorithm" (it may still be lossless). Fewer compared cases than the
  stated minimum fail ("nothing is proven").
- output law (losslessness, docs/spec.md §5): the implementation's cycles (fresh uniforms
  each cycle; the reference fills in a part it does not provide), each output continued by
  exact sampling from the judged target law to length D+1, against p_T(Seq) on V^(D+1)
  (Pearson chi-square on counts, alpha split over the cases, detectable TV per case:
  "lossless within detectable TV d"). Runs on every implementation.
- whole generations (``generate`` only): exact certification of every draw on small cases
  (n_tokens 3 to 5: runs multiply with cycles), then the law of n-token sequences by Pearson
  chi-square against p_T on V^n_tokens, as for the output law.
- cycle law (``implements_spec = True`` only): the empirical cycle law against the
  reference's exact law ("same cycle law as the reference within detectable TV d").
"""

from __future__ import annotations

from rheo.checks.protocol.calls import impl_cycle
from rheo.checks.protocol.load import Implementation, ImplLoadError, load_implementation
from rheo.checks.protocol.outputs import BadOutput

__all__ = ["BadOutput", "ImplLoadError", "Implementation", "impl_cycle", "load_implementation"]
