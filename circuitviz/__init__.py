"""circuitviz: the sparse circuit inside a language model that carries one prompt's answer."""

import os as _os

# torch's OpenMP threads wait for work asleep rather than spinning, unless the user chose: with
# spinning threads a second busy process, or two of the app's own threads running torch at once
# (the page's checks, the label prefetch, a run), made an EAP-IG run on the two-core machine take
# 46 s instead of 2.6 s and the page 7 s more to enable Run (docs/benchmarks.md, "OpenMP's wait
# policy"). Read once, when torch loads its OpenMP library: it holds when circuitviz is imported
# first (the app's launcher, the command line, ``python -m``).
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

__version__ = "0.1.0"
