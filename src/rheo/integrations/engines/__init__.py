"""Engine drivers: the per-engine code that builds tiny real models, starts an engine's own
speculative generation on them and collects the tokens it serves (docs/engines.md).

What is proven about those tokens lives in ``rheo.checks.engines``; a driver only runs the
engine and answers, for one ``EngineCase``:

- ``generate(case, seeds)``: one generation of ``case.n_tokens`` tokens per seed, through
  the engine's speculative path (many requests at once where the engine batches);
- ``reference_law(case)``: the engine's own law of those tokens *without* speculation,
  from sequential forwards of the same model through the engine's own sampler settings;
- optionally ``traceable`` (its draws can be enumerated by ``rheo.checks.exact.tracer``:
  ``generate(case, [None])`` draws without reseeding) and ``verified_rows(case, seeds)``
  (every logits row the verifier consumed, beside the same row from a teacher-forced
  forward of the accepted prefix).

- ``base``: ``EngineCase`` and the ``Row`` of the differential forward check;
- ``hf``: transformers' ``generate`` (assisted generation, prompt lookup, universal assisted
  decoding), in the default suite;
- ``hf_bugs``: planted engine bugs, applied to transformers' own code by patches (never a
  fork), each a context manager.
"""
