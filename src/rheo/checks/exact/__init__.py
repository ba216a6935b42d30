"""The exact room: exact certification of an implementation, its output law computed by
enumerating every random choice it makes, against the target law (docs/spec.md §5;
docs/gate.md, "Exact certification"). ``tracer`` intercepts torch, NumPy and Python
``random`` and hands out symbolic random values (``random_values``,
``random_values_torch``; ``cuts`` finds where a comparison with one changes its answer);
``handed`` bisects handed uniforms; ``certify`` certifies one case; ``certificate`` holds
what it found; ``check`` is the gate's check (cases, then a shrinking search). The room
may import ``rheo.checks.protocol``, ``rheo.checks.cases``, ``rheo.checks.outcome``,
``rheo.checks.parallel`` and ``rheo.reference``.

How it works, part by part (one cycle is the tree builder, then the verifier; the
reference fills in a part the implementation does not provide):

- **Handed uniforms** (an implementation that follows docs/spec.md §7): its output is a
  step function of each uniform. The uniforms are resolved one at a time, in schedule
  order: the cells of one uniform (the intervals on which the output stays the same, later
  uniforms held fixed) are found by bisection, each weighted by its length.
- **Its own draws** (``follows_uniforms = False``): ``tracer`` intercepts torch, NumPy and
  Python ``random`` and enumerates every answer. By default (``method="fast"``) in one pass:
  the random functions patched once per part, every run ending in a leaf (a choice past its
  script takes its first option and leaves the others for later runs), each split's cut
  memoised for the runs that replay it and, for a plain uniform against a threshold,
  confirmed beside the threshold instead of bisected. ``method="replay"`` is the first way
  (one run per node of the randomness tree, each patched on its own), kept to compare with:
  the same law.

Two laws come out: the *ideal* one (every drawn uniform continuous: the verdict) and the
*backend* one (every drawn uniform on its generator's grid, k / 2^24 for a float32
``torch.rand``, reported beside it: there an inclusive ``u <= 0`` accepts a token of
probability 0 with probability 2^-24).

The law of the output O, continued by exact target sampling to length D+1, is compared with
p_T on V^(D+1) (``rheo.reference.certify.max_deviation``), against the implementation's
own ``sampler_law`` when it has one. The implementation's float thresholds make the law a
float: the tolerance follows the lowest precision that met a random value in the run, found
by ``precision`` (carried through torch calls and Python floats read from tensors; noted
where a value meets a random one): 1e-9 float64, 1e-6 float32, 1e-2 16-bit, with where it
came from (``Certificate.tolerance_from``); ``exact_tolerance`` on the implementation
overrides it. ``budget`` bounds each case (its deadline, the run cap: "outgrown") and says
how far a long one got.

It never guesses: random leaves are replayed with every choice answered at random and the
global seeds of random, NumPy and torch scrambled (``PROBES`` per part), and handed-uniform
cells are checked at random points. Any disagreement, a law that does not sum to 1, or a use
of randomness the tracer cannot follow makes the certificate ``unsupported`` with a
one-line reason, and the gate relies on the statistical check instead.
"""

from __future__ import annotations

from rheo.checks.exact.certificate import Certificate
from rheo.checks.exact.certify import certify_implementation
from rheo.checks.exact.check import check_exact, replay_exact

__all__ = ["Certificate", "certify_implementation", "check_exact", "replay_exact"]
