"""The app's one state, its inputs' sentences and its honest numbers, through AppTest on a tiny
random model and on the pieces themselves (issue 25).

State: settings kept per method across pages and in the URL, a later result (ACC++ on Signals)
leaving the shared budget alone, runs in flight found by any session, Compare's and Paraphrases'
URLs. Inputs: every budgets problem named, the missing leading space offered as a fix, a
corrupted prompt equal to the prompt refused, right-to-left tokens isolated. Numbers: progress
through the parts of a run's work, the family's and the stored scores' pricing, the opening view,
the curve's ticks, gaps and clipped-NDF note.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from explore_session import LINK  # noqa: E402
from graph_data import graph_data  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

from circuitviz import render  # noqa: E402
from circuitviz.bench.toy_models import IOI_TASK, tiny_app_model  # noqa: E402
from circuitviz.ui import bon  # noqa: E402

TIMEOUT = 300
BASE = dict(LINK)  # the tiny IOI task's link (explore_session)


pytestmark = pytest.mark.usefixtures("tiny_app")  # the tiny model; results under tmp_path (conftest)
_tiny_loader = tiny_app_model


def _app(**query) -> AppTest:
    at = AppTest.from_file("../app.py", default_timeout=TIMEOUT)
    for name, value in {**BASE, **query}.items():
        at.query_params[name] = value
    return at


def _click(at: AppTest, label: str) -> AppTest:
    next(b for b in at.button if b.label == label).click()
    return at.run()


# ----- one state ---------------------------------------------------------------------------------
def test_method_settings_survive_a_page_switch_and_live_in_the_url():
    at = _app(method="eap-ig").run()
    at.number_input(key="method.eap-ig.ig_steps").set_value(7).run()
    at.switch_page("pages/steer.py").run()
    at.switch_page("pages/explore.py").run()
    assert not at.exception, at.exception
    assert at.number_input(key="method.eap-ig.ig_steps").value == 7
    assert '"ig_steps": 7' in at.query_params["settings"]
    # another method and back: each keeps its own settings
    at.selectbox(key="w.method").set_value("eap").run()
    at.selectbox(key="w.method").set_value("eap-ig").run()
    assert at.number_input(key="method.eap-ig.ig_steps").value == 7


def test_a_links_setting_its_method_does_not_have_is_named_once():
    """A link's settings with a name the method does not have ('ig_step' for 'ig_steps', or the
    tampered 'zzz') ran unsaid with the default: the form names it, once, and only for the link's
    own method (another method's fields carried over on a switch are no link's mistake)."""
    at = _app(method="eap-ig", settings='{"ig_step": 50, "ig_steps": 7}').run()
    said = [w.value.replace("\\", "") for w in at.warning if "does not have" in w.value]
    assert len(said) == 1 and "name a setting EAP-IG (inputs) does not have, left out: 'ig_step'." in said[0]
    assert at.number_input(key="method.eap-ig.ig_steps").value == 7
    at.number_input(key="method.eap-ig.ig_steps").set_value(8).run()  # a rerun: said once
    assert not any("does not have" in w.value for w in at.warning)
    at.selectbox(key="w.method").set_value("eap").run()  # eap-ig's ig_steps is not eap's: no notice
    assert not any("does not have" in w.value for w in at.warning)
    clean = _app(method="eap-ig", settings='{"ig_steps": 7}').run()
    assert not any("does not have" in w.value for w in clean.warning)
    signals = _app(acc_settings='{"k": 2.0, "zzz": 1}')
    signals.switch_page("pages/signals.py").run()
    assert any("does not have, left out: 'zzz'" in w.value.replace("\\", "") for w in signals.warning)


def test_acc_on_signals_leaves_the_shared_budget_alone():
    at = _click(_app(method="eap").run(), "Run")
    at.select_slider(key="w.budget").set_value(20).run()
    at.switch_page("pages/signals.py").run()
    at = _click(at, "Run ACC++")
    assert not at.exception, at.exception
    assert "acc++" in at.session_state["results"]
    assert at.session_state["budget"] == 20
    at.switch_page("pages/explore.py").run()
    assert at.select_slider(key="w.budget").value == 20


def test_the_budget_survives_a_comparison_run():
    """Compare's slider has the same key and another label: Explore's slider still shows the shared budget."""
    at = _click(_app(method="eap-ig").run(), "Run")
    at.select_slider(key="w.budget").set_value(10).run()
    at.switch_page("pages/compare.py").run()
    at.multiselect(key="compare.methods").set_value(["eap", "eap-ig"]).run()
    at.button(key="compare.run").click().run()
    assert at.select_slider(key="w.budget").value == 10
    at.switch_page("pages/explore.py").run()
    assert at.select_slider(key="w.budget").value == 10 == at.session_state["budget"]


def test_a_run_in_flight_is_found_by_any_session():
    """The registry is the process's: a run started by one session (a page later reloaded) is
    found by the request's key from another, while it goes on and not after."""
    from circuitviz.ui import run

    release = threading.Event()
    job = run.Job("request-key", "eap", run.RunProgress({"work": 1.0}))
    job.thread = threading.Thread(target=release.wait, daemon=True)
    job.thread.start()
    run._register(job)
    assert run.running("request-key") and not run.running("another request")
    release.set()
    job.thread.join()
    assert not run.running("request-key")


def test_compare_url_restores_its_methods_and_results():
    at = _app(compare="eap,eap-ig").run()
    at.switch_page("pages/compare.py").run()
    assert at.multiselect(key="compare.methods").value == ["eap", "eap-ig"]
    at.button(key="compare.run").click().run()
    assert not at.exception, at.exception
    assert at.query_params["compare"] == "eap,eap-ig"
    again = _app(compare="eap,eap-ig", budget=str(at.session_state["budget"])).run()  # a new browser
    again.switch_page("pages/compare.py").run()
    assert not again.exception, again.exception
    assert len(graph_data(again)) == 2, "the stored results were not shown"


def test_a_links_unknown_values_are_named_short():
    from circuitviz.ui.inputs import unknown_in_link_sentence

    long = unknown_in_link_sentence("model", ["a" * 3000], "the embedded model is loaded instead")
    assert "(3,000 characters)" in long.replace("\\", "") and len(long) < 200  # it quoted all 3,000 before
    many = unknown_in_link_sentence("method", [f"m{i}" for i in range(20)], "the others are compared")
    assert "20 methods" in many and "'m7' and 12 more" in many and "m8" not in many


def test_a_link_naming_methods_this_app_lacks_says_so_once():
    """Explore and Compare drop a method the app does not have (a typo, another version's link)
    with one sentence naming it, escaped; the next run says nothing more."""
    at = _app(method="nonsense").run()
    assert not at.exception, at.exception
    said = [w.value for w in at.warning if "does not have" in w.value]
    assert said == ["The link names a method this app does not have ('nonsense'): EAP-IG (inputs) "
                    "is chosen instead (the box below)."], said  # fmt: skip
    assert at.selectbox(key="w.method").value == "eap-ig"
    at.run()
    assert not [w for w in at.warning if "does not have" in w.value]
    at = _app(metric="xyz", device="tpu").run()
    assert not at.exception, at.exception
    said = sorted(w.value for w in at.warning if "does not have" in w.value)
    assert len(said) == 2 and "a device" in said[0] and "'tpu'" in said[0], said
    assert "a metric" in said[1] and "'xyz'" in said[1] and "logit_diff is used" in said[1], said
    assert (at.session_state["metric"], at.session_state["device"]) == ("logit_diff", "auto")
    at = _app(model="no such model").run()
    assert not at.exception, at.exception
    said = [w.value for w in at.warning if "does not have" in w.value]
    assert len(said) == 1 and "a model" in said[0] and "'no such model'" in said[0], said
    at = _app(method="eap-ig", settings='{"ig_steps": "x", "positions": 1}').run()  # raised before
    assert not at.exception, at.exception
    said = [w.value for w in at.warning if "the form cannot show" in w.value]
    assert len(said) == 1 and "2 values" in said[0] and "ig steps" in said[0], said
    assert 'ig steps "x" (now 20)' in said[0].replace("\\", ""), said  # as the link wrote it, JSON
    at = _app(method="eap-ig", settings=json.dumps({"ig_steps": "7" * 3000})).run()
    said = [w.value for w in at.warning if "the form cannot show" in w.value]
    assert len(said) == 1 and "(3,002 characters)" in said[0].replace("\\", "") and len(said[0]) < 300, said
    assert at.number_input(key="method.eap-ig.ig_steps").value == 20
    at = _app(compare="eap,eap-ig", method="eap-ig", settings='{"ig_steps": 0}').run()  # raised before
    at.switch_page("pages/compare.py").run()
    assert not at.exception, at.exception
    said = [e.value for e in at.error if "left out of this comparison" in e.value]
    assert len(said) == 1 and said[0].startswith("EAP-IG (inputs): ig\\_steps must be"), said
    assert at.button(key="compare.run").disabled  # one method left: nothing to compare
    at = _app(budget="abc", settings="{bad").run()  # values that do not read as their kind
    assert not at.exception, at.exception
    said = sorted(w.value for w in at.warning if "is left out, and the page uses its own" in w.value)
    assert len(said) == 2 and "budget 'abc' is not a whole number" in said[0], said
    assert "not a JSON object of settings" in said[1], said
    for budget in ("-7", "0", "9" * 23):  # were used silently: the slider's nearest option to them
        at = _app(budget=budget).run()
        said = [w.value for w in at.warning if "is left out, and the page uses its own" in w.value]
        assert len(said) == 1 and "is not a whole number from 1 to 1,000,000,000" in said[0], (budget, said)
    at = _app(bon_method="eap").run()  # the app's method, not one the Paraphrases page runs
    at.switch_page("pages/paraphrases.py").run()
    assert not at.exception, at.exception
    said = [w.value for w in at.warning if "which this page does not run" in w.value]
    assert len(said) == 1 and said[0].startswith("The link names EAP, which"), said
    at = _app(compare="eap,nonsense,<b>x</b>").run()
    at.switch_page("pages/compare.py").run()
    assert not at.exception, at.exception
    said = [w.value for w in at.warning if "does not have" in w.value]
    assert len(said) == 1 and "2 methods" in said[0] and "nonsense" in said[0], said
    assert "\\<b\\>x\\</b\\>" in said[0]  # the link's text escaped, shown as typed
    assert at.multiselect(key="compare.methods").value == ["eap"]
    at.run()
    assert not [w for w in at.warning if "does not have" in w.value]


def test_a_link_that_gives_a_parameter_twice_or_a_demo_switch_of_another_value_says_so():
    """``?prompt=a&prompt=b`` opened 'b' and ``?demo=yes`` opened without demo mode, each unsaid
    (an audit's, 2026-12-06): a repeated parameter names its values and the one used; the switch
    takes 1 or 0 and names any other value."""
    from circuitviz.ui.link_values import SWITCH, repeated_link_value, unreadable_link_value

    at = _app(method=["eap", "acdc"], budget=["50", "50"], demo="yes").run()
    assert not at.exception, at.exception
    warned = [w.value for w in at.warning]
    said = repeated_link_value("method", ["eap", "acdc"])
    assert said in warned and "The link gives method 2 times" in said and "the last, 'acdc', is used" in said
    assert at.session_state["method"] == "acdc"
    assert not [w for w in warned if "gives budget" in w]  # the same value twice: nothing lost
    assert unreadable_link_value("demo", SWITCH, "yes") in warned
    assert repeated_link_value("prompt", ["x"] * 6 + ["y"]).count("'x'") == 4  # the first four named
    assert not [w for w in _app(demo="0").run().warning.values if "demo" in w]


def test_the_users_text_in_a_problem_is_shown_as_typed():
    """A problem sentence quotes what was typed (or what a link held): its markdown is shown as
    typed, never a link or bold (it rendered as both)."""
    from circuitviz.core.text import markdown_text

    typed = "[a](https:example.com) **b**"
    at = _app(answer=typed, budgets="[q](https:example.com)").run()
    assert not at.exception, at.exception
    errors = [e.value for e in at.error]
    for quoted in (f"The answer {typed!r}", "The budgets box item '[q](https:example.com)'"):
        assert any(markdown_text(quoted) in error for error in errors), (quoted, errors)


def test_a_problems_own_command_stays_code_and_the_users_text_stays_as_typed():
    """A sentence's code span (a command) is kept as code, everything else escaped; where the
    backticks do not pair up plainly (a typed name holding one) the whole sentence is escaped."""
    from circuitviz.core.text import markdown_sentence, markdown_text

    sentence = "[x](https:e.com) holds nothing; run `circuitviz batch --out **y**` first."
    assert markdown_sentence(sentence) == (
        r"\[x\]\(https\:e\.com\) holds nothing; run `circuitviz batch --out **y**` first\."
    )
    for odd in ("a`b holds nothing; run `pip install a` first.", "a ``b`` c", "a ` ` b"):
        assert markdown_sentence(odd) == markdown_text(odd)
    assert markdown_sentence("no code [here]") == markdown_text("no code [here]")


def test_an_address_in_the_users_text_is_code_never_a_live_link():
    """Markdown links a bare http(s)://, www. or e-mail address after parsing, escaped or not (seen
    in Chromium: a crafted link's method name became a clickable link in the warning): such an
    address is shown as code, as typed, whatever backticks it holds; the rest is escaped."""
    from circuitviz.core.text import markdown_sentence, markdown_text

    text = "see http://evil.example/x, WWW.evil.example and me@evil.example [y](z)"
    assert markdown_text(text) == (
        r"see `http://evil.example/x,` `WWW.evil.example` and `me@evil.example` \[y\]\(z\)"
    )
    assert markdown_text("a http://x`y``z") == "a ```http://x`y``z```"  # a fence longer than any run
    assert markdown_text("www.e.com`") == "`` www.e.com` ``"  # padded: a fence may not touch a backtick
    assert (
        markdown_sentence("run `circuitviz --model http://x` first")
        == "run `circuitviz --model http://x` first"
    )
    for safe in ("1.5 http", "a@b", "www", "http:/x"):
        assert "`" not in markdown_text(safe)


def test_paraphrases_url_names_its_view_before_any_run():
    at = _app().run()
    at.switch_page("pages/paraphrases.py").run()
    assert not at.exception, at.exception
    for parameter in ("prompt", "bon_method", "bon_budgets", "bon_settings"):
        assert at.query_params.get(parameter), parameter
    # what the page starts at, read from its defaults, and no time of its own beside the estimate's
    note = next(c.value for c in at.caption if c.value.startswith("This page starts at"))
    assert "5 IG steps per pair" in note and "9 paraphrases" in note and "minute" not in note


# ----- inputs ------------------------------------------------------------------------------------
def test_every_budgets_problem_is_named():
    from circuitviz.ui.budget_box import budget_check

    problems, notes = budget_check("abc,-5,99999999", 1000)
    assert len(problems) == 2 and "'abc'" in problems[0] and "-5" in problems[1]
    assert "use 1 or more" in problems[1]  # never 0, which the app refuses in the next sentence
    assert len(notes) == 1 and "99,999,999" in notes[0] and "1,000" in notes[0]
    assert budget_check("10,20", 1000) == ([], [])
    at = _app(method="eap", budgets="abc,-5,99999999").run()
    shown = [e.value for e in at.error]
    assert any("'abc'" in text for text in shown) and any("-5" in text for text in shown)
    assert any("99,999,999" in w.value for w in at.warning)
    assert next(b for b in at.button if b.label == "Run").disabled


def test_another_models_untouched_default_budgets_become_this_models():
    """Gemma's default budgets end at its 10,342 edges; left on a model of another size (the
    sidebar switched) they would leave that graph's whole-model point out of the curve, so while
    the box holds the default it was last given it follows the model; budgets the user wrote (or
    a link carried) stay as written."""
    from circuitviz.ui.budget_box import READABLE_BUDGET, budgets_for_graph, budgets_text, default_budgets

    gemma = budgets_text(default_budgets(10_342))
    assert gemma == "20,50,100,200,500,1000,2000,5000,10000,10342"
    smollm2 = budgets_for_graph(gemma, 123_211, placed=gemma)
    assert smollm2 == budgets_text(default_budgets(123_211)) and smollm2.endswith(",100000,123211")
    # every graph's defaults hold the readable sizes a first view opens at, ten at most
    assert READABLE_BUDGET == render.READABLE_EDGES
    for n_edges in (300, 10_342, 123_211, 2_000_000, 10**8):
        budgets = default_budgets(n_edges)
        assert {20, 50, 100, 200} <= set(budgets) and budgets[-1] == n_edges, budgets
        assert len(budgets) <= 10 and budgets == sorted(set(budgets))
    assert default_budgets(46) == [10, 20, 46] and default_budgets(5) == [5]
    assert budgets_for_graph(smollm2, 10_342, placed=smollm2) == gemma  # and back
    assert budgets_for_graph("", 500, placed=None) == budgets_text(default_budgets(500))
    for written in ("20,50,10342", "10,20", "abc", "10,20,50,100,200,500,1000"):
        assert budgets_for_graph(written, 123_211, placed="20,50") == written
    # a link's text is another real graph's default exactly: it follows the model too
    assert budgets_for_graph(gemma, 123_211, placed=None) == smollm2
    paraphrase_defaults = budgets_text(bon.page_budgets(10_342))
    moved = budgets_for_graph(paraphrase_defaults, 777, paraphrase_defaults, bon.page_budgets)
    assert moved == budgets_text(bon.page_budgets(777))
    # on the page, a model switch: the box holds the last model's untouched default
    at = _app(method="eap", budgets="").run()
    box = next(t for t in at.text_input if t.label.startswith("edge budgets"))
    total = int(box.value.rsplit(",", 1)[-1])  # the tiny model's whole graph
    assert total < 10_342
    assert box.value == budgets_text(default_budgets(total)) == at.session_state["budgets.default"]
    at.session_state["budgets"] = at.session_state["budgets.default"] = gemma
    at.run()
    box = next(t for t in at.text_input if t.label.startswith("edge budgets"))
    assert box.value == budgets_text(default_budgets(total)), box.value
    box.set_value("20,50,10342").run()  # the user's own budgets survive a rerun
    assert next(t for t in at.text_input if t.label.startswith("edge budgets")).value == "20,50,10342"


def test_a_word_without_the_models_leading_space_is_offered_the_fix(monkeypatch):
    import circuitviz.ui.loaders as loaders
    from circuitviz.ui.inputs import missing_space

    model = _tiny_loader("", "")
    assert missing_space(model, "Mary", {" Mary": 0.3}) == " Mary"
    assert missing_space(model, " Mary", {" Mary": 0.3}) is None
    assert missing_space(model, "Mary", {"Mary": 0.2, " Mary": 0.3}) is None  # both likely: the user's choice
    monkeypatch.setattr(loaders, "next_tokens", lambda *args, **kwargs: [(" Mary", 0.3), (" John", 0.2)])
    at = _app(method="eap").run()
    at.text_input(key="w.answer").set_value("Mary").run()
    assert any("' Mary' with a leading space (30.0%)" in w.value.replace("\\", "") for w in at.warning)
    at = _click(at, "Use ' Mary'")
    assert not at.exception, at.exception
    assert at.text_input(key="w.answer").value == " Mary" and not at.warning


def test_a_foil_without_its_space_is_flagged_when_neither_token_is_among_the_likely_ones(monkeypatch):
    """A foil typed 'was' after 'The keys to the old wooden cabinet' ran unsaid as the token 'was'
    (the logit difference against a token the model hardly writes there, +12.5): the hint looked
    only among the 8 likely next tokens, where neither 'was' nor ' was' is. It weighs both now."""
    import circuitviz.entry.spaces as spaces
    import circuitviz.ui.loaders as loaders

    monkeypatch.setattr(loaders, "next_tokens", lambda *args, **kwargs: [(" Mary", 0.3), (" the", 0.2)])
    # the tiny model's tokenizer splits on white space ('John' is ' John'): a real one's rule stands in
    monkeypatch.setattr(spaces, "takes_space", lambda model, prompt, token: token == "John")
    chances = {" John": 0.004, "John": 0.00001}
    # any other token asked (the answer's own, read 'Mary' by the tiny tokenizer): 0
    monkeypatch.setattr(
        loaders, "token_probability", lambda m, i, p, token: (chances.get(token, 0.0), " Mary", 0.3)
    )
    at = _app(method="eap").run()
    at.text_input(key="w.foil").set_value("John").run()
    assert any("' John' with a leading space (0.4%)" in w.value.replace("\\", "") for w in at.warning)
    at = _click(at, "Use ' John'")
    assert not at.exception, at.exception
    assert at.text_input(key="w.foil").value == " John"
    chances.update({" John": 0.00001, "John": 0.004})  # the word alone the likelier: the user's choice
    at.text_input(key="w.foil").set_value("John").run()
    assert not any("leading space" in w.value for w in at.warning)


def test_a_foil_outside_the_likely_tokens_gets_its_chance_under_its_box(monkeypatch):
    """The line under the foil box gave the model's chance of the foil only when the foil was among
    the 8 likely next tokens; a foil outside them (the usual case for a typed one) showed none. It
    reads the chance from the prompt's kept run now, as the answer's warning does."""
    import circuitviz.entry.spaces as spaces
    import circuitviz.ui.loaders as loaders

    monkeypatch.setattr(loaders, "next_tokens", lambda *args, **kwargs: [(" Mary", 0.3), (" the", 0.2)])
    monkeypatch.setattr(spaces, "takes_space", lambda model, prompt, token: False)
    monkeypatch.setattr(loaders, "token_probability", lambda m, i, p, token: (0.004, " Mary", 0.3))
    at = _app(method="eap").run()
    at.text_input(key="w.foil").set_value("John").run()
    assert not at.exception, at.exception
    assert any("the token:" in m.value and "the model gives it 0.4%" in m.value for m in at.markdown)


def test_a_corrupted_prompt_equal_to_the_prompt_is_refused_before_run():
    at = _app(method="eap", corrupted=IOI_TASK.clean).run()
    assert any("is the prompt itself" in e.value for e in at.error)
    assert next(b for b in at.button if b.label == "Run").disabled


@pytest.mark.parametrize("page", ["pages/explore.py", "pages/compare.py"])
def test_a_url_with_only_the_answer_gets_a_proposed_foil_and_corrupted_prompt(page):
    """A link with the prompt and answer alone (no foil, no corrupted prompt) opened the page on
    a traceback (the corrupted box read None): the rest is proposed for that answer."""
    at = AppTest.from_file("../app.py", default_timeout=TIMEOUT)
    at.query_params["prompt"], at.query_params["answer"] = IOI_TASK.clean, " Mary"
    at.switch_page(page).run()
    assert not at.exception, at.exception
    corrupted = at.text_area(key="w.corrupted").value
    assert corrupted and corrupted != IOI_TASK.clean
    assert at.text_input(key="w.answer").value == " Mary"  # what the link gave is kept
    # the IOI prompt's other name, as the tiny model's word-level tokenizer has it (no space)
    assert at.text_input(key="w.foil").value == "John"
    assert any("template" in c.value for c in at.caption)  # the corrupted prompt says where it came from


def test_a_url_with_a_corrupted_prompt_and_no_answer_keeps_it():
    """The corrupted prompt a link gives is kept (a missing answer proposed all three, the link's
    corrupted prompt replaced without a word)."""
    at = AppTest.from_file("../app.py", default_timeout=TIMEOUT)
    given = "When Carl and Alice went to the store , Bob gave a drink to"  # not the template's own
    at.query_params["prompt"], at.query_params["corrupted"] = IOI_TASK.clean, given
    at.run()
    assert not at.exception, at.exception
    assert at.text_area(key="w.corrupted").value == given
    assert at.text_input(key="w.answer").value  # proposed: the model's own likely token
    assert at.text_input(key="w.foil").value


def test_a_url_with_its_corrupted_prompt_keeps_it_and_gets_a_foil():
    at = AppTest.from_file("../app.py", default_timeout=TIMEOUT)
    given = "When Alice and Bob went to the store , Carl gave a drink to"
    for name, value in {"prompt": IOI_TASK.clean, "answer": " Mary", "corrupted": given}.items():
        at.query_params[name] = value
    at.run()
    assert not at.exception, at.exception
    assert at.text_area(key="w.corrupted").value == given
    assert at.text_input(key="w.foil").value == "John"  # the word-level tokenizer's token


def test_right_to_left_tokens_keep_their_order():
    from circuitviz.core.text import token_label

    strip = render.token_strip_html(["a", " مدينة", "b"])
    assert strip.startswith('<span dir="ltr" style="unicode-bidi:isolate">')
    assert strip.count('dir="auto"') == 3 and strip.count("unicode-bidi:isolate") == 4
    assert strip.index("a<") < strip.index("مدينة") < strip.index("b<")
    assert token_label(" مدينة") == "\u2068' مدينة'\u2069"


# ----- honest numbers ------------------------------------------------------------------------------
class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_a_first_part_at_100_percent_does_not_finish_the_work():
    """Edge Pruning reports its warm start's scoring (to 100 %), then its masks: before its parts
    are known the bar follows the clock, not the first part's 100 %."""
    from circuitviz.ui.run import RunProgress

    clock = Clock()
    progress = RunProgress({"prepare": 1.0, "work": 30.0, "evaluate": 2.0}, clock=clock)
    seen = []
    for t, report in [(1.5, ("score", 0.5)), (4.0, ("score", 1.0)), (6.0, ("learning masks", 0.1))]:
        clock.now = t
        progress.report(*report)
        seen.append(progress.update()[0])
    for t in (10.0, 20.0, 28.0, 40.0):
        clock.now = t
        seen.append(progress.update()[0])
    assert seen[1] < 0.2, seen  # not "97 %" once the warm start is done
    assert seen == sorted(seen) and len(set(seen)) == len(seen)  # moves at every look
    assert seen[-1] < 0.99
    assert "learning masks (10%)" in progress.update()[1]


def test_a_part_that_has_reported_nothing_done_shows_no_percentage():
    """EAP-IG's steps on a CPU run as one chunk, reporting 0 at its start and 1 at its end: the
    line names the part and leaves out a "0%" that stays on screen the whole scoring."""
    from circuitviz.ui.run import RunProgress

    clock = Clock()
    progress = RunProgress({"prepare": 1.0, "work": 10.0, "evaluate": 2.0}, clock=clock)
    clock.now = 1.0
    progress.report("score", 0.0)
    clock.now = 6.0
    text = progress.update()[1]
    assert "step 2 of 3, scoring edges · " in text and "%)" not in text, text
    progress.report("score", 0.5)
    assert "scoring edges (50%)" in progress.update()[1]


def test_known_parts_map_their_reports_into_the_work():
    from circuitviz.ui.run import RunProgress, work_parts

    parts = work_parts(
        [("score", 1.0, 3.0), ("learning masks", 0.5, 10.0), ("learning masks", 1.0, 21.0)], 1.0
    )
    assert parts == {"score": 2.0, "learning masks": 18.0}
    shares = {name: value / 20.0 for name, value in parts.items()}
    clock = Clock()
    progress = RunProgress({"prepare": 1.0, "work": 20.0, "evaluate": 1.0}, clock=clock, parts=shares)
    clock.now = 1.0
    progress.report("score", 1.0)
    progress.report("learning masks", 0.5)
    fraction, _ = progress.update()
    assert fraction == pytest.approx((1.0 + 20.0 * (0.1 + 0.9 * 0.5)) / 22.0)


def test_edge_pruning_is_priced_from_paraphrase_pruning_until_it_has_runs_of_its_own():
    """The two run one learning loop: Edge Pruning's first estimate on the embedded model came
    from every method's median rate, 2.3x its run (2026-12-06)."""
    from circuitviz.entry import calibration
    from circuitviz.entry.limits import estimate_run

    model = _tiny_loader("", "")
    first = estimate_run(model, "paraphrase-pruning", None, n_tokens=15, n_budgets=4)
    calibration.record("cpu", "eap", 1e9, 1.0)  # another method's, ten times faster
    calibration.record("cpu", "paraphrase-pruning", first.flops, 10.0)
    edge = estimate_run(model, "edge-pruning", None, n_tokens=15, n_budgets=4)
    assert "of paraphrase-pruning" in edge.priced and "same passes" in edge.priced
    assert edge.seconds == pytest.approx(edge.flops / (first.flops / 10.0))
    calibration.record("cpu", "edge-pruning", edge.flops, 2.0)
    assert "1 edge-pruning run" in estimate_run(model, "edge-pruning", None, n_tokens=15, n_budgets=4).priced


def test_a_variant_is_priced_from_its_family_and_without_stored_scores(monkeypatch):
    from circuitviz.entry import calibration
    from circuitviz.entry.limits import estimate_run, priced_with_stored_work
    from circuitviz.methods import bon

    model = _tiny_loader("", "")
    settings = {"n_paraphrases": 3, "ig_steps": 2, "compare": False}
    first = estimate_run(model, "bon", settings, n_tokens=15, n_budgets=4)
    timings = {"clean_corrupted_s": 0.5, "paraphrases_s": 1.5, "scoring_s": 6.0, "evaluation_s": 2.0}
    calibration.record("cpu", "bon", first.flops, 10.0, timings=timings)
    ibon = estimate_run(model, "ibon", settings, n_tokens=15, n_budgets=4)
    assert "priced from 1 run of bon (the same passes as this method)" in ibon.priced
    assert ibon.seconds == pytest.approx(ibon.flops / (first.flops / 10.0))
    monkeypatch.setattr(bon, "stored_pairs", lambda *args: (True, True))
    monkeypatch.setattr(bon, "stored_share", lambda *args: (4, 4))  # bon's run kept its 4 pairs' scores
    priced = priced_with_stored_work(ibon, model, "tiny", IOI_TASK, "ibon", settings, 4, store=object())
    stored = (6.0 + 2.0 * (2 * 4 * 4) / (2 * 4 * 4 + 4)) / 10.0  # scoring, and the candidates' evaluations
    assert priced.seconds == pytest.approx(ibon.seconds * (1 - stored))
    assert priced.flops == pytest.approx(ibon.flops * (1 - stored)) and "stored" in priced.priced
    assert priced_with_stored_work(ibon, model, "tiny", IOI_TASK, "eap", settings, 4, object()) is ibon


def test_the_first_view_opens_where_it_can_be_read():
    from opening_check import check_opening

    def point(budget, n_edges, ndf):
        return {"budget": budget, "n_edges": n_edges, "ndf": ndf}

    # the curve (the Eiffel Tower with EAP-IG): no readable circuit reaches 0.8, so the
    # most faithful of at most 200 edges, 186 edges at NDF 0.73, not 50 edges at 0.19
    curve = [
        point(10, 8, 0.14),
        point(20, 9, 0.289),
        point(50, 33, 0.19),
        point(100, 86, 0.46),
        point(200, 186, 0.734),
        point(300, 277, 0.84),
        point(5000, 4800, 0.93),
    ]
    view = render.opening_view(curve)
    assert view.budget == 200 and not view.faithful
    assert "277 edges, too many to read" in view.reason and "186 edges (budget 200)" in view.reason
    assert "NDF 0.73" in view.reason
    check_opening(curve, view)
    # a small faithful one: the smallest reaching 0.8
    small = [point(10, 9, 0.5), point(100, 90, 0.85), point(200, 180, 0.9)]
    view = render.opening_view(small)
    assert view.budget == 100 and view.faithful and "90 edges (budget 100)" in view.reason
    check_opening(small, view)
    # none faithful anywhere; ties go to the smaller circuit; an empty circuit is not read
    flat = [point(10, 0, 0.0), point(20, 12, 0.2), point(50, 40, 0.2), point(900, 800, 0.5)]
    view = render.opening_view(flat)
    assert view.budget == 20 and "none of the budgets run does, up to 800 edges" in view.reason
    check_opening(flat, view)
    # every readable budget pruned to nothing (ACC++ on a factual prompt): the first circuit drawn
    empty = [
        point(20, 0, 0.0),
        point(100, 0, 0.0),
        point(200, 0, 0.0),
        point(500, 500, 0.1),
        point(1000, 1000, 0.31),
    ]
    view = render.opening_view(empty)
    assert view.budget == 500 and "the budgets up to 200 keep no edge" in view.reason
    check_opening(empty, view)
    # the false sentence is caught: 33 edges at NDF 0.19 called the most faithful readable
    lie = (
        "No circuit of at most 200 edges reaches NDF 0.8 (the smallest that does keeps 277 edges, too "
        "many to read); opened at 33 edges (budget 50), the most faithful circuit of at most 200 edges "
        "(NDF 0.19)."
    )
    with pytest.raises(AssertionError, match="more faithful"):
        check_opening(curve, render.OpeningView(50, lie))


def test_the_curve_reads_10_100_1k_and_breaks_at_missing_budgets():
    def point(budget, ndf):
        return {"budget": budget, "n_edges": budget, "ndf": ndf, "nfs": ndf, "metric": ndf}

    main = [point(b, 0.1 * i) for i, b in enumerate((10, 50, 200, 1000, 5000))]
    partial = [point(10, 0.2), point(1000, 0.5)]
    figure = render.curve_figure({"ibon": main, "bon": partial}, 10_000, current_budget=10, marker_value=0.9)
    # every budget with a point ticked, 100 between 50 and 200 (10k lies beyond the last, 5,000), and
    # since 2026-12-07 the 1-2-5 ticks that fill a gap wider than the 552 px plot's rule (20, 500, 2k)
    assert list(figure.layout.xaxis.ticktext) == ["10", "20", "50", "100", "200", "500", "1k", "2k", "5k"]
    bon_trace = figure.data[1]
    assert list(bon_trace.x) == [10, None, None, 1000]  # no line straight from 10 to 1,000
    assert figure.layout.yaxis.title.text == "NDF (clipped at 0)"
    marker = figure.data[-1]
    assert marker.cliponaxis is False and marker.textposition == "bottom right"  # inside, at the left edge
    # off a rising curve: below it on the right, above it on the left, inside the floor and ceiling
    for budget, value, where in ((200, 0.41, "bottom right"), (10, 0.05, "top right"),
                                 (2000, 0.5, "top left"), (5000, 0.95, "bottom left")):  # fmt: skip
        shown = render.curve_figure({"ibon": main}, 10_000, current_budget=budget, marker_value=value)
        assert shown.data[-1].textposition == where, (budget, value)
    # at a dip the line falls away from the marker: its label goes above the line on the right
    # ('0.22 at 20' sat on the falling line at 1,000 px) and below it on the left; at the V's
    # floor, where the line rises steeply after the marker, above-right sat on the rising line
    # ('0.00 at 200' of EAP-IG's default run), and above-left touched the line falling into 100 at
    # 1,000 px: the label is lifted off the marker, on a white ground (tests/test_downloads_names.py)
    dip = [
        point(20, 0.22),
        point(50, 0.11),
        point(100, 0.0),
        point(200, 0.0),
        point(500, 0.6),
        point(10_000, 1.0),
    ]
    for budget, value, where in ((20, 0.22, "top right"), (200, 0.0, None), (500, 0.6, "top left")):
        shown = render.curve_figure({"eap-ig": dip}, 10_000, current_budget=budget, marker_value=value)
        assert shown.data[-1].textposition == where, (budget, value)
        assert len(shown.layout.annotations) == (where is None), (budget, value)
    falling_in = [point(20, 0.9), point(1000, 0.5), point(5000, 0.6)]
    shown = render.curve_figure({"eap-ig": falling_in}, 10_000, current_budget=1000, marker_value=0.5)
    assert shown.data[-1].textposition == "bottom left"
    # budgets within one power of ten (20 to 200 showed a single tick, '100'): each budget ticks
    narrow = render.curve_figure({"eap": [point(b, 0.5) for b in (20, 50, 103, 200)]}, 10_000)
    assert list(narrow.layout.xaxis.ticktext) == ["20", "50", "103", "200"]
    assert list(narrow.layout.xaxis.tickvals) == [20, 50, 103, 200]
    many = render.log_ticks([20 + 20 * i for i in range(12)])  # 20 to 240: its ends and 100
    assert many["ticktext"] == ["20", "100", "240"]


def test_steer_shows_a_nodes_part_of_a_feature_in_percent():
    from circuitviz.ui.steer import SHARE, feature_rows, share_percent

    feature = {"feature": 3, "label": "L2/3: names", "share": 314.329, "activation": 500.0, "token": " Mary"}
    assert share_percent(feature) == pytest.approx(62.9)
    rows = feature_rows({"a1.h0": {"sae": "s", "sae_layer": 2, "features": [feature]}})
    assert rows[0][SHARE] == pytest.approx(62.9)


def test_the_paraphrase_table_says_what_each_corruption_replaces():
    from circuitviz.ui.bon import replaced_words

    assert replaced_words("When Mary and John left", "When Alice and Bob left") == "Mary → Alice, John → Bob"
    assert replaced_words("a b", "a b") == "nothing"
    assert replaced_words("In Japan, the currency", "In France, the currency") == "Japan → France"
    assert replaced_words("about Japan: its", "about China: its") == "Japan → China"
    assert replaced_words("(Mary) went", "(Alice) went") == "Mary → Alice"
    assert replaced_words("Mary, went", "Alice; went") == "Mary, → Alice;"  # what differs stays
    assert replaced_words("a b c", "a b") == "c dropped"  # words that differ in number: by what they share


def test_edited_paraphrases_become_one_pair_a_line_whatever_the_cells_hold():
    from circuitviz.query.pairs import ParaphraseError, paraphrase_records
    from circuitviz.ui.bon import edited_pairs_text

    before = [
        {"paraphrase": "Line one, then", "corrupted": "Other one, then", "source": "template:ioi"},
        {"paraphrase": "Gone", "corrupted": "x", "source": "template:ioi"},
        {"paraphrase": "Gone too", "corrupted": "y", "source": "template:ioi"},
        {"paraphrase": "Kept", "corrupted": "Changed", "source": "template:ioi"},
    ]
    rows = [
        {
            **before[0],
            "paraphrase": "Line one\nline two, then",
            "corrupted": "Other\tone, then",
        },  # a break, a tab
        {**before[1], "paraphrase": None},  # the paraphrase cleared: the pair is removed
        {**before[2], "paraphrase": "   "},
        dict(before[3]),
    ]
    records = paraphrase_records(edited_pairs_text(rows, before))
    assert [(r.clean, r.corrupted, r.source) for r in records] == [
        ("Line one\nline two, then", "Other\tone, then", "edited"),
        ("Kept", "Changed", "template:ioi"),  # untouched: still the template's
    ]
    cleared = edited_pairs_text([{**before[3], "corrupted": None}], before[3:])  # never the word None
    with pytest.raises(ParaphraseError, match="Line 1 has no 'corrupted' prompt"):
        paraphrase_records(cleared)
    assert edited_pairs_text([{"paraphrase": None, "corrupted": None}], before[:1]) == ""


def test_a_links_view_that_pins_a_list_drops_that_pin_and_says_so():
    """A pinned node given as a list raised TypeError (unhashable) when the view was read."""
    from circuitviz.core.graph import GraphSpec
    from circuitviz.ui.instrument import read_state

    state, problems = read_state({"pins": [["m0"], "m0", {"a": 1}]}, GraphSpec(n_layers=2, n_heads=2), set())
    assert state.pins == ["m0"]
    assert problems == ["2 pinned nodes this circuit does not have were left out."]


def test_a_links_open_edge_card_is_kept_and_its_pins_read_once():
    """A link whose view had an edge's card open ("edge:<name>", what a click on an edge keeps)
    opened in a fresh browser on "The clicked node in the link is not in this circuit" and no
    card (seen in Chromium on the Louvre's EAP-IG circuit); a pin named twice was kept twice."""
    from circuitviz.core.graph import GraphSpec
    from circuitviz.ui.instrument import read_state

    spec = GraphSpec(n_layers=2, n_heads=2)
    edge = spec.edge_names[0]
    state, problems = read_state({"clicked": f"edge:{edge}", "pins": ["m0", "m0", "zz"]}, spec, set())
    assert state.clicked == f"edge:{edge}" and state.pins == ["m0"]
    assert problems == ["1 pinned node this circuit does not have was left out."]
    state, problems = read_state({"clicked": "edge:m9->nowhere"}, spec, set())
    assert state.clicked == "" and problems == [
        "The clicked node or edge in the link is not in this circuit; no card is open."
    ]


def test_every_table_of_the_app_says_what_a_missing_figure_is():
    """A missing figure (no held-out paraphrase, a node without an SAE) shows as a dash, not the
    word None Streamlit writes by default."""
    import ast

    root = Path(__file__).resolve().parent.parent
    files = sorted((root / "pages").glob("*.py")) + sorted((root / "circuitviz" / "ui").glob("*.py"))
    calls = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) in (
                "dataframe",
                "data_editor",
            ):
                keywords = {k.arg: k.value for k in node.keywords}
                given = keywords.get("placeholder")
                calls.append((path.name, node.lineno, getattr(given, "value", None)))
    assert len(calls) >= 10
    assert [c for c in calls if c[2] not in ("—", "")] == []  # an editor's cleared cell: empty


def test_no_download_button_reruns_the_page():
    """A download's click reran the page by default, and the rerun dropped the files of the other
    buttons: in Chromium, ten downloads clicked one after another on Explore got nine, the server
    logging "Deferred file ... not found" (a download needs no rerun)."""
    import ast

    root = Path(__file__).resolve().parent.parent
    files = sorted((root / "pages").glob("*.py")) + sorted((root / "circuitviz" / "ui").glob("*.py"))
    calls = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "download_button":
                given = next((k.value for k in node.keywords if k.arg == "on_click"), None)
                calls.append((path.name, node.lineno, getattr(given, "value", None)))
    assert len(calls) >= 10
    assert [c for c in calls if c[2] != "ignore"] == []


def test_the_launcher_starts_loading_the_default_model_before_any_page():
    import circuitviz.ui.loaders as loaders
    from circuitviz.models.catalog import EMBEDDED_MODEL
    from circuitviz.ui import serve

    serve.preload()
    future = loaders.model_future(EMBEDDED_MODEL, "auto")  # what the first page asks for: the same load
    assert future.result(timeout=120) is not None
    assert loaders.model_future(EMBEDDED_MODEL, "auto") is future


# ----- the state module owns the session -----------------------------------------------------------
def test_no_module_but_the_state_module_touches_the_session():
    """Every session value goes through ``circuitviz.ui.state`` (typed fields, ``bind``,
    ``open_task``): no other module of the app indexes ``st.session_state`` or touches
    ``st.query_params`` (the URL's ``view`` and ``demo`` included: fields with their URL mirror)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    owner = root / "circuitviz" / "ui" / "state.py"
    files = [*(root / "circuitviz").rglob("*.py"), *(root / "pages").glob("*.py"), root / "app.py"]
    found = [
        f"{path.relative_to(root)}:{number}"
        for path in files
        if path != owner
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"session_state\s*(\[|\.get\(|\.setdefault\(|\.pop\()|\bst\.query_params\b", line)
    ]
    assert owner.exists() and not found, found
    from circuitviz.ui.state import VIEW_KEYS

    assert {"view", "demo"} <= set(VIEW_KEYS.values())


def test_a_result_for_other_budgets_is_said_to_be_for_earlier_inputs():
    """Explore restores the stored result of exactly this request, budgets included: a result
    run at other budgets stays on screen with the sentence that it is for earlier inputs."""
    at = _click(_app(method="eap").run(), "Run")
    assert not at.exception, at.exception
    assert not any("earlier inputs" in i.value for i in at.info)
    at.text_input(key="w.budgets").set_value("5,10,20").run()
    assert any("earlier inputs" in i.value for i in at.info)
    at.text_input(key="w.budgets").set_value("5,10,20,40").run()  # back: the very result, no sentence
    assert not any("earlier inputs" in i.value for i in at.info)
    assert at.session_state["results"]["eap"].budgets == [5, 10, 20, 40]


def test_a_gallery_example_opens_in_explore_inside_the_app():
    """Opened from another page, the task is set before any widget exists (no widget-state
    error: the model's box was drawn before the button was pressed) and Explore runs it, inside
    the app: its sidebar holds the model. (AppTest starts every run in Streamlit's older layout
    of a pages/ folder, as a fresh server does for a first visitor at a page's own URL: the page
    puts itself inside the app, ``navigation.inside_app``.)"""
    at = _app().run()
    at.switch_page("pages/gallery.py").run()
    at.button(key="gallery.rerun").click().run()
    assert not at.exception, at.exception
    assert at.title[0].value.startswith("Explore")
    (result,) = at.session_state["results"].values()  # the example's own method, rerun live
    assert at.sidebar.selectbox(key="w.model").value == result.model_id
    assert at.text_area(key="w.prompt").value == result.task.clean


def test_a_task_with_several_foils_opens_with_all_of_them():
    """An opened task keeps every foil it has (a batch's MMLU row compares the answer with three
    letters): the run's task holds them all, a note under the foil box says so, and typing another
    foil makes a task of that foil alone. Nothing is dropped silently."""
    at = _app(method="eap").run()
    foils = [" John", " Bob", " Carl"]
    at.session_state["_pending_open"] = {  # what state.open_task leaves for the next script run
        **{key: None for key in ("model", "settings", "budgets", "corrupted_note", "foil_note")},
        "task": {**{k: getattr(IOI_TASK, k) for k in ("clean", "corrupted", "answer")}, "foils": foils},
        "method": "eap",
        "run": True,
        "extra": {},
    }
    at.run()
    assert not at.exception, at.exception
    assert at.text_input(key="w.foil").value == " John"  # the box holds one: the first
    assert any("3 foils \\(' John', ' Bob', ' Carl'\\)" in c.value for c in at.caption)  # escaped
    assert at.session_state["results"]["eap"].task.foils == tuple(foils)  # the run used all three
    at.text_input(key="w.foil").set_value(" Alice").run()
    at = _click(at, "Run")
    assert not at.exception, at.exception
    assert at.session_state["results"]["eap"].task.foils == (" Alice",)
    assert not any("3 foils" in c.value for c in at.caption)


def test_an_opened_task_s_foils_are_quoted_as_written():
    """The note naming an opened task's foils (a Dataset row: an uploaded file's text) was markdown:
    between foils ' $' and ' **$' the text became LaTeX (an audit's, 2026-12-06)."""
    at = _app(method="eap").run()
    at.session_state["_pending_open"] = {
        **{key: None for key in ("model", "settings", "budgets", "corrupted_note", "foil_note")},
        "task": {
            **{k: getattr(IOI_TASK, k) for k in ("clean", "corrupted", "answer")},
            "foils": [" John", " $", " **$"],
        },
        "method": "eap",
        "run": False,
        "extra": {},
    }
    at.run()
    assert not at.exception, at.exception
    assert any("3 foils \\(' John', ' \\$', ' \\*\\*\\$'\\)" in c.value for c in at.caption)


def test_an_opened_prompt_survives_a_rerun_that_carries_the_old_one():
    """A rerun the browser asked for before it had the opened task (another click while the MMLU
    picker's "Use this question" ran) sends the boxes' old values: the opened prompt, answer and
    corrupted prompt stay. The check is one-shot: the old prompt typed back is taken."""
    at = _app(method="eap").run()
    old, old_answer = at.text_area(key="w.prompt").value, at.text_input(key="w.answer").value
    task = {"clean": "Alice and Bob went to the park. Bob gave a ball to", "answer": " Alice"}
    at.session_state["_pending_open"] = {
        **{key: None for key in ("model", "settings", "budgets", "corrupted_note", "foil_note", "method")},
        "task": {
            **task,
            "corrupted": "Alice and Bob went to the park. Carl gave a ball to",
            "foils": [" Bob"],
        },
        "run": False,
        "extra": {},
    }
    at.run()
    assert at.text_area(key="w.prompt").value == task["clean"]
    at.text_area(key="w.prompt").set_value(old)  # the stale echo of the box
    at.text_input(key="w.answer").set_value(old_answer)
    at.run()
    assert not at.exception, at.exception
    assert at.text_area(key="w.prompt").value == task["clean"]
    assert at.text_input(key="w.answer").value == task["answer"]
    assert at.session_state["prompt"] == task["clean"]
    at.text_area(key="w.prompt").set_value(old).run()  # now the user's own edit
    assert at.text_area(key="w.prompt").value == old
    assert at.session_state["prompt"] == old


def test_signals_says_when_its_result_is_for_another_task():
    at = _app().run()
    at.switch_page("pages/signals.py").run()
    at = _click(at, "Run ACC++")
    assert not at.exception, at.exception
    assert not any("earlier inputs" in i.value for i in at.info)
    at.text_input(key="w.foil").set_value(" the").run()  # another task: the result shown is the old one's
    assert not at.exception, at.exception
    assert any("earlier inputs" in i.value for i in at.info)


# ----- method knowledge lives in the registry -----------------------------------------------------
def test_no_method_name_is_spelled_in_the_app():
    """The app asks the registry's traits (fitted to the prompt, a signals view, a flat-curve
    note...) instead of comparing method names: no registered name is a literal in ui/ or pages/."""
    import re
    from pathlib import Path

    from circuitviz.methods import available_methods

    root = Path(__file__).resolve().parents[1]
    files = [*(root / "circuitviz" / "ui").rglob("*.py"), *(root / "pages").rglob("*.py"), root / "app.py"]
    names = sorted(available_methods())
    pattern = re.compile("[\"'](" + "|".join(re.escape(name) for name in names) + ")[\"']")
    found = [
        f"{path.relative_to(root)}:{number}: {line.strip()}"
        for path in files
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line)
    ]
    assert len(names) >= 8 and not found, found


def test_every_caveat_shows_beside_the_methods_figures():
    from circuitviz.core.curves import CurvePoint
    from circuitviz.methods.registry import method_traits
    from circuitviz.ui.caveats import caveats
    from circuitviz.ui.result_view import curve_notes

    class Result:
        method, details, scores = "edge-pruning", None, None
        curve = [CurvePoint(10, 8, 0.4, 0.3, 0.2), CurvePoint(20, 17, 0.9, 0.8, 0.7)]

    fitted = method_traits("edge-pruning").fitted_note
    assert fitted and caveats(Result, Result.curve[0]) == [fitted]  # on Explore, Compare, Paraphrases alike
    Result.method = "acc++"
    Result.curve = [CurvePoint(10, 8, 0.0, 0.0, 0.0), CurvePoint(20, 17, 0.6, 0.5, 0.5)]
    (zero,) = caveats(Result, Result.curve[0])
    assert zero.startswith("NDF 0.000 at this budget: ACC++'s edge scores do not estimate")
    # the curve's best is 0.5: the caveat says so, not that the curve shows where they carry it
    assert zero.endswith("none short of the whole model does: the best keeps 17 edges at NDF 0.50.")
    assert caveats(Result, Result.curve[1]) == []
    Result.curve = [CurvePoint(10, 8, 0.0, 0.0, 0.0), CurvePoint(20, 17, 0.9, 0.85, 0.85)]
    assert caveats(Result, Result.curve[0])[0].endswith("shows the budgets where they do (NDF 0.8 or more).")
    Result.graph = type("Graph", (), {"n_edges": 17})  # 17 edges are the whole model: it does not count
    assert caveats(Result, Result.curve[0])[0].endswith("the best keeps 8 edges at NDF 0.00.")
    del Result.graph
    Result.curve = [CurvePoint(10, 8, 0.0, 0.0, 0.0), CurvePoint(20, 17, 0.6, 0.5, 0.5)]
    Result.curve = [CurvePoint(10, 8, 0.0, 0.0, 0.0), CurvePoint(20, 17, 0.01, 0.0, 0.0)]
    assert caveats(Result, Result.curve[0]) == []  # a flat curve is said once, under the curve
    assert f"NDF is 0 at every budget: {method_traits('acc++').flat_curve_note}" in curve_notes(Result)
    Result.method = "eap"  # scores that estimate the metric: a zero is the figure itself
    assert caveats(Result, Result.curve[0]) == []


def test_models_live_in_streamlits_resource_cache():
    """One load per (model, device, loader), shared by every session, under Streamlit's own cache
    controls: clearing it starts a fresh load; a failed load is tried again."""
    import streamlit as st

    import circuitviz.ui.loaders as loaders

    first = loaders.model_future("tiny", "cpu")
    assert loaders.model_future("tiny", "cpu") is first and first.result(timeout=120) is not None
    st.cache_resource.clear()
    again = loaders.model_future("tiny", "cpu")
    assert again is not first and again.result(timeout=120) is not None

    class Failing:
        calls = 0

        def load(self, model_id, device):
            self.calls += 1
            raise OSError("no weights here")

    failing = Failing()
    loaders.MODEL_LOADER = failing.load  # (restored by the tiny_app fixture's monkeypatch)
    broken = loaders.model_future("tiny", "cpu")
    assert isinstance(broken.exception(timeout=60), OSError)
    tried = failing.calls
    retried = loaders.model_future("tiny", "cpu")
    assert retried is not broken and isinstance(retried.exception(timeout=60), OSError)
    assert failing.calls == tried + 1


# ----- inputs that would mislead ---------------------------------------------------------------------
def test_a_budget_of_0_is_refused_and_no_score_reads_minus_zero():
    from circuitviz.core.text import markdown_text, score_text
    from circuitviz.ui.budget_box import ZERO_BUDGET, budget_check

    assert budget_check("0,10", 1000) == ([ZERO_BUDGET], [])
    assert score_text(-0.0001) == "0.000" and score_text(-0.0006) == "-0.001" and score_text(0.25) == "0.250"
    at = _app(method="eap", budgets="0,10,20").run()
    assert markdown_text(ZERO_BUDGET) in [e.value for e in at.error]  # shown as plain text
    assert next(b for b in at.button if b.label == "Run").disabled


def test_an_answer_the_model_barely_predicts_is_said_with_its_probability(monkeypatch):
    """'2 + 3 =' proposing '4' at 0.8 % while ' ' has 89.5 %: a sentence says so before Run; a
    token outside the likely ones gets its own probability, computed."""
    import circuitviz.ui.loaders as loaders
    from circuitviz.ui.inputs import unlikely_answer

    model = _tiny_loader("", "")
    likely = {" ": 0.895, "4": 0.008}
    sentence = unlikely_answer(model, "tiny", "2 + 3 =", "4", likely)
    assert sentence.startswith(
        "The model gives '4' only 0.8% after this prompt (its most likely next token is ' ', 89.5%)"
    )
    assert unlikely_answer(model, "tiny", "2 + 3 =", " ", likely) is None
    monkeypatch.setattr(loaders, "token_probability", lambda *args: (0.0002, " ", 0.9))
    assert "only 0.02%" in unlikely_answer(model, "tiny", "2 + 3 =", " Mary", likely)  # not "0.0%"
    from circuitviz.core.tasks import single_token_id
    from circuitviz.labels.logit_lens import next_token_probabilities, token_probability

    top = next_token_probabilities(model, IOI_TASK.clean, 3)
    chance, top_token, top_chance = token_probability(
        model, IOI_TASK.clean, single_token_id(model, top[1][0], "answer")
    )
    assert chance == pytest.approx(top[1][1], rel=1e-5)
    assert top_token == top[0][0] and top_chance == pytest.approx(top[0][1], rel=1e-5)


def test_the_graph_view_and_demo_mode_live_in_the_url_through_the_state():
    """The URL's ``view`` (the clicked node, pins...) and ``demo`` seed their typed fields on a
    session's first run and are mirrored back; a view naming a node the circuit lacks opens no
    card and leaves the URL."""
    import json

    view = json.dumps({"clicked": "a0.h1", "pins": ["m0"]})
    at = _click(_app(method="eap", view=view, demo="1").run(), "Run")
    assert not at.exception, at.exception
    assert at.toggle(key="explore.demo").value and at.query_params["demo"] == "1"
    at.toggle(key="explore.demo").set_value(False).run()
    assert not at.exception, at.exception
    assert "demo" not in at.query_params
    shown = json.loads(at.query_params["view"])
    assert shown["clicked"] == "a0.h1" and shown["pins"] == ["m0"]
    assert at.session_state["instrument.view"] == at.query_params["view"]
    wrong = _click(_app(method="eap", view=json.dumps({"clicked": "a99.h9"})).run(), "Run")
    assert not wrong.exception, wrong.exception
    assert "view" not in wrong.query_params


def test_demo_mode_shows_the_prompt_as_typed_and_hides_the_controls_by_their_keys():
    """Demo mode's headline quoted the prompt into markdown: ``**star**`` was bold, ``$x$`` a
    formula and ``[link](...)`` a live link (seen in Chromium). Its hiding style named a testid
    Streamlit 1.67 no longer draws, so every control stayed on screen: the controls now stand in
    containers keyed ``controls-...`` and the style hides those."""
    from circuitviz.core.tasks import PromptTask
    from circuitviz.core.text import markdown_text
    from circuitviz.render.demo import prompt_sentence
    from circuitviz.ui.demo import CONTROLS_KEY

    marked = "**star** $x$ [link](http://example.com) "
    at = _click(
        _app(
            method="eap", demo="1", prompt=marked + IOI_TASK.clean, corrupted=marked + IOI_TASK.corrupted
        ).run(),
        "Run",
    )
    assert not at.exception, at.exception
    task = PromptTask(marked + IOI_TASK.clean, marked + IOI_TASK.corrupted, " Mary", (" John",))
    headline = [h.value for h in at.subheader if "The model reads" in h.value]
    said = [[markdown_text(prompt_sentence(task, clean))] for clean in (1.0, -1.0)]  # either preference
    assert headline in said, [h.value for h in at.subheader]
    styles = [h.proto.body for h in at.get("html") if "display: none" in h.proto.body]
    assert styles and f"st-key-{CONTROLS_KEY}" in styles[0]
    page = (Path(__file__).resolve().parents[1] / "pages" / "explore.py").read_text()
    for key in ("task", "method", "run"):  # the prompt, the method's form, the estimate and Run
        assert f'key="{CONTROLS_KEY}{key}"' in page


def test_a_prompts_proposal_is_stored_and_read_back_without_a_forward_pass(monkeypatch):
    """The answer, foil and corrupted prompt proposed for a prompt are kept in the store: a later
    start of the app (an empty in-memory cache) reads them back and weighs no candidate again."""
    from circuitviz.query import proposals
    from circuitviz.ui import loaders

    model = tiny_app_model("tiny", "cpu")
    calls = []
    real = proposals.propose

    def counted(*args):
        calls.append(args[1])
        return real(*args)

    monkeypatch.setattr(proposals, "propose", counted)
    tokens = [" Mary", " John", " the"]
    first = loaders.proposal(model, "tiny", IOI_TASK.clean, tokens)
    assert calls == [IOI_TASK.clean] and first.corrupted
    loaders._proposal.clear()  # a new server process: only the store remains
    again = loaders.proposal(model, "tiny", IOI_TASK.clean, tokens)
    assert again == first and calls == [IOI_TASK.clean]
    loaders.proposal(model, "tiny", IOI_TASK.clean, [" John", " Mary"])  # other top tokens: proposed anew
    assert len(calls) == 2


def test_the_mmlu_pickers_note_stands_outside_its_expander_while_the_question_is_the_prompt():
    """The rerun that opens a picked question draws the expander closed: its note (the model's
    letter, a valid or refused task) stands above the expander, and goes once the prompt is
    another."""
    at = _app(method="eap").run()
    at = _click(at, "Use this question")  # the first subject's first question
    at.run()  # (the opening rerun, as the browser makes it)
    assert not at.exception, at.exception
    question = at.session_state["mmlu.prompt"]
    assert at.text_area(key="w.prompt").value == question
    expander = next(e for e in at.expander if e.label.startswith("Or pick an MMLU question"))
    inside = {caption.value for caption in expander.caption}
    notes = [c.value for c in at.caption if "question" in c.value and "the model prefers" in c.value]
    assert notes and not set(notes) & inside, (notes, inside)
    at.text_area(key="w.prompt").set_value("When Tom and Lisa went to the park, Lisa gave a ball to").run()
    assert not at.exception, at.exception
    assert not any("the model prefers" in c.value for c in at.caption)


def test_a_model_that_cannot_load_names_the_way_on(monkeypatch):
    """The page stops under the prompt box; its sentence now says the sidebar's list is the way on
    (an audit: a link's unknown hub id left no word of it)."""
    from circuitviz.models import EMBEDDED_MODEL, ModelLoadError
    from circuitviz.ui import loaders

    def refuse(model_id, device):
        raise ModelLoadError(f"'{model_id}' is not in the Hugging Face cache and HF_HUB_OFFLINE is set.")

    monkeypatch.setattr(loaders, "MODEL_LOADER", refuse)
    at = _app(model="nobody/none").run()
    assert not at.exception, at.exception
    (error,) = [e.value for e in at.error if "nobody" in e.value]
    from circuitviz.core.text import markdown_text

    assert error.endswith(
        markdown_text(
            f"Or pick another model in the sidebar: {EMBEDDED_MODEL} is built in and loads offline."
        )
    )


def test_a_links_budget_stays_when_the_link_leaves_the_prompts_inputs_to_be_proposed():
    """'?method=eap-ig&budget=500' opened at the first budget: the proposed prompt counted as a new
    prompt and dropped the link's budget with no word (an audit in Chromium)."""

    def link(**query) -> AppTest:  # only these values: the prompt's inputs are proposed
        at = AppTest.from_file("../app.py", default_timeout=TIMEOUT)
        for name, value in query.items():
            at.query_params[name] = value
        return at.run()

    at = link(method="eap", budgets="5,10,20,40")  # a result for the link below to open
    next(b for b in at.button if b.label == "Run").click()
    at.run()
    at = link(method="eap", budgets="5,10,20,40", budget="40")
    assert not at.exception, at.exception
    assert at.session_state["budget"] == 40
    assert at.select_slider(key="w.budget").value == 40
    at.text_area(key="w.prompt").set_value("When Anna and Tom went to the park , Tom gave a ball to").run()
    assert "budget" not in at.session_state  # a new prompt typed: the old one's budget is gone
