"""The cases room: what the checks are run on. ``matrix`` (the case matrix of ``rheo gate
--impl`` and the user's ``--cases DIR``), ``large`` (statistical cases beyond exact reach:
V up to 1,024, tables generated on demand), ``strategies`` (Hypothesis strategies that
build only valid exact-rational cases), ``profiles`` (the test suites' Hypothesis
profiles), ``corpus`` (the negative controls, the shrinking search and the saved corpus
under ``cases/``). The room may import ``rheo.reference`` and ``rheo.casefile`` only: it
knows nothing of implementations.
"""
