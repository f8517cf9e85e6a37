"""The Dataset page's run form has the command's settings that change what the atlas shows
(``ui/batch_settings.py``): the circuits the table keeps (``--keep-edges``), the strongest edges per
row (``--top-edges``), the consensus share measured (``--consensus``) and each method's settings
(``--set``). Before, a batch started from the page ran with the command's defaults only: budgets
over 10 % of the edges opened an atlas that said 'rerun with a larger --keep-edges', which the page
could not do. Each reaches the very command the page starts; bad input is one sentence."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")
from dataset_jobs import dataset_page, page_errors  # noqa: E402

from circuitviz.batch import atlas, jobs  # noqa: E402
from circuitviz.ui import batch_runner, batch_settings  # noqa: E402

FORM, MORE = batch_runner.FORM, batch_settings.KEY


@pytest.fixture
def page(tmp_path, monkeypatch):
    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))
    return dataset_page(monkeypatch, batch_runner.RUN, launcher=True)


def test_the_forms_settings_reach_the_command_and_the_atlas(page):
    at = page
    at.multiselect(key=FORM + "methods").set_value(["eap-ig"])
    at.number_input(key=FORM + "n").set_value(3)
    at.text_input(key=FORM + "budgets").set_value("3,8,20")
    at.run()
    at.number_input(key=MORE + "keep").set_value(8)
    at.number_input(key=MORE + "top").set_value(7)
    at.number_input(key=MORE + "consensus").set_value(0.6)
    at.number_input(key=MORE + "method.eap-ig.ig_steps").set_value(3)
    at.button(key=FORM + "go").click().run()
    assert not at.exception, at.exception
    assert not page_errors(at)
    job = jobs.running_job() or jobs.jobs()[0]
    tail = job.argv[job.argv.index("--budgets") :]
    assert tail[tail.index("--keep-edges") + 1] == "8" and tail[tail.index("--top-edges") + 1] == "7"
    assert tail[tail.index("--consensus") + 1] == "0.6" and "ig_steps=3" in tail
    ended = jobs.wait(job.folder, 300)
    assert ended.state == "finished", ended.log_tail
    batch = atlas.BatchTable.load(job.folder)
    (label,) = batch.labels
    assert batch.kept_budgets(label) == [3, 8]  # 20 is over the 8 edges kept
    assert batch.manifest["consensus"]["threshold"] == pytest.approx(0.6)
    assert '"ig_steps": 3' in batch.rows(label).column("config").to_pylist()[0]
    # the atlas opens at the share its batch measured, not the 50 % the stored atlas left behind
    at.segmented_control(key="dataset.source").set_value("ioi").run()  # a stored atlas first, at 50 %
    at.segmented_control(key="dataset.source").set_value(batch_runner.RUN).run()
    at.button(key=f"{FORM}open.{job.folder.name}").click().run()
    assert not at.exception, at.exception
    (share,) = [s for s in at.slider if s.label.startswith("consensus: edges in at least")]
    assert share.value == pytest.approx(0.6)


def test_settings_left_as_they_are_add_nothing_to_the_command():
    found = batch_settings.BatchSettings(methods={"eap-ig": {}})
    assert batch_settings.arguments(found, ["eap-ig"], "mib", "gemma-3-270m") == []


def test_bad_settings_are_one_sentence_each():
    keep = batch_settings.BatchSettings(keep_edges=5, methods={"eap": {}})
    with pytest.raises(ValueError) as error:
        batch_settings.arguments(keep, ["eap"], "10,20", "gemma-3-270m")
    assert str(error.value) == (
        "Keeping circuits up to 5 edges keeps none of the budgets (the smallest is 10), so the atlas "
        "would have no circuit to show; give at least 10, or leave the box empty for 10 % of the edges."
    )
    # MIB's smallest budget on Gemma-3-270M's 10,342 edges is 10
    with pytest.raises(ValueError, match="the smallest is 10\\)"):
        batch_settings.arguments(keep, ["eap"], "mib", "gemma-3-270m")
    # --set gives a setting to every method that has it: EAP-IG's 10 steps would be EAP-GP's too
    both = batch_settings.BatchSettings(methods={"eap-ig": {"ig_steps": 10}, "eap-gp": {}})
    with pytest.raises(ValueError) as error:
        batch_settings.arguments(both, ["eap-ig", "eap-gp"], "mib", "gemma-3-270m")
    assert str(error.value).startswith(
        "The batch gives a setting to every method that has it (its --set), so ig steps cannot be 10 for "
        "eap-ig, 5 for eap-gp; give 2 methods one value"
    )
    same = batch_settings.BatchSettings(methods={"eap-ig": {"ig_steps": 7}, "eap-gp": {"ig_steps": 7}})
    assert batch_settings.arguments(same, ["eap-ig", "eap-gp"], "mib", "gemma-3-270m") == [
        "--set",
        "ig_steps=7",
    ]
    wrong = batch_settings.BatchSettings(methods={"eap-ig": {"ig_steps": 0}})
    with pytest.raises(ValueError, match="^EAP-IG's settings: ig_steps"):
        batch_settings.arguments(wrong, ["eap-ig"], "mib", "gemma-3-270m")
