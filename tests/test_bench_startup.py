"""``benchmarks/bench_startup.py --no-bytecode`` leaves the checkout's bytecode alone: until
2026-12-07 it deleted every ``__pycache__`` folder of the package (to time a start that compiles
it), which slowed every later start of anyone using the checkout and raced with others' runs. Its
server now runs from a copy of the checkout without bytecode and writes none; this checks that the
package really is compiled from source there and that the checkout's bytecode survives, without a
browser (``server_environment`` is what ``one_start`` starts the server with)."""

from __future__ import annotations

import importlib.util
import json
import py_compile
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _bench():
    spec = importlib.util.spec_from_file_location("bench_startup", ROOT / "benchmarks" / "bench_startup.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# in the server's place: imports part of the package and says where from and whether any bytecode
# was there to load (none must be: every module of the package is compiled from its source)
PROBE = """
import importlib.util, json, os, sys
import circuitviz.core.keys, circuitviz.core.text
mine = [m for m in list(sys.modules.values()) if (getattr(m, "__file__", None) or "").startswith(os.getcwd())]
print(json.dumps({
    "package": __import__("circuitviz").__file__,
    "modules": len(mine),
    "with_bytecode": [m.__name__ for m in mine if os.path.exists(importlib.util.cache_from_source(m.__file__))],
    "dont_write": sys.dont_write_bytecode,
}))
"""


def test_a_start_without_bytecode_compiles_from_a_copy_and_leaves_the_checkout_alone(tmp_path):
    bench = _bench()
    pycache = ROOT / "circuitviz" / "core" / "__pycache__"
    compiled = Path(py_compile.compile(str(ROOT / "circuitviz" / "core" / "keys.py")))  # the checkout's
    assert compiled.parent == pycache
    before = sorted(path.name for path in pycache.iterdir())
    where, env = bench.server_environment(ROOT, tmp_path / "cache", bytecode=False)
    try:
        assert where != ROOT and env["PYTHONPATH"] == str(where) and env["PYTHONDONTWRITEBYTECODE"] == "1"
        assert (where / "app.py").is_file() and (where / "circuitviz" / "core" / "keys.py").is_file()
        assert not list(where.rglob("__pycache__")) and not list(where.rglob("*.pyc"))
        found = json.loads(
            subprocess.run(
                [sys.executable, "-c", PROBE], cwd=where, env=env, capture_output=True, text=True, check=True
            ).stdout
        )
        assert found["package"] == str(where / "circuitviz" / "__init__.py")  # not the checkout's
        assert found["modules"] >= 3 and found["with_bytecode"] == [] and found["dont_write"]
        assert not list(where.rglob("__pycache__"))  # and it wrote none
    finally:
        import shutil

        shutil.rmtree(where, ignore_errors=True)
    assert compiled.exists() and set(before) <= {path.name for path in pycache.iterdir()}


def test_a_start_with_bytecode_runs_the_checkout_itself(tmp_path):
    where, env = _bench().server_environment(ROOT, tmp_path / "cache")
    assert where == ROOT and env["PYTHONPATH"] == str(ROOT)
    assert env["CIRCUITVIZ_CACHE"] == str(tmp_path / "cache")
