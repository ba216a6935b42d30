"""The statistics room: evidence at sampling scale, each test on counts (never
frequencies) at a stated false-positive rate with the smallest TV it detects.
``goodness_of_fit`` (Pearson chi-square, tail bins merged and said so, detectable TV, and
its inverse ``cycles_for_tv``); ``output_law`` (an implementation's continued outputs
against p_T: losslessness); ``prefix_law`` (the same beyond exact reach: the first token
and the next token at frequent prefixes, on large cases); ``sizing`` (cycles per case:
fixed, by ``--tv`` or by ``--time-budget``); ``cycle_law`` (its cycle law against the
reference's, for ``implements_spec``); ``sampling`` (the fastpath's cycle law);
``batched`` (the batched torch protocol and its checks, needs torch); ``real_model``
(losslessness on SmolLM2, needs the hf extra). The room may import
``rheo.checks.protocol``, ``rheo.checks.cases``, ``rheo.checks.outcome``,
``rheo.checks.parallel``, ``rheo.casefile``, ``rheo.reference``, ``rheo.fastpath``,
``rheo.testing`` and ``rheo.integrations``.
"""
