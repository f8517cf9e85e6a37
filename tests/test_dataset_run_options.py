"""The Dataset page's run form has the rest of the command's dataset options (``ui/batch_form.py``,
``ui/batch_settings.py``): real MMLU questions (``--dataset mmlu --subjects --n --seed``), the
prompts' token limit (``--max-tokens``, at most the server's CIRCUITVIZ_MAX_TOKENS), how many
prompts share a pass (``--batch-tasks``), the validity check (``--no-task-check``) and a file's
strictness (``--strict``); Ray, the device and another store are said to be the command's. Before,
a user who ran these with the command could not from the page, and the page said nothing of it."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("streamlit")
from dataset_jobs import dataset_page, finished_batch, page_errors  # noqa: E402

from circuitviz.batch import jobs  # noqa: E402
from circuitviz.batch.dataset import parse_dataset  # noqa: E402
from circuitviz.ui import batch_form, batch_runner, batch_settings  # noqa: E402

FORM, MORE = batch_runner.FORM, batch_settings.KEY


@pytest.fixture
def page(tmp_path, monkeypatch):
    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("CIRCUITVIZ_MAX_TOKENS", raising=False)
    return dataset_page(monkeypatch, batch_runner.RUN, launcher=True)


def test_an_mmlu_batch_with_the_further_options_runs_from_the_form(page):
    at = page
    at.segmented_control(key=FORM + "source").set_value(batch_runner.MMLU).run()
    assert not at.exception, at.exception
    at.multiselect(key=FORM + "subjects").set_value(["astronomy"])
    at.number_input(key=FORM + "mmlu.n").set_value(1)
    at.number_input(key=FORM + "mmlu.seed").set_value(3)
    at.multiselect(key=FORM + "methods").set_value(["eap"])
    at.text_input(key=FORM + "budgets").set_value("3,8")
    at.run()
    at.number_input(key=MORE + "tokens").set_value(200)
    at.number_input(key=MORE + "share").set_value(2)
    at.checkbox(key=MORE + "nocheck").check()  # a random tiny model's corruption moves nothing
    at.button(key=FORM + "go").click().run()
    assert not at.exception, at.exception
    assert not page_errors(at)
    job = jobs.running_job() or jobs.jobs()[0]
    argv = job.argv
    assert argv[:9] == ["batch", "--dataset", "mmlu", "--subjects", "astronomy", "--seed", "3", "--n", "1"]
    assert argv[argv.index("--max-tokens") + 1] == "200" and argv[argv.index("--batch-tasks") + 1] == "2"
    assert "--no-task-check" in argv
    assert job.title == "1 MMLU question of astronomy × eap"
    ended = jobs.wait(job.folder, 300)
    assert ended.state == "finished", ended.log_tail
    manifest = json.loads((job.folder / "manifest.json").read_text())
    assert manifest["max_tokens"] == 200 and manifest["batch_tasks"] == 2
    assert manifest["task_check"] is False  # the atlas counts its tasks, the check skipped on purpose
    assert manifest["dataset"]["selection"]["per_subject"]["astronomy"]["kept"] == 1
    # the line the page shows while it draws, in the number it takes ('1 valid questions of each of
    # 1 MMLU subjects' before)
    log = jobs.log_lines(job.folder)
    assert "drawing 1 valid MMLU question of astronomy on the model (seed 3) ..." in log
    assert "generated 1 mmlu task (seed 3)" in log


def test_mmlu_without_a_subject_or_over_the_shared_cap_is_one_sentence(page, monkeypatch):
    from circuitviz.ui.loaders import BROWSER_PATHS_ENV

    at = page
    at.segmented_control(key=FORM + "source").set_value(batch_runner.MMLU).run()
    at.button(key=FORM + "go").click().run()
    assert page_errors(at) == ["Choose at least one MMLU subject (the subjects box), or all of them."]
    monkeypatch.setenv(BROWSER_PATHS_ENV, "0")  # a shared server: 20 prompts at most
    at.multiselect(key=FORM + "subjects").set_value(["all"])
    at.number_input(key=FORM + "mmlu.n").set_value(1)
    at.button(key=FORM + "go").click().run()
    (error,) = page_errors(at)
    assert error.startswith(
        "1 question of each of 57 subjects is 57 prompts, more than the 20 a batch run here"
    )
    assert jobs.running_job() is None and not jobs.jobs()


def test_the_token_limit_is_the_servers_at_most_and_the_command_alone_is_said(page, monkeypatch):
    at = page
    assert any(batch_settings.COMMAND_ONLY.split(":")[0] in c.value for c in at.caption)
    monkeypatch.setenv("CIRCUITVIZ_MAX_TOKENS", "64")
    at.run()
    box = at.number_input(key=MORE + "tokens")
    assert box.max == 64 and box.value == 64  # the command's 256 would pass the operator's limit
    found = batch_settings.BatchSettings(max_tokens=100, methods={"eap": {}})
    with pytest.raises(ValueError) as error:
        batch_settings.arguments(found, ["eap"], "mib", "gemma-3-270m")
    assert str(error.value) == (
        "The longest prompt must be 1 to 64 tokens on this server, not 100; its operator sets the "
        "limit with CIRCUITVIZ_MAX_TOKENS."
    )
    found.max_tokens = 64
    assert batch_settings.arguments(found, ["eap"], "mib", "gemma-3-270m") == ["--max-tokens", "64"]
    found.batch_tasks = 0
    with pytest.raises(ValueError, match="^Prompts sharing a pass must be 1 or more, not 0.$"):
        batch_settings.arguments(found, ["eap"], "mib", "gemma-3-270m")


def test_the_strict_box_refuses_a_file_with_a_bad_line_in_one_sentence(page):
    at = page
    at.segmented_control(key=FORM + "source").set_value(batch_runner.UPLOAD).run()
    assert not at.exception, at.exception
    assert at.checkbox(key=FORM + "strict").label == "refuse the file if any line is not a task"
    good = '{"clean": "The capital of France is", "corrupted": "The capital of Italy is", "answer": " Paris", "foil": " Rome"}\n'
    loaded = parse_dataset(good + "oops\n" + good.replace("France", "Spain"), "jsonl", origin="p.jsonl")
    assert batch_form._strict_problem(loaded, "p.jsonl") == (
        "1 line of p.jsonl is no task (the first: line 2 is not valid JSON (Expecting value at column 1)) and "
        "the strict box refuses "
        "the file; fix it, or untick the box to run the other 2 tasks."
    )
    assert batch_form._strict_problem(parse_dataset(good, "jsonl", origin="p.jsonl"), "p.jsonl") is None


def test_the_batch_runs_on_the_sidebars_device(page):
    """The sidebar's device reached Explore's runs but not a page batch: a user who chose the CPU
    on a GPU server had the batch take the GPU (the command's own default)."""
    at = page
    assert not [c for c in at.caption if "(the sidebar's model and device)" in c.value]
    at.selectbox(key="w.device").set_value("cpu").run()  # the sidebar's device box
    said = [c.value.replace("\\", "") for c in at.caption]
    assert any("on gemma-3-270m on cpu (the sidebar's model and device)" in c for c in said), said
    at.multiselect(key=FORM + "methods").set_value(["eap"])
    at.number_input(key=FORM + "n").set_value(1)
    at.text_input(key=FORM + "budgets").set_value("3,8")
    at.button(key=FORM + "go").click().run()
    assert not at.exception, at.exception
    job = jobs.running_job() or jobs.jobs()[0]
    assert job.argv[job.argv.index("--device") + 1] == "cpu"
    assert jobs.wait(job.folder, 300).state == "finished"


def test_a_row_of_boxes_keeps_its_boxes_in_line_when_a_label_wraps(page):
    """At 1,000 px 'questions per subject' and 'strongest edges kept per prompt' wrap to two lines,
    and their boxes sat a line lower than their neighbours' (Chromium); each such row aligns its
    boxes at the bottom, and the settings' expander title fits one line there (about 85 characters)."""
    at = page
    at.segmented_control(key=FORM + "source").set_value(batch_runner.MMLU).run()
    assert not at.exception, at.exception

    def alignment(column) -> str:
        field = column.proto.DESCRIPTOR.fields_by_name["vertical_alignment"]
        return field.enum_type.values_by_number[column.proto.vertical_alignment].name

    rows = {
        "questions per subject", "strongest edges kept per prompt", "prompts sharing a pass",
        "skip the validity check",
    }  # fmt: skip
    found = {
        child.label: alignment(column)
        for column in at.columns
        for child in column.children.values()
        if getattr(child, "label", None) in rows
    }
    assert found == dict.fromkeys(rows, "BOTTOM")
    (settings,) = [e for e in at.expander if e.label.startswith("more settings")]
    assert len(settings.label) <= 85


def test_the_forms_cost_names_the_prompts_it_was_measured_on_in_the_right_number(tmp_path, monkeypatch):
    """The cost read 'about 3.9 s a prompt for eap; so 1 prompts' circuits take about 4 s' after
    one MMLU batch: in the wrong number, and silent that its 46-token question is no IOI prompt's 16."""
    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))
    rows = {
        "method": ["eap"],
        "status": ["done"],
        "seconds": [3.93],
        "n_tokens": [46],
        "family": ["mmlu/astronomy"],
    }
    manifest = {"model": {"model_id": "gemma-3-270m"}}
    title = "1 MMLU question of astronomy × eap"
    finished_batch("2026-12-06-110754-mmlu-1-eap", title, manifest, rows)
    said = batch_form.measured_cost("gemma-3-270m", ["eap"], 1, "mmlu")
    assert said.startswith(
        "Measured on earlier batches here: about 3.9 s a 46-token prompt for eap; so 1 prompt's circuits "
        "take about 4 s if it is as long, and the consensus step more."
    ), said
    assert "so 3 prompts' circuits take about 12 s if they are as long" in batch_form.measured_cost(
        "gemma-3-270m", ["eap"], 3
    )
    # a newer IOI batch: an IOI batch is priced from it, an MMLU one still from the MMLU question
    ioi = {
        "method": ["eap"] * 2,
        "status": ["done"] * 2,
        "seconds": [1.4] * 2,
        "n_tokens": [16] * 2,
        "family": ["ioi"] * 2,
    }
    finished_batch("2026-12-06-120000-ioi-2-eap", title, manifest, ioi)
    assert "about 1.4 s a 16-token prompt for eap" in batch_form.measured_cost(
        "gemma-3-270m", ["eap"], 3, "ioi"
    )
    assert "about 3.9 s a 46-token prompt for eap" in batch_form.measured_cost(
        "gemma-3-270m", ["eap"], 3, "mmlu"
    )
    assert "about 1.4 s a 16-token prompt" in batch_form.measured_cost("gemma-3-270m", ["eap"], 3, "factual")


def test_a_failed_runs_flag_is_named_with_its_box_and_each_empty_run_by_its_time(page, tmp_path):
    """A batch the longest-prompt box starved failed with the command's '... raise --max-tokens',
    a flag the page's user never typed; and the list of runs that ended with no row named each run
    twice ('2026-12-06 11:16, 2 ioi prompts × eap (failed): The batch 2 ioi prompts × eap failed
    ...') beside a 'Delete…' cut to 'Del…' at 1,000 px."""
    job = jobs.JobStatus(
        folder=tmp_path / "2026-12-06-111600-ioi-2-eap", state="failed", title="2 ioi prompts × eap",
        started=100.0, ended=106.0, argv=["batch", "--methods", "eap"],
        reason="error: The ioi family gave only 0 distinct prompts that fit this model's tokenizer (80 "
        "longer than 5 tokens); raise --max-tokens, or give a dataset file.",
    )  # fmt: skip
    assert batch_runner.ended_sentence(job) == (
        "The batch 2 ioi prompts × eap failed after 0m06s: The ioi family gave only 0 distinct prompts "
        "that fit this model's tokenizer (80 longer than 5 tokens); raise --max-tokens (the 'longest "
        "prompt' box under more settings), or give a dataset file. It finished no row to open."
    )
    for name in ("2026-12-06-111600-ioi-2-eap", "2026-12-06-111500-ioi-2-eap"):
        folder = jobs.runs_dir() / name
        folder.mkdir(parents=True)
        (folder / jobs.JOB).write_text('{"pid": null, "title": "2 ioi prompts × eap", "argv": ["batch"]}')
        (folder / jobs.EXIT).write_text('{"returncode": 2, "ended": 1.0}')
    at = page.run()
    (listed,) = [e for e in at.expander if e.label.endswith("ended with no row to open")]
    (said,) = [m.value.replace("\\", "") for m in listed.markdown if m.value.startswith("**")]
    assert said.startswith("**2026-12-06 11:15**: The batch 2 ioi prompts × eap failed")
    weights = [c.proto.weight for c in listed.get("column")]
    assert weights == pytest.approx([0.75, 0.25])  # 'Delete…' in a quarter of the row


def test_a_json_array_upload_says_how_to_write_it(tmp_path):
    """The uploader takes .json, and a .json file of one array (the usual shape) was read a line at
    a time: 'holds no task the batch can run (the first: line 1 is not valid JSON ...)'; it says
    what the file is and how to write it, on the page and on the command line alike."""
    from circuitviz.batch.dataset import DatasetError, read_dataset

    class Upload:
        name = "tasks.json"

        def getvalue(self):
            return b'[\n {"clean": "a b", "corrupted": "c b", "answer": " x", "foil": " y"},\n {"clean": "d"}\n]\n'

    said = (
        "tasks.json is one JSON array of 2 items; write one task object a line (JSON Lines: the array's "
        "items without the brackets and commas between them)."
    )
    assert batch_form._upload_tasks(Upload()) == (None, said)
    (tmp_path / "tasks.json").write_bytes(Upload().getvalue())
    with pytest.raises(DatasetError, match="^tasks.json is one JSON array of 2 items"):
        read_dataset(tmp_path / "tasks.json")
