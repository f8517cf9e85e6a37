"""A local folder whose config.json is damaged is refused in one sentence that names the way out
(the release's config.json), where "The checkpoint in X cannot be read: its config.json is not
JSON (...)." said only what was wrong."""

from __future__ import annotations

import json

import pytest
from sentences import assert_one_sentence

from circuitviz.models.checkpoints import from_pretrained_checked
from circuitviz.models.errors import ModelLoadError

DAMAGED = {
    "not JSON": ('{"model_type": "qwen3", "hidden_size": 32,', "is not JSON"),
    "a list": ("[]", "holds list where a JSON object belongs"),
    "no model type": (json.dumps({"hidden_size": 8}), "names no model type"),
    "a size beyond any model's": (
        json.dumps({"model_type": "llama", "hidden_size": 10**15}),
        "beyond any model's",
    ),
}


@pytest.mark.parametrize("case", list(DAMAGED))
def test_a_damaged_config_names_the_way_out(tmp_path, case):
    text, what = DAMAGED[case]
    (tmp_path / "config.json").write_text(text, encoding="utf-8")
    with pytest.raises(ModelLoadError) as raised:
        from_pretrained_checked(tmp_path)
    message = str(raised.value)
    assert what in message
    assert message.endswith("; use the config.json of the model's release.")
    assert_one_sentence(message)
