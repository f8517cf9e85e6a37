"""discover refuses a prompt it can propose no corrupted prompt for in one sentence naming
--corrupted: RelP on "Snow is white and grass is" (Gemma-3-270M, 2026-12-07) printed "...; write it
with the key word replaced, keeping the token count. Give it with --corrupted.", two sentences."""

import pytest
from sentences import assert_one_sentence
from test_cli_file_task import TINY, tiny  # noqa: F401 (the fixture)

from circuitviz.entry import cli


@pytest.mark.parametrize("foil", [["--foil", " Mary"], []])
def test_no_corrupted_prompt_to_propose_is_one_sentence(capsys, tiny, foil):  # noqa: F811
    argv = ["discover", *TINY, "--prompt", "xyzzy plugh", "--answer", " John", *foil, "--method", "relp"]
    assert cli.main([*argv, "--budgets", "5", "--no-cache"]) == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith("error: No corrupted prompt could be proposed")
    assert error.endswith(", and give it with --corrupted.")
    assert_one_sentence(error.removeprefix("error: "))
