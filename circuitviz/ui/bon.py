"""Reading a Best-of-N family result (``circuitviz/methods/bon.py``) for the app.

The family keeps its data in ``result.details`` (a ``QueryCircuitDetails``: pairs, candidates, per-budget candidate
points and winners, shared-subcircuit data, iBoN/BoN-CSM ingredients). This module is the one
place of the app that knows that layout, so the pages see tidy rows, edge sets and masks.
Circuits at any budget come from ``variant_circuit`` (no model pass); candidate circuits come
from the score matrices the run stored, never from a new scoring pass.
"""

from __future__ import annotations

BON_METHODS = ("bon", "ibon", "bon-csm")


def registered_bon_methods(registered: dict) -> list[str]:
    return [name for name in BON_METHODS if name in registered]


def is_query_circuits(result) -> bool:
    return getattr(getattr(result, "details", None), "kind", None) == "query-circuits"


def _candidate_pairs(result) -> list[int]:
    return [int(k) for k in result.details.candidates]


def candidate_names(result) -> list[str]:
    """'q' for the prompt itself, 'p<i>' for paraphrase pair i."""
    return ["q" if k == 0 or i == 0 else f"p{k}" for i, k in enumerate(_candidate_pairs(result))]


def paraphrase_rows(result) -> list[dict]:
    """One row per pair: text, corruption, source, the model's answer, whether it is a candidate."""
    candidates = set(_candidate_pairs(result))
    rows = []
    for index, pair in enumerate(result.details.pairs):
        rows.append(
            {
                "pair": "q" if index == 0 else f"p{index}",
                "paraphrase": str(pair.get("clean", "")),
                "corrupted": str(pair.get("corrupted", "")),
                "source": str(pair.get("source", "")),
                "model's answer": str(pair.get("model_answer") or ""),
                "answer matches": bool(pair.get("answer_matches", True)),
                "candidate": index in candidates,
            }
        )
    return rows


def _budget_entry(result, budget: int) -> dict | None:
    for entry in result.details.per_budget:
        if int(entry.get("budget", -1)) == int(budget):
            return entry
    return None


def candidate_ndf(result, budget: int) -> list[dict]:
    """[{name, ndf, n_edges, winner}] for the BoN candidates evaluated at ``budget`` ([] if none)."""
    entry = _budget_entry(result, budget)
    if entry is None:
        return []
    names = candidate_names(result)
    winner = int(entry.get("winner", -1))
    rows = []
    for index, point in enumerate(entry.get("candidates") or []):
        ndf = point.get("ndf")
        rows.append(
            {
                "name": names[index] if index < len(names) else f"candidate {index}",
                "ndf": float("nan") if ndf is None else float(ndf),
                "n_edges": int(point.get("n_edges", 0)),
                "winner": index == winner,
            }
        )
    return rows


def shared_entry(result, budget: int) -> dict | None:
    """The run's shared-subcircuit data at ``budget`` (common edges, UpSet sizes, Jaccard)."""
    for entry in result.details.shared:
        if int(entry.get("budget", -1)) == int(budget):
            return entry
    return None


def candidate_masks(model, model_id: str, result, budget: int, store) -> dict | None:
    """{candidate: its circuit mask at ``budget``}, rebuilt from the stored score matrices (the
    candidate's top ``budget`` edges, pruned like the run prunes them).

    None when the run did not keep its scores (``cache_scores`` off) or they are gone: then
    only the sizes the run recorded are known, and nothing is recomputed here."""
    if not result.config.get("cache_scores", True):
        return None
    from ..graph import prune, top_n
    from ..tasks import PromptTask

    try:  # the run's own key function and scorer, so the keys match what it stored
        from ..methods.bon import QueryCircuitConfig
        from ..methods.bon import base_scorer as _base_scorer
        from ..query.scoring import score_key

        config = QueryCircuitConfig(**result.config)
        method, method_config = _base_scorer(config)
    except (ImportError, AttributeError, TypeError, ValueError):
        return None
    pairs = result.details.pairs
    spec = result.graph
    masks = {}
    for name, k in zip(candidate_names(result), _candidate_pairs(result)):
        pair = pairs[k]
        task = PromptTask(
            pair["clean"], pair["corrupted"], pair["answer"], tuple(pair["foils"]), pair["metric"]
        )
        state = store.load_state(score_key(model, model_id, spec, task, method, method_config), kind="scores")
        if not isinstance(state, dict) or "scores" not in state:
            return None
        masks[name] = prune(spec, top_n(spec, state["scores"].float(), budget))
    return masks


def candidate_edge_sets(model, model_id: str, result, budget: int, store) -> dict[str, set[str]] | None:
    """{candidate: its circuit's edges} at ``budget`` (``candidate_masks``), or None."""
    masks = candidate_masks(model, model_id, result, budget, store)
    if masks is None:
        return None
    return {name: set(result.graph.edge_names_of(mask)) for name, mask in masks.items()}


def candidates_at(model, model_id: str, result, budget: int, store) -> list[dict]:
    """[{name, ndf, n_edges, winner}] of every candidate at ``budget``: the run's own figures
    where it evaluated the candidates there, else their circuits rebuilt from the stored scores
    and evaluated now in one batched pass (iBoN evaluates candidates at its anchors only, so the
    slider's budget is usually not among them). The winner is the most faithful, as BoN picks it."""
    evaluated = candidate_ndf(result, budget)
    if evaluated or model is None:
        return evaluated
    masks = candidate_masks(model, model_id, result, budget, store)
    if not masks:
        return []
    from ..api import evaluate_circuits
    from ..query.pool import winner

    baseline, points = evaluate_circuits(model, result.task, list(masks.values()), [budget] * len(masks))
    best = winner(points, baseline)
    return [
        {"name": name, "ndf": point.ndf, "n_edges": point.n_edges, "winner": index == best}
        for index, (name, point) in enumerate(zip(masks, points))
    ]


# ----- the estimate of a run whose scores an earlier run stored ------------------------------------
def stored_work(model, model_id: str, task, settings: dict, store) -> tuple[bool, bool]:
    """(the prompt's own pair score matrix is stored, its circuit metrics memo is stored) for the
    base scorer of ``settings``: a sibling variant (BoN before iBoN) stored both, so this run
    scores nothing and re-evaluates few circuits. The prompt's pair stands for all the pairs:
    the variants of one prompt and settings share them."""
    if store is None or not settings.get("cache_scores", True):
        return False, False
    from ..methods.bon import QueryCircuitConfig, base_scorer
    from ..models.adapter import adapter_of
    from ..query.pool import metrics_key
    from ..query.scoring import score_key

    try:
        method, method_config = base_scorer(QueryCircuitConfig(**settings))
    except (TypeError, ValueError):
        return False, False
    spec = adapter_of(model).spec
    scores = store.load_state(score_key(model, model_id, spec, task, method, method_config), kind="scores")
    metrics = store.load_state(metrics_key(model, model_id, spec, task), kind="circuit-metrics")
    return isinstance(scores, dict) and "scores" in scores, isinstance(metrics, dict)


def priced_with_stored_scores(
    estimate, model, model_id: str, task, method: str, settings: dict, n_budgets: int, store
):
    """``estimate`` without the work an earlier run of the family stored: the pairs' scoring when
    their score matrices are in the store, the candidates' evaluation when their metrics are.

    The estimate prices every pair's scoring; iBoN after BoN on the same prompt finds it all
    stored and was announced at four times what it took. What is stored is priced off by the
    share of time it took in the family's last run here (its ``scoring_s`` and the candidates'
    part of its ``evaluation_s``), else by its share of the passes. The FLOPs shrink with the
    seconds, so the finished run calibrates the rate with the work it really did."""
    if estimate is None or method not in BON_METHODS:
        return estimate
    scores_stored, metrics_stored = stored_work(model, model_id, task, settings, store)
    if not scores_stored:
        return estimate
    import dataclasses

    from .. import calibration

    pairs = int(settings.get("n_paraphrases", 9)) + 1
    candidates = 2.0 * n_budgets * pairs  # the candidates' evaluation passes (bon's Cost)
    evaluation_stored = candidates / (candidates + n_budgets) if metrics_stored else 0.0
    family = (method, *(name for name in BON_METHODS if name != method))
    last = calibration.last_run(estimate.device, family)
    if last is not None and last["seconds"] > 0:
        timings = last["timings"]
        stored = timings.get("scoring_s", 0.0) + evaluation_stored * timings.get("evaluation_s", 0.0)
        share = max(1.0 - stored / last["seconds"], 0.02)
    else:
        share = max(
            1.0 - _stored_passes(model, estimate, settings, pairs, evaluation_stored * candidates), 0.02
        )
    what = "scores and evaluations" if metrics_stored else "scores"
    return dataclasses.replace(
        estimate,
        seconds=estimate.seconds * share,
        flops=estimate.flops * share,
        sequences=estimate.sequences * share,
        priced=f"{estimate.priced}; without the paraphrases' {what} an earlier run stored",
    )


def _stored_passes(model, estimate, settings: dict, pairs: int, evaluation_passes: float) -> float:
    """The share of the estimate's passes that stored scores and evaluations save."""
    from ..methods.bon import QueryCircuitConfig, base_scorer
    from ..models.adapter import adapter_of

    base, base_config = base_scorer(QueryCircuitConfig(**settings))
    scoring = base.estimate(base_config, adapter_of(model).spec, estimate.n_tokens, 0).passes * pairs
    return (scoring + evaluation_passes) / max(estimate.sequences, 1.0)


# ----- the Paraphrases page's views --------------------------------------------------------------
# the page's own starting settings: 5 IG steps per pair, 6 budgets and no extra variants keep 9
# paraphrases to about a minute on a busy 2-core CPU (20 steps, 10 budgets and the four other
# variants take about four times as long); the form raises them
PAGE_DEFAULTS = {"ig_steps": 5, "n_paraphrases": 9, "compare": False}
PAGE_BUDGETS = (50, 100, 200, 500, 1000)


def page_budgets(n_edges: int) -> list[int]:
    """The page's default budgets: the candidates are evaluated at each, so few and small."""
    return [b for b in PAGE_BUDGETS if b < n_edges] + [int(n_edges)]


TABLE_COLUMNS = (
    "pair",
    "candidate",
    "answer matches",
    "model's answer",
    "source",
    "replaced",
    "paraphrase",
    "corrupted",
)
READ_ONLY_COLUMNS = TABLE_COLUMNS[:6]


# the two texts wide (the table scrolls sideways to the rest of the corrupted one); what the
# corruption replaces has its own short column before them, so it is never cut off
TABLE_WIDTHS = {"paraphrase": {"width": "large"}, "corrupted": {"width": "large"}}


def replaced_words(clean: str, corrupted: str) -> str:
    """What a corruption replaces, word for word ("Mary → Alice, John → Bob"); the whole
    corrupted text's length in words when the two do not align word by word."""
    before, after = clean.split(), corrupted.split()
    if len(before) != len(after):
        return f"{len(after)} words (of {len(before)})"
    pairs = [f"{a} → {b}" for a, b in zip(before, after) if a != b]
    return ", ".join(pairs) if pairs else "nothing"


def table_rows(result) -> list[dict]:
    """``paraphrase_rows`` with the short columns first, so none is cut off by the long texts,
    and what each corruption replaces."""
    rows = []
    for row in paraphrase_rows(result):
        row = {**row, "replaced": replaced_words(row["paraphrase"], row["corrupted"])}
        rows.append({name: row[name] for name in TABLE_COLUMNS})
    return rows


def winner_note(result, budget: int, point, scores: list[dict], at: int) -> str:
    """The sentence that puts the candidates' winner NDF and the result's NDF side by side."""
    winner = next((row for row in scores if row["winner"]), None)
    if winner is None or point is None:
        return ""
    if result.method == "bon" and at == budget:
        return (
            f"Best-of-N keeps the winner, {winner['name']} (NDF {winner['ndf']:.3f} at {at:,} edges): "
            f"its circuit is the one drawn below (NDF {point.ndf:.3f})."
        )
    if result.method == "bon":
        return (
            f"The candidates were evaluated at {at:,} edges, the nearest of the run's budgets; there the "
            f"winner is {winner['name']} (NDF {winner['ndf']:.3f})."
        )
    return (
        f"The winner among the candidates at {at:,} edges, {winner['name']}, reaches NDF {winner['ndf']:.3f}; "
        f"the {result.method} circuit drawn below at {budget:,} edges is another circuit, built from the "
        f"winners' edges at the anchor budgets, and its NDF is {point.ndf:.3f}."
    )


def clicked_intersection(event, shown) -> str | None:
    """The label of the UpSet bar clicked (a plotly selection event), or None."""
    points = ((event or {}).get("selection") or {}).get("points") or []
    for item in points:
        if item.get("curve_number", 0) == 0 and item.get("point_index") is not None:
            index = int(item["point_index"])
            if 0 <= index < len(shown):
                return shown[index].label
    return None


def highlight_in_circuit(
    edges: set[str], circuit_edges: set[str], method: str = "ibon", members: tuple[str, ...] = ()
) -> tuple[set[str] | None, str]:
    """(the intersection's edges to light up, the sentence on how many are in the drawn circuit):
    an intersection none of whose edges is drawn lights nothing, rather than greying everything.
    Best-of-N draws one candidate (the winner), so its sentence says the intersection leaves the
    winner out; iBoN and BoN-CSM draw a circuit built from the winners' edges."""
    inside = edges & circuit_edges
    if not inside:
        why = (
            "the circuit drawn is the winning candidate's, and this intersection holds edges of "
            f"{' & '.join(members) or 'other candidates'} only"
            if method == "bon"
            else f"the {method} circuit drawn is built from the winners' edges at the anchor budgets, not from these"
        )
        return (
            None,
            f"None of this intersection's {len(edges):,} edges is in the circuit drawn below ({why}).",
        )
    return (
        inside,
        f"{len(inside):,} of this intersection's {len(edges):,} edges are in the circuit drawn below.",
    )
