"""The package as pyproject.toml declares it: its console command, its pins, and the scripts that
import it as an installed package."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest
from packaging.requirements import Requirement

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest brings tomli
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _requirements(extra: str | None = None) -> list[Requirement]:
    lines = PROJECT["dependencies"] if extra is None else PROJECT["optional-dependencies"][extra]
    nodeps = [] if extra else (ROOT / "requirements-nodeps.txt").read_text().splitlines()
    nodeps = [line.strip() for line in nodeps if line.strip() and not line.lstrip().startswith("#")]
    return [Requirement(line) for line in [*lines, *nodeps]]


@pytest.mark.parametrize("extra", [None, "dev", "ray"])
def test_this_environment_holds_the_pinned_versions(extra):
    """What the tests run against is what pyproject.toml pins (a drifted venv fails here first)."""
    wrong = []
    for requirement in _requirements(extra):
        try:
            installed = version(requirement.name)
        except PackageNotFoundError:
            wrong.append(f"{requirement.name} is not installed")
            continue
        if not requirement.specifier.contains(installed, prereleases=True):
            wrong.append(f"{requirement.name} {installed} is not {requirement.specifier}")
    assert not wrong, wrong


def test_the_console_command_is_the_command_line(capsys):
    module, _, name = PROJECT["scripts"]["circuitviz"].partition(":")
    main = getattr(import_module(module), name)
    assert main(["methods"]) == 0
    assert "eap-ig" in capsys.readouterr().out


def test_the_benchmark_preamble_imports_no_torch():
    """bench_load.py times its child's import of circuitviz.models: the preamble must not pre-load torch."""
    code = "import sys, circuitviz.bench.harness; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "False"


def test_scripts_import_the_installed_package_not_a_path():
    """No benchmark or script puts the checkout on sys.path; the one entry left is the external
    reference checkout that compare_reference.py is pointed at."""
    edits = {}
    for script in sorted([*ROOT.glob("benchmarks/*.py"), *ROOT.glob("scripts/*.py")]):
        found = re.findall(r"sys\.path\.(?:insert|append)\(([^)]*)\)", script.read_text())
        if found:
            edits[script.name] = found
    assert edits == {"compare_reference.py": ["0, args.eap_ig_src"]}
