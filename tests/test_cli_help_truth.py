"""Sentences of ``circuitviz <command> --help`` checked against what the code does (an audit of
2026-12-07): the device's default named CUDA only (MPS comes next, and 'auto' is a name the flag
takes), the dtype said nothing of its default, evaluate's --metric, --corrupted and --answer said
discover's rules (evaluate takes the circuit file's task for its own prompt, and never switches to
logprob), and batch's --seed and --n tied MMLU to --generate, which refuses it."""

import argparse

import pytest
import torch

from circuitviz.batch.dataset import DatasetError
from circuitviz.batch.generate import GENERATED_FAMILIES, check_family
from circuitviz.entry import cli
from circuitviz.entry.file_task import fill_from_file
from circuitviz.entry.parser import build_parser
from circuitviz.models import devices


def _help(command: str) -> str:
    parser = build_parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return " ".join(commands.choices[command].format_help().split())


@pytest.mark.parametrize("command", ["discover", "evaluate", "batch"])
def test_the_device_and_dtype_help_say_what_the_defaults_are(command, monkeypatch):
    said = _help(command)
    assert "cuda, mps, cpu or auto (default, auto: cuda when available, else mps, else cpu)" in said
    assert "the model's precision (default float32 on every device" in said
    assert devices.resolve_dtype(None) == torch.float32
    assert devices.resolve_device("auto") == torch.device(devices.default_device())
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(devices, "_mps_available", lambda: True)
    assert devices.default_device() == "mps"  # what 'else mps' says


def test_evaluates_task_help_says_what_evaluate_does(tmp_path):
    said = _help("evaluate")
    assert "logprob for a method" not in said
    assert (
        "--metric {logit_diff,logprob,prob} default: the circuit file's, with its foils, for its own prompt, else logit_diff"
        in said
    )
    assert (
        said.count("when omitted, the circuit file's for its own prompt, else proposed as the app does") == 2
    )
    parser = build_parser()
    text = '{"task": {"clean": "The capital of France is", "corrupted": "The capital of Italy is", "answer": " Paris", "foils": [], "metric": "prob"}}'
    args = parser.parse_args(["evaluate", "--circuit", "c.json"])
    fill_from_file(args, text, "c.json")  # its own prompt: the file's corruption, answer and metric
    assert (args.corrupted, args.answer, args.metric) == ("The capital of Italy is", " Paris", "prob")
    args = parser.parse_args(["evaluate", "--circuit", "c.json", "--prompt", "The capital of Spain is"])
    fill_from_file(args, text, "c.json")  # another prompt: nothing taken, and no logprob switch
    assert args.corrupted is None and cli._task(args).metric == "logit_diff"


def test_batch_help_ties_mmlu_to_the_dataset_flag_and_names_the_generated_families():
    said = _help("batch")
    assert "--seed SEED seed of --generate and of --dataset mmlu's draw" in said
    assert (
        "how many tasks --generate makes, or questions --dataset mmlu draws per subject (default 100)" in said
    )
    families = f"{', '.join(GENERATED_FAMILIES[:-1])} or {GENERATED_FAMILIES[-1]}"
    assert f"--generate FAMILY generate tasks: {families}" in said
    with pytest.raises(DatasetError, match="--generate makes template tasks"):
        check_family("mmlu")


def test_every_number_a_help_calls_the_default_is_the_flags_default():
    """'(default 256)', '(default 0.5; 0 for none)': each is the parser's own default (a flag whose
    default is settled at run time, --n, is checked against the command's constant)."""
    import re

    from circuitviz.batch.command import DEFAULT_N

    parser = build_parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    checked = 0
    for name, sub in commands.choices.items():
        for action in sub._actions:
            for number in re.findall(r"\(default:? (\d+(?:\.\d+)?)(?=[;),])", action.help or ""):
                default = DEFAULT_N if action.dest == "n" else action.default
                assert float(number) == float(default), (name, action.option_strings, number, default)
                checked += 1
    assert checked >= 9
