"""rheo.fastpath: the batched torch implementation (SPEC sections 1-4 and 7).

Not built yet: it lands with the fastpath issue, and will be tested decision by decision
against ``rheo.reference.simulate_cycle``. Nothing is exported until then.
"""
