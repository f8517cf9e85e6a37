"""Several discoveries at once on one shared model instance (what st.cache_resource does).

Each concurrent result must equal the one computed alone, and no hook may stay on the model
afterwards, also when a run raises half-way (from a progress callback, which is where Streamlit
raises when a user stops or reruns a page) or inside a hook.
"""

from __future__ import annotations

import threading

import pytest
import torch

from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.core.tasks import PromptTask
from circuitviz.engine.prefix import final_residual
from circuitviz.entry.api import discover
from circuitviz.models.adapter import adapter_of

TINY_TASKS = [
    IOI_TASK,
    PromptTask("The capital of France is", "The capital of Italy is", " Paris", (" Rome",)),
    PromptTask("1 + 2 =", "2 + 2 =", " 3", (" 4",)),
    PromptTask("The cat sat on the", "The cat sat at the", " mat", (" park",)),
    PromptTask(
        "When Anna and Tom went to the park , Tom gave a ball to",
        "When Alice and Bob went to the park , Carl gave a ball to",
        " Anna",
        (" Tom",),
    ),
]


class Interrupted(Exception):
    """Stands in for Streamlit's StopException / RerunException."""


def hooks_left(model) -> list[str]:
    """Every hook point or module that still carries a hook."""
    left = [name for name, point in model.hook_dict.items() if point.fwd_hooks or point.bwd_hooks]
    for name, module in model.named_modules():
        if module._forward_hooks or module._forward_pre_hooks or module._backward_hooks:
            left.append(f"module {name or '<root>'}")
    return left


def run_threads(jobs, n_threads: int | None = None):
    """Run callables together (released at once by a barrier); (results, errors) by index."""
    n = len(jobs)
    barrier = threading.Barrier(n)
    results: list = [None] * n
    errors: list = [None] * n

    def work(index):
        barrier.wait()
        try:
            results[index] = jobs[index]()
        except BaseException as error:  # noqa: BLE001 - recorded for the assertion
            errors[index] = error

    threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
        assert not thread.is_alive(), "a concurrent discovery hung"
    return results, errors


def assert_same_result(alone, together):
    assert together.task == alone.task
    assert torch.equal(together.scores, alone.scores)
    assert together.baseline == alone.baseline
    assert [p.to_dict() for p in together.curve] == [p.to_dict() for p in alone.curve]
    for budget in alone.budgets:
        assert torch.equal(together.circuit(budget), alone.circuit(budget))


@pytest.fixture(scope="module")
def tiny():
    return tiny_model("gemma", seed=3)


@pytest.mark.parametrize("method,config", [("eap-ig", {"ig_steps": 3}), ("exact", None), ("eap", None)])
def test_concurrent_discoveries_on_a_tiny_model_equal_the_lone_ones(tiny, method, config):
    assert hooks_left(tiny) == []
    alone = [discover(tiny, task, method, config, budgets=(5, 20))[0] for task in TINY_TASKS]
    jobs = [
        (lambda task=task: discover(tiny, task, method, config, budgets=(5, 20))[0])
        for task in TINY_TASKS * 2
    ]
    together, errors = run_threads(jobs)
    assert errors == [None] * len(jobs)
    for index, result in enumerate(together):
        assert_same_result(alone[index % len(TINY_TASKS)], result)
    assert hooks_left(tiny) == []


def test_runs_interrupted_half_way_leave_no_hook_and_do_not_disturb_others(tiny):
    alone = [discover(tiny, task, "eap-ig", {"ig_steps": 4}, budgets=(5, 20))[0] for task in TINY_TASKS]

    def stop_after_first_step(stage, fraction):
        if stage == "score" and fraction > 0:
            raise Interrupted("stopped by the user")

    jobs = []
    for task in TINY_TASKS:
        jobs.append(lambda task=task: discover(tiny, task, "eap-ig", {"ig_steps": 4}, budgets=(5, 20))[0])
        jobs.append(
            lambda task=task: discover(
                tiny, task, "eap-ig", {"ig_steps": 4}, budgets=(5, 20), progress=stop_after_first_step
            )[0]
        )
    results, errors = run_threads(jobs)
    for index in range(0, len(jobs), 2):
        assert errors[index] is None
        assert_same_result(alone[index // 2], results[index])
        assert isinstance(errors[index + 1], Interrupted)
    assert hooks_left(tiny) == []
    # the lock is free again: a plain run afterwards still works and matches
    assert_same_result(alone[0], discover(tiny, TINY_TASKS[0], "eap-ig", {"ig_steps": 4}, budgets=(5, 20))[0])


def test_an_exception_inside_a_hook_removes_every_hook_and_releases_the_lock(tiny):
    tokens = tiny.to_tokens(IOI_TASK.clean)
    seen = []

    def record(x, hook):
        seen.append(hook.name)
        return x

    def explode(x, hook):
        raise Interrupted("hook failed")

    hooks = [
        ("blocks.0.hook_resid_pre", record),
        ("blocks.1.hook_mlp_in", explode),
        ("blocks.1.hook_resid_post", record),
    ]
    with pytest.raises(Interrupted):
        final_residual(tiny, tokens, hooks)
    assert seen == ["blocks.0.hook_resid_pre"]
    assert hooks_left(tiny) == []
    # another thread can take the model's lock at once (it was released by the failed run)
    acquired = []

    def take_and_release():
        lock = adapter_of(tiny).lock
        got = lock.acquire(timeout=5)
        acquired.append(got)
        if got:
            lock.release()

    thread = threading.Thread(target=take_and_release)
    thread.start()
    thread.join()
    assert acquired == [True]
    # a later plain run is not changed by the failed one
    before = final_residual(tiny, tokens, [])
    assert torch.equal(before, final_residual(tiny, tokens, []))


def test_an_unknown_hook_name_fails_cleanly_and_leaves_nothing(tiny):
    tokens = tiny.to_tokens(IOI_TASK.clean)
    hooks = [("blocks.0.hook_resid_pre", lambda x, hook: x), ("blocks.9.no_such_hook", lambda x, hook: x)]
    # one sentence naming the missing hook point (a method reading what the model lacks)
    with pytest.raises(ValueError, match="has no hook point blocks.9.no_such_hook"):
        final_residual(tiny, tokens, hooks)
    assert hooks_left(tiny) == []


EMBEDDED_TASKS = [
    PromptTask(
        "When Mary and John went to the store, John gave a drink to",
        "When Alice and Bob went to the store, Carl gave a drink to",
        " Mary",
        (" John",),
    ),
    PromptTask("The capital of France is", "The capital of Italy is", " Paris", (" Rome",)),
    PromptTask("The cat sat on the", "The dog sat on the", " mat", (" floor",)),
]


@pytest.mark.slow
def test_concurrent_discoveries_on_the_embedded_model(embedded_model):
    model = embedded_model
    assert hooks_left(model) == []
    config = {"ig_steps": 2}
    alone = [discover(model, task, "eap-ig", config, budgets=(50, 200))[0] for task in EMBEDDED_TASKS]

    def stop(stage, fraction):
        if stage == "score" and fraction >= 0.5:
            raise Interrupted("stopped")

    jobs = [
        (lambda task=task: discover(model, task, "eap-ig", config, budgets=(50, 200))[0])
        for task in EMBEDDED_TASKS
    ]
    jobs.append(lambda: discover(model, EMBEDDED_TASKS[0], "eap-ig", config, budgets=(50,), progress=stop)[0])
    results, errors = run_threads(jobs)
    assert errors[:3] == [None] * 3
    assert isinstance(errors[3], Interrupted)
    for result, expected in zip(results[:3], alone):
        assert_same_result(expected, result)
    assert hooks_left(model) == []


def test_tokenising_on_one_model_from_many_threads_gives_each_its_own_tokens(tiny):
    """TransformerLens's to_tokens(prepend_bos=False) flips a shared cfg flag during the call;
    before serialise_tokenizer this gave other sessions prompts without <bos> (wrong circuits)."""
    from circuitviz.core.tasks import prepare_task

    alone = [prepare_task(tiny, task) for task in TINY_TASKS]
    for _ in range(15):
        jobs = [(lambda task=task: prepare_task(tiny, task)) for task in TINY_TASKS * 3]
        results, errors = run_threads(jobs)
        assert errors == [None] * len(jobs)
        for index, prepared in enumerate(results):
            expected = alone[index % len(TINY_TASKS)]
            assert torch.equal(prepared.clean_tokens, expected.clean_tokens)
            assert torch.equal(prepared.corrupted_tokens, expected.corrupted_tokens)
            assert (prepared.answer_id, prepared.foil_ids) == (expected.answer_id, expected.foil_ids)


def test_tokenising_while_forward_passes_end_keeps_each_call_its_own_bos_setting(tiny):
    """TransformerLens's forward saves and writes back cfg.default_prepend_bos around every pass,
    so a pass that ends while another thread tokenises an answer with prepend_bos=False used to
    put <bos> back under it (the answer came out two tokens) or leave the override for good."""
    from circuitviz.core.tasks import single_token_id

    tokens = tiny.to_tokens(IOI_TASK.clean)
    stop = threading.Event()
    wrong: list = []

    def forward_passes():
        while not stop.is_set():
            final_residual(tiny, tokens, [])

    def tokenise():
        for _ in range(150):
            for word in (" Mary", " John", " Paris", " mat"):
                try:
                    single_token_id(tiny, word, "answer")
                except ValueError as error:
                    wrong.append(str(error))
            if adapter_of(tiny).to_tokens(IOI_TASK.clean).shape != tokens.shape:  # keeps its <bos>
                wrong.append("the prompt lost its <bos>")

    runners = [threading.Thread(target=forward_passes) for _ in range(2)]
    tokenisers = [threading.Thread(target=tokenise) for _ in range(3)]
    for thread in runners + tokenisers:
        thread.start()
    for thread in tokenisers:
        thread.join(timeout=600)
    stop.set()
    for thread in runners:
        thread.join(timeout=600)
    assert wrong == []
    assert tiny.cfg.default_prepend_bos is True  # and no override was left behind
