"""The registry: every method by its name, found by discovery, with the traits pages read.

A method registers itself with ``@register`` when its module is imported, and the registry imports
the modules itself the first time anyone asks for a method (``get_method``, ``available_methods``,
``setting_flags``, ``method_traits``): every module of the ``circuitviz.methods`` package
(a ``pkgutil`` walk of its path) and every module named by an entry point of the
``circuitviz.methods`` group (a method shipped in another distribution). So adding a method is
one file; nothing lists the methods by hand. The walk runs again when the package's path or
``sys.path`` changes (a distribution installed into a running process, a test's folder).

What a method *is* -- fitted to the prompt, has a signals view, why its curve may be flat,
whether its scores estimate the metric, whether it resolves positions -- is a trait on its class
(``Method``), read here as a ``MethodTraits`` value; no page, report or measurement compares a
method's name to decide it.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
import pkgutil
import sys
import threading
from dataclasses import dataclass
from typing import Any

from ..core.text import shown
from .base import Method, ScoringMethod, UnknownMethodError
from .settings import flag_type, setting_choices, setting_help, setting_type, setting_widget

ENTRY_POINT_GROUP = "circuitviz.methods"
# what a form, the command line and the API start with, chosen by measurement (docs/faithfulness.md,
# "The default method"): EAP-IG runs within ten CPU seconds on seven of the nine prompts and opens
# faithful and readable on three; the methods that open faithful on more (Edge Pruning, paraphrase
# pruning) take several times longer, so they are one click away (the opening view's button)
DEFAULT_METHOD = "eap-ig"
DEFAULT_COMPARISON = ("eap", DEFAULT_METHOD)  # what the Compare page starts with: one gradient, then IG

_REGISTRY: dict[str, Method] = {}
# the (package path, sys.path) of the last finished walk, and whether a walk is under way; the
# lock is re-entrant because a module being imported by the walk may itself ask for a method
_WALK: dict[str, Any] = {"done": None, "walking": False}
_DISCOVERY = threading.RLock()


def register(cls: type[Method]) -> type[Method]:
    """Class decorator: make a method reachable by its name."""
    _REGISTRY[cls.name] = cls()
    return cls


def _package():
    return sys.modules[__name__.rpartition(".")[0]]


def discover_methods() -> dict[str, Method]:
    """Import every method module once (the package's own, then the entry points') and return
    the registry. Called by every function here; cheap after the first call."""
    package = _package()
    seen = (tuple(package.__path__), tuple(sys.path))
    if _WALK["done"] == seen:
        return _REGISTRY
    with _DISCOVERY:  # another thread's walk finishes before this one looks
        if _WALK["done"] == seen or _WALK["walking"]:  # walking: this thread, re-entered
            return _REGISTRY
        _WALK["walking"] = True
        try:
            for module in pkgutil.iter_modules(package.__path__):
                importlib.import_module(f"{package.__name__}.{module.name}")  # registers its methods
            for entry_point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
                entry_point.load()  # a module (or an object in one) whose import registers methods
            _WALK["done"] = seen
        finally:
            _WALK["walking"] = False
    return _REGISTRY


def get_method(name: str) -> Method:
    registry = discover_methods()
    method = registry.get(name.strip().lower()) if isinstance(name, str) else None
    if method is None:
        raise UnknownMethodError(
            f"Unknown method {shown(str(name), 30)}; choose one of {', '.join(sorted(registry))}."
        )
    return method


def available_methods() -> dict[str, Method]:
    return dict(discover_methods())


# ----- traits --------------------------------------------------------------------------------
@dataclass(frozen=True)
class MethodTraits:
    """What a method is, as plain values (``Method``'s class attributes say what each means).

    A name the registry does not know (a stored result of a method this install lacks) has the
    defaults: no caveat, no signals view, no flat-curve sentence.
    """

    name: str
    label: str
    needs_corrupted: bool = True
    without_corrupted: str | None = None
    fitted_to_prompt: str | None = None
    has_signals_view: bool = False
    has_paraphrases_view: bool = False
    flat_curve_note: str | None = None
    scores_estimate_metric: bool = True
    positions_capable: bool = False
    # scores MLP neurons as nodes beside its edges (its settings have ``neurons``: methods.neuron_nodes)
    neurons_capable: bool = False
    scores_are_exact: bool = True
    calibration_family: tuple[str, ...] = ()
    # learns its circuit on the prompt and some paraphrases and holds a share of them out, so its
    # circuit is made to carry over to wordings it never saw (its settings have a held-out share)
    holds_out_paraphrases: bool = False
    # what a budget over the graph's edges keeps when not the whole graph (``Method``'s phrase)
    over_graph_keeps: str | None = None
    # what an edge's score is, a phrase ('' for a method this install lacks)
    score_meaning: str = ""

    @property
    def fitted_note(self) -> str:
        """The visible caveat for a method whose circuit is fitted to the prompt ('' for others)."""
        if not self.fitted_to_prompt:
            return ""
        return (
            f"{self.fitted_to_prompt}: its circuit is fitted to the prompt, so its NDF here may "
            "flatter it; its NDF on paraphrases it never saw says how much carries over."
        )

    def notes(self, ndf_values=()) -> list[str]:
        """Every caveat a page showing this method's figures writes beside them: the fitted-to-
        the-prompt caveat, and the flat-curve sentence when every NDF of ``ndf_values`` is below
        0.05 (the threshold the curve's notes use)."""
        found = [self.fitted_note] if self.fitted_note else []
        flat = self.flat_curve_sentence(ndf_values)
        return [*found, flat] if flat else found

    def flat_curve_sentence(self, ndf_values=()) -> str:
        """The method's sentence for a curve whose every NDF is below 0.05 ('' for another curve, or
        a method that gives none), naming the highest unless every one reads 0.000: CircuitLasso's
        said "NDF is 0 at every budget" under a table whose budget 100 read NDF 0.031 (2026-12-07)."""
        values = list(ndf_values)
        if not self.flat_curve_note or not values or max(values) >= 0.05:
            return ""
        highest = max(values)
        said = "" if round(highest, 3) == 0 else f" (at most {highest:.2f})"
        return f"NDF is {'near ' if said else ''}0 at every budget{said}: {self.flat_curve_note}"


def traits_of(method: Method) -> MethodTraits:
    cls = type(method)
    scorer_positions = getattr(cls, "score_positions", None)
    return MethodTraits(
        name=method.name,
        label=method.label,
        needs_corrupted=bool(method.needs_corrupted),
        without_corrupted=method.without_corrupted,
        fitted_to_prompt=method.fitted_to_prompt,
        has_signals_view=bool(method.has_signals_view),
        has_paraphrases_view=bool(method.has_paraphrases_view),
        flat_curve_note=method.flat_curve_note,
        scores_estimate_metric=bool(method.scores_estimate_metric),
        positions_capable=scorer_positions is not None
        and scorer_positions is not ScoringMethod.score_positions,
        neurons_capable="neurons" in {f.name for f in dataclasses.fields(method.Config)},
        scores_are_exact=bool(method.scores_are_exact),
        calibration_family=tuple(method.calibration_family),
        holds_out_paraphrases="held_out" in {f.name for f in dataclasses.fields(method.Config)},
        over_graph_keeps=method.over_graph_keeps,
        score_meaning=method.score_meaning,
    )


def method_traits(name: str) -> MethodTraits:
    """The traits of the method called ``name`` (the defaults for a name not registered)."""
    method = discover_methods().get(name.strip().lower()) if isinstance(name, str) else None
    return traits_of(method) if method is not None else MethodTraits(name=str(name), label=str(name))


def methods_with(trait: str) -> list[str]:
    """The names of the registered methods whose ``trait`` is true (``"has_signals_view"``), in
    the order they registered (a family's own order: bon, ibon, bon-csm)."""
    return [name for name, method in discover_methods().items() if getattr(traits_of(method), trait)]


def default_method(names=None) -> str:
    """The method a form starts with: ``DEFAULT_METHOD`` when offered, else the first name."""
    names = sorted(names if names is not None else discover_methods())
    return DEFAULT_METHOD if DEFAULT_METHOD in names else names[0]


def default_comparison(names=None) -> list[str]:
    """The methods the Compare page starts with: ``DEFAULT_COMPARISON`` where offered, else the
    first two names."""
    names = sorted(names if names is not None else discover_methods())
    return [name for name in DEFAULT_COMPARISON if name in names] or names[:2]


# ----- settings as command-line flags (and form fields) ----------------------------------------
@dataclass(frozen=True)
class SettingFlag:
    """One method setting as a command-line flag: shared by every method that has the setting.

    kind: what argparse's ``type=`` is (``settings.flag_type``: a tuple setting's comma parser).
    """

    dest: str
    names: tuple[str, ...]
    kind: Any
    choices: tuple | None
    help: str
    methods: tuple[str, ...]


def setting_flags() -> list[SettingFlag]:
    """Every registered method's settings as flags (``--ig-steps``, ``--n-paraphrases``, ...).

    A setting several methods share is one flag; where their fields say different things (a seed
    of the templates, a seed of the knockout's draws), its help gives each, with the methods it is
    theirs for.
    """
    flags: dict[str, SettingFlag] = {}
    helps: dict[str, dict[str, list[str]]] = {}  # setting -> its help -> the methods that give it
    for method in sorted(discover_methods().values(), key=lambda m: m.name):
        for config_field in dataclasses.fields(method.Config):
            name = config_field.name
            helps.setdefault(name, {}).setdefault(setting_help(config_field), []).append(method.name)
            if name in flags:  # one flag: its choices are every method's (each Config checks its own)
                flag = flags[name]
                more = setting_choices(config_field) or ()
                choices = (
                    (*flag.choices, *(c for c in more if c not in flag.choices)) if flag.choices else None
                )
                flags[name] = dataclasses.replace(
                    flag, methods=flag.methods + (method.name,), choices=choices
                )
                continue
            aliases = tuple(f"--{alias}" for alias, dest in method.flag_aliases.items() if dest == name)
            flags[name] = SettingFlag(
                dest=name,
                names=(f"--{name.replace('_', '-')}", *aliases),
                kind=flag_type(
                    setting_type(method.Config, config_field),
                    setting_widget(config_field),
                    own_parse=config_field.metadata.get("parse") is not None,
                ),
                choices=setting_choices(config_field),
                help=setting_help(config_field),
                methods=(method.name,),
            )
    for name, given in helps.items():
        if len(given) > 1:
            combined = "; ".join(
                f"{', '.join(methods)}: {text.rstrip('.')}" for text, methods in given.items()
            )
            flags[name] = dataclasses.replace(flags[name], help=combined + ".")
    return list(flags.values())
