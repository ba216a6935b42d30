"""The checks: everything ``rheo gate`` proves, and how it proves it about code we did not
write. One room per concern; arrows run one way, down this list (``tests/test_imports.py``
keeps them):

- ``outcome`` (a leaf: what a check returns, the profiles that size the checks) and
  ``parallel`` (where independent pieces of work run: here, or as Ray tasks);
- ``cases``: the case matrix of ``--impl``, the user's ``--cases``, Hypothesis strategies
  and profiles, the negative controls and the saved corpus;
- ``protocol``: loading an implementation, calling it (watched), what it is given, its
  answers read strictly, the law it is judged against, the supervised worker;
- ``exact``: exact certification (the randomness tracer and the symbolic random values it
  hands out, handed uniforms bisected, the certificate);
- ``differential``: decision by decision against the reference on the same uniforms (an
  implementation's decision equality; the fastpath's);
- ``statistics``: goodness of fit with a stated power, the output law, the cycle law, the
  batched protocol's checks, the real model;
- ``gate``: the gate's check lists, running and reporting them, JUnit, the worker's jobs,
  the pytest plugin.

The modules ``harness``, ``exact_impl``, ``impl_cases``, ``corpus``, ``batched`` and
``pytest_plugin`` are thin re-exports of their rooms, kept for the import paths users
were shown before the rooms (CHANGELOG.md).
"""
