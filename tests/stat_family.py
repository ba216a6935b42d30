"""The statistical tests' family: one false-positive budget split over every case that
asserts "no difference" (Bonferroni), and the CI sample sizes.

Cases: 4 cycle-law cases x the devices that run (CPU in CI) + 1 calibration "quiet" case
+ the large-vocabulary tests (first token, and the second token given each of the 3 most
frequent first tokens) = at most 2 x 4 + 1 + 4 = 13 cases.
"""
FAMILY_ALPHA = 1e-6
FAMILY_CASES = 13
CASE_ALPHA = FAMILY_ALPHA / FAMILY_CASES
CI_CYCLES = 200_000  # cycles per small-vocabulary case
LARGE_CYCLES = 100_000  # cycles of the V = 32000 test (10x under the deep marker)
