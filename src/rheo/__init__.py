"""rheosampling: the exact reference, the lossless-verification gate and a batched torch
fastpath for RheoSampling (the specification is docs/spec.md).

One room per concern:

- ``rheo.reference``    the exact engine (docs/spec.md §0-§7); ``rheo.reference.params`` is
                        the one parameter type, ``Params``, and the paper's preset ``PAPER_TREE``
- ``rheo.fastpath``     the same algorithm in batched PyTorch (needs ``rheosampling[torch]``)
- ``rheo.casefile``     case files (docs/spec.md §8)
- ``rheo.checks``       the gate's evidence, in rooms: ``cases``, ``protocol`` (the ``--impl``
                        protocol), ``exact``, ``differential``, ``statistics``, ``engines``
                        (engines end to end), ``gate`` (its checks, reports, worker jobs and
                        the pytest plugin)
- ``rheo.bench``        benchmarks (each returns a dict)
- ``rheo.testing``      table models and planted bugs for tests, yours included
- ``rheo.integrations`` real models and engines (SmolLM2-135M with an EAGLE-style head,
                        EAGLE's and SGLang's tree formats, transformers' assisted generation,
                        engine drivers for rheo gate --engine)
- ``rheo.cli``          the ``rheo`` command
"""

__version__ = "0.2.0"
