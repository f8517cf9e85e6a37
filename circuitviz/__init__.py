"""circuitviz: the sparse circuit inside a language model that carries one prompt's answer."""

import os as _os

# torch's OpenMP threads spin at most 10,000 rounds waiting for work, then sleep, unless the user
# chose a wait policy: with the default (spinning for long), one other busy process on the
# two-core machine made an EAP-IG run (IOI, 20 steps, two threads) take 11.1 s instead of 4.1 s
# (46 s beside a benchmark of ours), while a quiet machine runs it in the same 1.3 s either way
# (docs/benchmarks.md, "OpenMP's wait"). Read when torch loads its OpenMP library: it holds when
# circuitviz is imported first (the app's launcher, the command line, ``python -m``).
if "OMP_WAIT_POLICY" not in _os.environ:
    _os.environ.setdefault("GOMP_SPINCOUNT", "10000")

__version__ = "0.1.0"
