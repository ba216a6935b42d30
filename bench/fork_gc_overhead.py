"""What a mutant's process pays for pytest's gc.collect() calls, with and without gc.freeze().

    python bench/fork_gc_overhead.py

mutmut (process_isolation = "forkserver") forks each mutant's process from a server that has
imported torch and collected the tests; pytest collects garbage five times at every session's
end, walking the whole inherited heap. This forks such a process twice, runs one trivial
fastpath test in each (the second after gc.freeze(), as bench/mutants.sh's conftest hook does),
and prints the CPU seconds of each pytest run. docs/tests.md quotes it.
"""

from __future__ import annotations

import gc
import os
import sys
import time

import pytest
from recheck_survivors import selection  # bench/: the fastpath selection of bench/mutants.sh

TRIVIAL = "tests/test_fastpath_laws.py::test_inverse_cdf_skips_zero_mass_and_falls_back_to_the_last_token"


def main() -> int:
    os.chdir(os.path.join(os.path.dirname(__file__), ".."))
    out, sys.stdout = sys.stdout, open(os.devnull, "w")
    pytest.main(["--collect-only", "-qqq", "-p", "no:cacheprovider", *selection("fastpath")])  # the server's warm-up
    for freeze in (False, True):
        pid = os.fork()
        if pid == 0:
            if freeze:
                gc.freeze()
            t = time.process_time()
            rc = pytest.main(["-x", "-q", "-p", "no:cacheprovider", TRIVIAL])
            print(
                f"gc.freeze() {'on ' if freeze else 'off'}: {time.process_time() - t:.2f} s CPU (exit {rc})", file=out
            )
            out.flush()
            os._exit(0)
        os.waitpid(pid, 0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
