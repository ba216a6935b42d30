"""The statistical tests' family: one false-positive budget split over every case that
asserts "no difference" (Bonferroni), and the CI sample sizes.

The family's cases, counted from what tests/test_fastpath_statistical.py registers:
- cycle law = reference: every ``quiet_cases()`` instance on every device of ``DEVICES``
  (the CUDA ones run on a GPU machine);
- calibration: quiet on the correct fastpath (one case);
- continued law = p_T on the corrected corpus cases (``CORRECTED``);
- V = 32000: the first token, and the second given each of the ``LARGE_SECOND`` most
  frequent first tokens, once at the default suite's size and once at the ``extended``
  step's (both run in CI);
- the lossless without-replacement designs confirmed by sampling
  (tests/test_without_replacement.py, ``extended``): ``SAMPLED_DESIGNS`` cases.
"""

from rheo.checks.statistics.sampling import quiet_cases

from .devices import DEVICES

FAMILY_ALPHA = 1e-6
CORRECTED = (("paper-abc-constant-proxy", {"proxy": "rheo"}), ("control-sample_last", {"verify": "rheo"}))
LARGE_SECOND = 3
SAMPLED_DESIGNS = 5
FAMILY_CASES = len(quiet_cases()) * len(DEVICES) + 1 + len(CORRECTED) + 2 * (1 + LARGE_SECOND) + SAMPLED_DESIGNS
CASE_ALPHA = FAMILY_ALPHA / FAMILY_CASES
CI_CYCLES = 200_000  # cycles per small-vocabulary case
# cycles of the V = 32000 test: the default suite, the extended step CI runs after it (-m extended)
# and the deep marker
LARGE_CYCLES = {"default": 30_000, "extended": 100_000, "deep": 1_000_000}
