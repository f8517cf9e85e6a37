"""Cached access to models, stored results and labels for the app's pages.

Models are loaded once per process, in a background thread, as futures in Streamlit's resource
cache (``st.cache_resource``: the last two (model, device, loader) asked for), and shared by every
browser session; that is safe because the engine runs every hooked pass under a per-model lock and
nothing here changes the model. Results go through the engine's ``ResultStore``, so reopening a view,
reloading a shared URL or switching pages never computes the same circuit twice.

Tests (and demos on other hardware) choose the model loader: set ``MODEL_LOADER`` to a callable
``(model_id, device) -> model``, or the environment variable ``CIRCUITVIZ_MODEL_LOADER`` to
``"module:function"``. Nothing here imports torch or transformer_lens at import time, so a page
that never needs a model paints without them.
"""

from __future__ import annotations

import gc
import importlib
import itertools
import json
import os
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future

import streamlit as st

from ..entry import calibration, probe
from ..services.assets import gallery_dir
from . import background, startup

MODEL_LOADER: Callable[[str, str | None], object] | None = None

# a server shared with others: set CIRCUITVIZ_BROWSER_PATHS=0 and no page opens a path typed in
# the browser (a model folder or .gguf, a batch folder, an SAE folder), nor says whether one exists
BROWSER_PATHS_ENV = "CIRCUITVIZ_BROWSER_PATHS"


def browser_paths_allowed() -> bool:
    """Whether the pages may open local paths the user types (yes unless the server's runner set
    ``CIRCUITVIZ_BROWSER_PATHS=0``)."""
    return os.environ.get(BROWSER_PATHS_ENV, "1").strip() != "0"


def no_browser_paths(instead: str) -> str:
    """The sentence a page shows where it would take a typed path while they are off."""
    return f"This server opens no path typed in the browser ({BROWSER_PATHS_ENV}=0, set by whoever runs it); {instead}."


def _loader() -> tuple[Callable[[str, str | None], object], str]:
    """The model loader in force, and a name for it (part of the cache key)."""
    if MODEL_LOADER is not None:
        return MODEL_LOADER, f"hook:{getattr(MODEL_LOADER, '__qualname__', 'loader')}"
    named = os.environ.get("CIRCUITVIZ_MODEL_LOADER", "").strip()
    if named:
        module_name, _, function_name = named.partition(":")
        return getattr(importlib.import_module(module_name), function_name), f"env:{named}"
    return _default_loader, "default"


def _default_loader(model_id: str, device: str | None):
    """``models.load_model``, imported when a load starts (in the loading thread: the launcher's
    main thread goes on to start the server without importing torch)."""
    # here, not at the top: keeps torch out of the first paint
    from ..models import load_model

    return load_model(model_id, device=device, local=browser_paths_allowed())


_LOADS = itertools.count(1)
MODELS_KEPT = 2  # the last two (model, device, loader) asked for


# (model id, device) -> the model loaded for it while the resource cache keeps it: read, never loading
_LOADED: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


class _Load(Future):
    """A model's load as a future, with when it began (``started``, ``time.perf_counter()``)."""

    def __init__(self):
        super().__init__()
        self.started = time.perf_counter()


def load_started(future: Future) -> float:
    """When the load behind ``future`` began (``time.perf_counter()``): a page opened in the middle
    of a first start's conversion counted its own wait from 0 s, beside "half a minute to minutes"
    and a last load's time, which count from the load's start. Now for a future that does not say."""
    return getattr(future, "started", None) or time.perf_counter()


@st.cache_resource(show_spinner=False, max_entries=MODELS_KEPT)
def _model_future(model_id: str, device: str, loader_key: str, _loader) -> Future:
    """The future of one model's load, started here in a background thread: Streamlit's resource
    cache holds it, shared by every session (and by the launcher, which asks before the server
    starts), with its own controls (``st.cache_resource.clear()``, the entries kept). The thread
    is stopped when the process exits (``background``): a load still in torch then aborted it."""
    future: Future = _Load()
    background.start(_load_into, future, _loader, model_id, device, name=f"load {model_id}")
    return future


def model_future(model_id: str, device: str = "auto") -> Future:
    """The shared model for (model, device) as a future: loading starts in a background thread
    on the first call, so a page can draw while it loads and show how long it has taken. A load
    that failed is tried again on the next call."""
    device = device or "auto"
    loader, loader_name = _loader()
    key = loader_name
    if MODEL_LOADER is not None:  # a test's loader: each its own model (a bound method: its object)
        key += f"@{id(getattr(loader, '__self__', loader))}"
    future = _model_future(model_id, device, key, loader)
    if future.done() and future.exception() is not None:
        _model_future.clear(model_id, device, key, loader)
        future = _model_future(model_id, device, key, loader)
    return future


def loaded_model(model_id: str, device: str = "auto"):
    """The model loaded for (model id, device), or None when it is not loaded (yet, or any
    more): unlike ``model_future``, never starts a load (the sidebar asks on pages that need no
    model)."""
    return _LOADED.get((model_id, device or "auto"))


def _load_into(future: Future, loader, model_id: str, device: str) -> None:
    """Load, time the load (the next start says how long to expect) and, on a machine with no
    rate measured yet for the model's device kind, time one forward pass (``probe.probe_rate``)."""
    startup.mark(f"loading {model_id}")
    from ..models.cache import complete_entries  # in this thread: torch, which the load imports

    start, entries = time.perf_counter(), complete_entries()
    try:
        model = loader(model_id, None if device == "auto" else device)
    except BaseException as error:  # handed to whoever waits for the model
        future.set_exception(error)
        return
    # a load that converted its weights (a first start) took half a minute to minutes for a once-only
    # step: the next start read "about 334 s, as last time" over a load of 30 s. Only loads from
    # the cache say what a start takes.
    if complete_entries() <= entries:
        calibration.record_load(model_id, time.perf_counter() - start)
    startup.mark(f"{model_id} loaded")
    # here, not at the top: keeps torch out of the first paint
    from ..models.adapter import register

    register(model, f"{model_id} on {device}, load {next(_LOADS)}")  # names it in cache keys
    # this model's rate stored by an earlier start or run prices the first estimate: no pass to
    # time; a model with none is timed once, which scales other models' runs to it
    if probe.probe_unmeasured(model):
        startup.mark("forward pass timed")
    freeze_long_lived_objects()
    _LOADED[(model_id, device)] = model
    future.set_result(model)
    startup.mark(f"{model_id} ready")


def freeze_long_lived_objects() -> None:
    """Move every object alive now (the model, torch, transformer_lens, the page modules) out of
    the garbage collector's view, so a full collection only walks what pages make afterwards.

    Streamlit runs ``gc.collect(2)`` after every script run of every session, holding the GIL:
    with a model loaded that walked about 500,000 objects (0.2 s of CPU each time on this machine),
    and eight sessions opening one view waited on each other's collections (docs/app.md). Frozen
    objects are still freed by reference counting; a frozen model evicted from the cache frees
    its tensors the same way, only cycles among its Python objects stay.

    Nothing is collected first: the launcher pauses the collector during the load, so all of
    the load's objects (about 775,000 with Gemma-3-270M) sit in the youngest generation, and one
    collection walked them all for 0.4-0.6 s of CPU between the model's load and an enabled Run.
    What it freed (about 11,700 objects, 8 MB: the cycles the imports leave; no tensor) stays
    frozen instead.
    """
    gc.freeze()


@st.cache_resource(show_spinner=False)
def _store(root: str):
    # here, not at the top: keeps torch out of the first paint
    from ..services.store import ResultStore

    return ResultStore(root)


def get_store():
    """The result store under ``$CIRCUITVIZ_CACHE`` (or ~/.cache/circuitviz)."""
    # here, not at the top: keeps torch out of the first paint
    from ..services.store import default_root

    return _store(str(default_root()))


def model_key(model) -> str:
    """A cache key for this model object: the one its load gave it (a model id alone names
    several objects: one per device, or per loader in tests)."""
    # here, not at the top: keeps torch out of the first paint
    from ..models.adapter import adapter_of  # torch is loaded once a model is

    return adapter_of(model).key


def next_tokens(model, model_id: str, prompt: str, top_k: int = 8) -> list[tuple[str, float]]:
    """The model's most likely next tokens after ``prompt`` (cached per model and prompt, and
    stored like results: a stored view of the prompt runs no forward pass for them)."""
    return _next_tokens(model, model_key(model), model_id, prompt, top_k)


@st.cache_data(show_spinner=False, max_entries=256)
def _next_tokens(_model, key: str, model_id: str, prompt: str, top_k: int) -> list[tuple[str, float]]:
    from ..entry import memos  # here, not at the top: keeps torch out of the first paint

    return memos.next_tokens(get_store(), _model, model_id, prompt, top_k)


def token_probability(model, model_id: str, prompt: str, token: str) -> tuple[float, str, float]:
    """(the model's probability of ``token`` (one token) after ``prompt``, its top token, that
    token's probability), cached per model, prompt and token, and stored like the next tokens (a
    stored view of the prompt runs no forward pass for it)."""
    return _token_probability(model, model_key(model), model_id, prompt, token)


@st.cache_data(show_spinner=False, max_entries=256)
def _token_probability(_model, key: str, model_id: str, prompt: str, token: str) -> tuple[float, str, float]:
    from ..entry import memos  # here, not at the top: keeps torch out of the first paint

    return memos.token_probability(get_store(), _model, model_id, prompt, token)


def proposal(model, model_id: str, prompt: str, top_tokens: Sequence[str]):
    """The answer, foil and corrupted prompt proposed for a new ``prompt`` (``proposals.propose``),
    cached per model, prompt and top tokens, and stored like the next tokens: the forward passes
    that weigh each candidate run once per prompt, not again at every start of the app."""
    return _proposal(model, model_key(model), model_id, prompt, tuple(top_tokens))


@st.cache_data(show_spinner=False, max_entries=256)
def _proposal(_model, key: str, model_id: str, prompt: str, top_tokens: tuple[str, ...]):
    from ..entry import memos  # here, not at the top: keeps torch out of the first paint

    return memos.proposal(get_store(), _model, model_id, prompt, top_tokens)


def completion(
    model, model_id: str, prompt: str, answer: str, corrupted: str | None, top_tokens, foil: str | None = None
):
    """The foil (and, when ``corrupted`` is None, the corrupted prompt) proposed for a given
    answer (``proposals.proposal_for``): for a URL or an opened task that named the answer and
    left them out, or another answer picked (``foil``: the user's, each candidate measured
    against it). Cached per model and inputs."""
    return _completion(model, model_key(model), model_id, prompt, answer, corrupted, tuple(top_tokens), foil)


@st.cache_data(show_spinner=False, max_entries=64)
def _completion(_model, key: str, model_id: str, prompt: str, answer: str, corrupted, top_tokens, foil=None):
    from ..query.proposals import proposal_for

    return proposal_for(_model, prompt, answer, list(top_tokens), corrupted, foil=foil)


def task_verdict(model, model_id: str, task) -> str | None:
    """Why ``task`` is not meaningful for the model (``task_validity``), or None: from the two
    prompts' kept plain runs (the Run that follows reads them), cached per model and task and
    stored like the next tokens, so a stored view runs no forward pass for it."""
    return _task_verdict(model, model_key(model), model_id, task.to_dict())


@st.cache_data(show_spinner=False, max_entries=256)
def _task_verdict(_model, key: str, model_id: str, task: dict) -> str | None:
    from ..entry import memos  # here, not at the top: keeps torch out of the first paint

    return memos.task_verdict(get_store(), _model, model_id, task)


def str_tokens(model, model_id: str, text: str) -> list[str]:
    """How the model's tokenizer splits ``text`` (with the BOS token the runs use), each id decoded
    on its own (TransformerLens's to_str_tokens fails on some tokenizers, Gemma-3's among them)."""
    return _str_tokens(model, model_key(model), text)


@st.cache_data(show_spinner=False, max_entries=512)
def _str_tokens(_model, key: str, text: str) -> list[str]:
    # here, not at the top: keeps torch out of the first paint
    from ..models.adapter import adapter_of

    ids = adapter_of(_model).to_tokens(text, on_device=False)[0].tolist()
    return [adapter_of(_model).decode([int(token)]) for token in ids]


def request_for(model, model_id: str, task, method: str, settings, budgets: Sequence[int]):
    """The page's one ``Request`` (settings parsed, key computed), priced on the model: the
    estimate and the limits' verdict it carries are what Run shows and what the run obeys."""
    # here, not at the top: keeps torch out of the first paint
    from ..entry.request import Request

    return Request.for_model(model, task, method, settings, budgets, model_id).priced(model)


# (store folder, kind, key) -> what the store held, shared by every session (the last few)
_REMEMBERED: OrderedDict[tuple[str, str, str], object] = OrderedDict()
_REMEMBERED_GUARD = threading.Lock()
REMEMBERED_ENTRIES = 32


def _remembered(store, kind: str, key: str, read: Callable[[], object]):
    """``read()`` (a read of ``store``) once per process while it is among the last
    ``REMEMBERED_ENTRIES`` asked for; None (nothing stored) is not remembered.

    Eight sessions opening one shared view read and unpickle its files once, not eight times.
    What is remembered is data no view changes (results, labels), so sharing the object is safe.
    """
    entry = (str(store.root), kind, key)
    with _REMEMBERED_GUARD:
        if entry in _REMEMBERED:
            _REMEMBERED.move_to_end(entry)
            return _REMEMBERED[entry]
    value = read()
    if value is not None:
        with _REMEMBERED_GUARD:
            _REMEMBERED[entry] = value
            while len(_REMEMBERED) > REMEMBERED_ENTRIES:
                _REMEMBERED.popitem(last=False)
    return value


def stored_result(request):
    """The stored result of exactly this request, or None; never computes (read once per process)."""
    store = get_store()
    return _remembered(store, "result", request.key, lambda: store.get(request.key))


def store_measured(result, request_key: str | None) -> str | None:
    """Store ``result`` again under the request it answers once a figure was measured on it (its
    held-out transfer), so that a reload or a restart shows the figure without measuring again.
    None when stored (or when the request is not known: nothing to store it under); else one
    sentence saying the figure was not kept and why."""
    if not request_key:
        return None
    store = get_store()
    try:
        store.put(request_key, result)
    except OSError as error:
        return (
            f"The figure is shown but could not be kept in the result store ({error.strerror or error}); "
            "it will be measured again after a reload."
        )
    with _REMEMBERED_GUARD:  # this process's readers of the entry get the measured object
        _REMEMBERED[(str(store.root), "result", request_key)] = result
    return None


def discover(model, request, progress=None, store=None):
    """(result, came from the store): the engine's run of ``request`` through the shared store
    (``store`` when the caller fetched it already: a background thread cannot reach streamlit's
    caches)."""
    # here, not at the top: keeps torch out of the first paint
    from ..entry.api import run_request

    return run_request(model, request, store=store or get_store(), progress=progress)


def node_labels(model, model_id: str, task, store=None) -> dict:
    """Logit-lens labels of every node on the task's clean prompt, stored like results (``store``
    when the caller fetched it: a background thread cannot reach streamlit's caches)."""
    from ..entry import memos  # here, not at the top: keeps torch out of the first paint

    store = store or get_store()
    return memos.node_labels(
        store,
        model,
        model_id,
        task,
        read=lambda key: _remembered(store, "labels", key, lambda: store.load_state(key, kind="labels")),
    )


def sae_node_features(model, model_id: str, prompt: str, nodes: tuple[str, ...], top_k: int = 3):
    """({node: [its strongest SAE features, strongest first]}, None) from the embedded SAEs, or
    ({}, the sentence why not). Each feature: label, layer, feature, promotes, token, share,
    activation."""
    return _sae_node_features(model, model_key(model), model_id, prompt, nodes, top_k)


@st.cache_data(show_spinner="Labelling the circuit's nodes with SAE features…", max_entries=32)
def _sae_node_features(_model, key: str, model_id: str, prompt: str, nodes: tuple[str, ...], top_k: int):
    """({node: [its strongest SAE features, strongest first]}, None) from the embedded SAEs, or
    ({}, the sentence why not). Each feature: label, layer, feature, promotes, token, share."""
    try:
        # here, not at the top: keeps torch out of the first paint
        from ..labels import sae_features
    except ImportError as error:
        return {}, f"SAE labels need sae-lens ({error})."
    try:
        saes = sae_features.load_embedded_saes(_model, model_id)
        found = sae_features.circuit_node_features(_model, prompt, list(nodes), saes, top_k=top_k)
    except (sae_features.SaeUnavailable, ValueError, OSError) as error:
        return {}, f"No SAE labels: {error}"
    keep = ("label", "layer", "feature", "promotes", "token", "share", "activation", "contexts")
    return {
        node: [{name: item.get(name) for name in keep} for item in entry.get("features") or []]
        for node, entry in found.items()
    }, None


@st.cache_data(show_spinner="Reading the features' descriptions…", max_entries=16)
def sae_feature_labels(_model, model_id: str, features: tuple[tuple[int, int, str], ...]):
    """({node id: one-line label} for (layer, feature, node id) of the embedded SAEs, None), or
    ({}, the sentence why not)."""
    try:
        # here, not at the top: keeps torch out of the first paint
        from ..labels import sae_features
    except ImportError as error:
        return {}, f"SAE labels need sae-lens ({error})."
    try:
        by_layer = {sae.layer: sae for sae in sae_features.load_embedded_saes(_model, model_id)}
        labels = {}
        for layer, feature, node in features:
            if layer in by_layer:
                description = sae_features.feature_description(_model, by_layer[layer], feature, n_contexts=3)
                labels[node] = sae_features.feature_label(description)
    except (sae_features.SaeUnavailable, ValueError, OSError) as error:
        return {}, f"No SAE labels: {error}"
    return labels, None


GALLERY = str(gallery_dir())


@st.cache_data(show_spinner=False)
def gallery_index(folder: str = GALLERY) -> list[dict]:
    """The ready examples (title, description, task, headline figures); [] when none are built."""
    path = os.path.join(folder, "index.json")
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as stream:
        return json.load(stream)


@st.cache_resource(show_spinner=False, max_entries=16)
def gallery_example(slug: str, folder: str = GALLERY):
    """(CircuitResult, labels) of a stored example, read without any model pass."""
    # here, not at the top: keeps torch out of the first paint
    import torch

    from ..core.results import CircuitResult

    state = torch.load(os.path.join(folder, f"{slug}.pt"), map_location="cpu", weights_only=True)
    return CircuitResult.from_state(state["result"]), state.get("labels")
