"""Adding a method is one file: ``tests/method_example/change_size.py``, dropped where the
registry looks, is found by discovery -- this test never registers it -- and runs everywhere
methods run: the API (through the store), the limits, the command line's ``methods`` list and
flags, and the app's method picker and settings form.

Two ways in, both the package's own import path: a file in a folder of the
``circuitviz.methods`` package's path (what a file in ``circuitviz/methods/`` is), and a module
behind a ``circuitviz.methods`` entry point of an installed distribution (a method shipped in
another package).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
import torch

import circuitviz.methods as methods
from circuitviz.methods import available_methods, registry

EXAMPLE = Path(__file__).parent / "method_example" / "change_size.py"


def _forget(module: str) -> None:
    """Undo the discovery: the registry and the import system forget the example."""
    registry._REGISTRY.pop("change-size", None)
    sys.modules.pop(module, None)


@pytest.fixture
def in_the_package(tmp_path, monkeypatch):
    """The example dropped into a folder of the methods package's path."""
    folder = tmp_path / "more_methods"
    folder.mkdir()
    shutil.copy(EXAMPLE, folder / "change_size.py")
    monkeypatch.setattr(methods, "__path__", [*methods.__path__, str(folder)])
    yield
    _forget("circuitviz.methods.change_size")


@pytest.fixture
def behind_an_entry_point(tmp_path, monkeypatch):
    """The example as a module of a distribution installed on sys.path, named by its entry point."""
    shutil.copy(EXAMPLE, tmp_path / "circuitviz_change_size.py")
    dist_info = tmp_path / "circuitviz_change_size-1.0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: circuitviz-change-size\nVersion: 1.0\n")
    (dist_info / "entry_points.txt").write_text(
        f"[{registry.ENTRY_POINT_GROUP}]\nchange-size = circuitviz_change_size\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    _forget("circuitviz_change_size")


@pytest.fixture(params=["in_the_package", "behind_an_entry_point"])
def dropped(request):
    request.getfixturevalue(request.param)


def test_the_example_is_not_registered_until_it_is_dropped_in():
    assert "change-size" not in available_methods()


def test_a_dropped_method_runs_everywhere_methods_run(dropped, tmp_path):
    from circuitviz.bench.toy_models import IOI_TASK, tiny_model
    from circuitviz.entry.api import discover
    from circuitviz.entry.cli import build_parser
    from circuitviz.entry.limits import estimate_request
    from circuitviz.services.store import ResultStore

    model = tiny_model("gpt2")
    assert "change-size" in available_methods()
    result, cached = discover(
        model, IOI_TASK, "change-size", {"power": 2.0}, budgets=[5, 20], store=ResultStore(tmp_path)
    )
    again, cached_again = discover(
        model, IOI_TASK, "change-size", {"power": 2.0}, budgets=[5, 20], store=ResultStore(tmp_path)
    )
    assert (cached, cached_again) == (False, True) and torch.equal(again.scores, result.scores)
    # measured like every method: the curve's points are patched evaluations of its circuits
    assert [p.budget for p in result.curve] == [5, 20] and all(0 <= p.ndf <= 1 for p in result.curve)
    assert int(result.circuit(20).sum()) == result.point(20).n_edges <= 20
    # scored as its class says: each writer's row is constant, rows ordered by change size
    rows = result.scores[:, result.graph.logits_backward]
    assert bool((rows[1:] >= 0).all()) and float(rows.max()) > 0
    # priced by the limits from its own estimate, offered on the command line with its settings
    assert estimate_request(model, IOI_TASK, "change-size").sequences == 2 + 7
    parsed = build_parser().parse_args(
        [
            "discover",
            "--prompt",
            "x",
            "--answer",
            " y",
            "--method",
            "change-size",
            "--power",
            "3",
            "--norm",
            "l1",
        ]
    )
    assert (parsed.setting_power, parsed.setting_norm) == (3.0, "l1")
    with pytest.raises(SystemExit):  # a choice outside the field's choices is refused by the parser
        build_parser().parse_args(["discover", "--prompt", "x", "--answer", " y", "--norm", "l3"])


def test_a_dropped_method_is_listed_by_the_command_line(dropped, capsys):
    from circuitviz.entry.cli import main

    assert main(["methods"]) == 0
    (line,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("change-size ")]
    assert "Change size" in line and "power=1.0, norm=l2" in line


def test_a_dropped_method_gets_flags_and_a_form(dropped):
    from streamlit.testing.v1 import AppTest

    flags = {flag.dest: flag for flag in methods.setting_flags()}
    assert flags["power"].methods == ("change-size",) and flags["power"].kind is float
    assert flags["norm"].choices == ("l1", "l2")
    assert flags["power"].help == "the exponent applied to each writer's change size."

    def form():
        from circuitviz.methods import get_method
        from circuitviz.ui.forms import config_form
        from circuitviz.ui.inputs import method_picker

        config_form(get_method(method_picker()), "form")

    at = AppTest.from_function(form, default_timeout=60)
    at.session_state["method"] = "change-size"
    at.run()
    assert not at.exception, at.exception
    (picker,) = [box for box in at.selectbox if "Change size (change-size)" in box.options]
    assert picker.value == "change-size"
    assert at.number_input(key="form.change-size.power").value == 1.0
    assert at.selectbox(key="form.change-size.norm").options == ["l1", "l2"]
