#!/usr/bin/env bash
# Mutation testing of the two engines with mutmut (issue 24; not in CI: it takes hours on 2 cores).
#
#   bash bench/mutants.sh                          # reference/ and fastpath/
#   bash bench/mutants.sh reference/numbers.py     # a subset: files or folders of reference/ and fastpath/
#   bash bench/mutants.sh reference fastpath/pool.py
#
# Needs mutmut==3.8.1 and the test extra (pip install "torch==2.13.0" -e ".[test]" mutmut==3.8.1).
#
# mutmut names a module by its file's path and rewrites the files it mutates, while the code
# imports through setuptools' package-dir mapping (reference/ -> rheo.reference, ...). So this
# builds a MAPPED TREE, a real copy (bench/mapped_tree.py: src/rheo/reference, src/rheo/fastpath,
# src/rheo/cases, tests, docs, ...), configures mutmut there ([tool.mutmut] appended to the
# copy's pyproject.toml), runs it with one worker (--max-children 1, or $MUTMUT_CHILDREN), and
# prints the mutation score (bench/mutation_score.py): string-literal mutants of message
# strings are classified after the run and do not count; the equivalent mutants listed in
# bench/equivalent_mutants.txt (each with its reason) do not count either.
#
# The test selection is fast on purpose (the tests that exercise the engines directly);
# mutmut runs, for each mutant, only the tests of the selection that reach the mutated function.
# Every pytest run gets -x -q -p no:cacheprovider.
#
# Environment: PYTHON (default: python), MUTMUT_CHILDREN (default 1), HYPOTHESIS_PROFILE (default
# mutants: derandomized, no shrinking),
# MUTANTS_WORKDIR (keep the mapped tree and mutmut's results there instead of a temporary
# folder that is deleted at the end; rerunning with the same folder resumes),
# MUTANTS_LEDGER (default 1; 0: start from nothing, neither read nor write the ledger),
# MUTANTS_RETRY_SURVIVORS (default 0; 1: run the ledger's survivors again).
#
# The ledger, bench/mutation_results/ENGINE.json (bench/mutation_ledger.py), keeps the verdicts
# of earlier runs in the repository: a new mapped tree is seeded with them, mutmut runs only the
# mutants no run has decided (and those of functions changed since), and the verdicts are saved
# back at the end. A run stopped early (it is hours long) saves with
#   python bench/mutation_ledger.py save "$MUTANTS_WORKDIR"
# and the next run, in any session, goes on from there.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="${PYTHON:-python}"
children="${MUTMUT_CHILDREN:-1}"

reference_tests=(
  tests/test_worked_numbers.py tests/test_self_check.py tests/test_numbers.py tests/test_instance.py
  tests/test_certify.py tests/test_sampling.py tests/test_simulator.py tests/test_corpus.py
  tests/test_params.py tests/test_estimate.py tests/test_deadline.py tests/test_choices.py tests/test_generate.py
  tests/test_sampling_input.py tests/test_docstrings.py tests/test_verify.py proofs_tests
)
# Hypothesis searches for counterexamples of the wrong-on-purpose variants: 46 of the
# selection's 90 s, spent again on every survivor; the corpus replays their counterexamples
# (tests/test_corpus.py) at a fraction of the cost.
slow_searches="not test_wrong_variant_has_a_counterexample and not test_lemma1_proxy_below_rank_bound_breaks"
slow_searches+=" and not test_lemma1_constant_proxy_breaks and not test_lemma1_self_proxy_breaks"
slow_searches+=" and not test_theorem3_rheo_falls_short_of_the_optimum_with_fills"
slow_searches+=" and not test_temperature_zero_m1_differs_from_topk_somewhere"
fastpath_tests=(
  tests/test_fastpath_laws.py tests/test_fastpath_models.py tests/test_fastpath_differential.py
  tests/test_fastpath_edges.py tests/test_fastpath_baselines.py
)

# the subset, as globs over the mapped tree
only=()
want_reference=0
want_fastpath=0
[ "$#" -eq 0 ] && set -- reference fastpath
for arg in "$@"; do
  arg="${arg%/}"
  case "$arg" in
    reference | reference/*) want_reference=1 ;;
    fastpath | fastpath/*) want_fastpath=1 ;;
    *) echo "bench/mutants.sh: $arg is not in reference/ or fastpath/" >&2; exit 2 ;;
  esac
  if [ -d "$root/$arg" ]; then only+=("src/rheo/$arg/*"); else only+=("src/rheo/$arg"); fi
done
tests=()
[ "$want_reference" = 1 ] && tests+=("${reference_tests[@]}")
[ "$want_fastpath" = 1 ] && tests+=("${fastpath_tests[@]}")

if [ -n "${MUTANTS_WORKDIR:-}" ]; then
  work="$MUTANTS_WORKDIR"
  mkdir -p "$work"
else
  work="$(mktemp -d -t rheo-mutants-XXXXXX)"
  trap 'rm -rf "$work"' EXIT
fi
tree="$work/repo"
if [ ! -d "$tree" ]; then
  "$py" "$root/bench/mapped_tree.py" "$tree" >/dev/null
  toml_list() { local s="" x; for x in "$@"; do s+="\"$x\", "; done; echo "[${s%, }]"; }
  present=()
  for t in "${tests[@]}"; do [ -e "$tree/${t%%::*}" ] && present+=("$t"); done  # a test file not merged yet
  cat >>"$tree/pyproject.toml" <<EOF

[tool.mutmut]  # written by bench/mutants.sh in its mapped tree
source_paths = ["src"]
only_mutate = $(toml_list "${only[@]}")
also_copy = ["conftest.py", "docs", "cases", "examples", "proofs_tests"]
pytest_add_cli_args = ["-x", "-q", "-p", "no:cacheprovider"]
pytest_add_cli_args_test_selection = $(toml_list "${present[@]}" -k "$slow_searches")
use_git_change_detection = false
process_isolation = "forkserver"
EOF
  # mutmut forks one process per mutant from a server that has imported torch and the tests
  # (its warm-up collects them); pytest's gc.collect() calls (five at every session's end) and
  # Python's own full collections then walk that whole inherited heap, copying its pages
  # (bench/fork_gc_overhead.py: about 0.6 s of CPU for a trivial test, 0.05 s frozen). Frozen objects
  # are skipped. Torch gets one thread per
  # mutant process, as under xdist (the processes already fill the cores).
  cat >>"$tree/conftest.py" <<'EOF'


def pytest_configure(config):  # written by bench/mutants.sh (see there)
    import gc
    import sys

    gc.freeze()
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)
EOF
  # the verdicts of earlier runs (bench/mutation_results/): mutmut keeps those of unchanged functions
  if [ "${MUTANTS_LEDGER:-1}" != 0 ]; then
    retry=()
    [ "${MUTANTS_RETRY_SURVIVORS:-0}" = 1 ] && retry=(--retry-survivors)
    "$py" "$root/bench/mutation_ledger.py" seed "$tree" "${retry[@]}"
  fi
fi

cd "$tree"
# Hypothesis' "mutants" profile (src/rheo/checks/cases/profiles.py): derandomized, so a verdict is
# the same in every run and the ledger can keep it, and without shrinking, which a kill does not need
export HYPOTHESIS_PROFILE="${HYPOTHESIS_PROFILE:-mutants}"
echo "bench/mutants.sh: mapped tree $tree; mutating ${only[*]}" >&2
# mutmut's own exit status is not the verdict (it exits 0 with survivors); the score is
PYTHONDONTWRITEBYTECODE=1 "$py" -m mutmut run --max-children "$children" >"$work/mutmut-run.log" 2>&1 || {
  tail -40 "$work/mutmut-run.log" >&2
  echo "bench/mutants.sh: mutmut run failed (log: $work/mutmut-run.log)" >&2
  exit 1
}
[ "${MUTANTS_LEDGER:-1}" != 0 ] && "$py" "$root/bench/mutation_ledger.py" save "$work" >&2
rechecked=()
for f in "$work"/rechecked*.json; do [ -e "$f" ] && rechecked+=("$f"); done
[ "${#rechecked[@]}" -gt 0 ] && rechecked=(--rechecked "${rechecked[@]}")
"$py" "$root/bench/mutation_score.py" --equivalent "$root/bench/equivalent_mutants.txt" "${rechecked[@]}"
