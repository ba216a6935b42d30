"""The statistical tests' family: one false-positive budget split over every case that
asserts "no difference" (Bonferroni), and the CI sample sizes.

The family's cases (tests/test_fastpath_statistical.py):
- cycle law = reference, 4 instances x 2 devices (the CUDA ones run on a GPU machine) = 8
- calibration, quiet on the correct fastpath                                        = 1
- continued law = p_T on the corrected corpus cases                                  = 2
- V = 32000: the first token, and the second given each of 3 first tokens            = 4
"""
FAMILY_ALPHA = 1e-6
FAMILY_CASES = 15
CASE_ALPHA = FAMILY_ALPHA / FAMILY_CASES
CI_CYCLES = 200_000  # cycles per small-vocabulary case
LARGE_CYCLES = 100_000  # cycles of the V = 32000 test (10x under the deep marker)
