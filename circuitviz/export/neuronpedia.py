"""Attribution graphs in Neuronpedia's graph JSON: written for its viewer, read back from any
file in that format (ours, circuit-tracer's, Neuronpedia's downloads).

The format (Neuronpedia's published graph schema) is ``{"metadata": {slug, scan, prompt_tokens,
prompt, ...}, "qParams": {...}, "nodes": [{node_id, feature, layer, ctx_idx, feature_type,
jsNodeId, clerp, influence, activation}], "links": [{source, target, weight}]}``.

How circuitviz's nodes map onto it (the format was made for transcoder features; a circuit of
whole heads and MLPs is mapped as follows):

- a token's embedding at position p: ``feature_type`` "embedding", ``layer`` "E", ``node_id``
  ``E_{token id}_{p}``, ``feature`` p (as circuit-tracer writes embeddings);
- the answer's logit at the last position: ``feature_type`` "logit", ``layer`` n_layers + 1,
  ``feature`` the answer's token id, ``node_id`` ``{n_layers + 1}_{token id}_{p}``;
- an attention head h of layer l at position p: ``feature_type`` "lorsa" (Neuronpedia's type for
  attention units that move information between positions), ``feature`` h, ``node_id``
  ``{l}_{h}_{p}``;
- the MLP of layer l at position p: ``feature_type`` "mlp reconstruction error", ``feature``
  null, ``node_id`` ``{l}_-1_{p}``: the MLP's whole output at that position, which is what a
  graph without transcoder features at that layer keeps as its MLP node.

``clerp`` is our label (the component's name and its caption), ``ctx_idx`` the position,
``influence`` the node's cumulative share of the graph's |contribution| (nodes sorted strongest
first, as circuit-tracer's pruning reads it; ``node_threshold`` 1.0 shows every node),
``activation`` the node's contribution (the estimated rise of the metric it carries). Each node
also keeps ``circuitviz_component`` so our own files read back exactly. Links carry our weights
(minus the unit's score). ``qParams.pinnedIds`` are the nodes of the strongest paths.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Sequence

from ..core import json_text
from ..core.text import (
    counted,
    invisible_as_codes,
    invisible_characters,
    invisible_kinds,
    shown,
    shown_number,
)
from ..positions.view import AttributionGraph, GraphLink, GraphNode, strongest_paths

FORMAT_NAME = "neuronpedia graph JSON"
MAX_LAYER = 10_000  # no model has as many; a file naming such a layer is not a graph of one
_SLUG_CHARACTERS = re.compile(r"[^a-z0-9]+")


class GraphFileError(ValueError):
    """A graph file this reader cannot draw; the message says what is wrong and what to give."""


class GraphExportError(ValueError):
    """A graph that cannot be written in Neuronpedia's format; the message says why in one sentence."""


def export_problem(graph: AttributionGraph) -> str | None:
    """Why ``graph`` cannot be written for Neuronpedia, in one sentence, or None. JSON has no NaN or
    infinity: Python writes them as the bare words ``NaN`` and ``Infinity``, which Neuronpedia's
    viewer (a browser's JSON reader) refuses, so a graph holding one would download as a file that
    does not open there."""
    values = [
        (f"Node {node.component} at position {node.position} has a contribution of", node.influence)
        for node in graph.nodes
    ] + [(f"The link {link.source} -> {link.target} has a weight of", link.weight) for link in graph.links]
    for what, value in values:
        if not math.isfinite(value):
            return (
                f"{what} {value}, not a finite number, so this graph cannot be written for Neuronpedia "
                "(its format has no NaN or infinity)."
            )
    return None


def slug_of(text: str, limit: int = 60) -> str:
    """A Neuronpedia slug: lower-case letters, digits and dashes."""
    slug = _SLUG_CHARACTERS.sub("-", text.lower()).strip("-")
    return (slug[:limit].strip("-")) or "circuit"


def _node_ids(
    node: GraphNode, n_layers: int, token_ids: Sequence[int], answer_id: int | None
) -> tuple[str, str, object, object]:
    """(node_id, jsNodeId, feature, layer) of one node in Neuronpedia's conventions."""
    position = node.position
    if node.kind == "embedding":
        vocab = token_ids[position] if position < len(token_ids) else position
        return f"E_{vocab}_{position}", f"E_{vocab}-{position}", position, "E"
    if node.kind == "logit":
        vocab = answer_id if answer_id is not None else 0
        layer = n_layers + 1
        return f"{layer}_{vocab}_{position}", f"L_{vocab}-{position}", vocab, str(layer)
    if node.kind == "head":
        return (
            f"{node.layer}_{node.head}_{position}",
            f"{node.layer}_{node.head}-{position}",
            node.head,
            str(node.layer),
        )
    return f"{node.layer}_-1_{position}", f"{node.layer}_-1-{position}", None, str(node.layer)


FEATURE_TYPES = {
    "embedding": "embedding",
    "logit": "logit",
    "head": "lorsa",
    "mlp": "mlp reconstruction error",
}


def cumulative_influence(graph: AttributionGraph) -> dict[str, float]:
    """Each node's cumulative share of the graph's summed |contribution|, strongest first."""
    ordered = sorted(graph.nodes, key=lambda node: -abs(node.influence))
    total = sum(abs(node.influence) for node in ordered) or 1.0
    shares, running = {}, 0.0
    for node in ordered:
        running += abs(node.influence)
        shares[node.id] = min(1.0, running / total)
    return shares


def task_ids(model, task) -> dict:
    """``to_neuronpedia``'s ``token_ids`` and ``answer_id`` for a result's task on ``model``: an
    embedding's node id names its token's id, the logit's the answer's (without them the app's
    download named positions and 0: 'E_4_4' and '31_0_5' for 'E_4649_4' and '31_7042_5')."""
    from ..core.tasks import prepare_task  # the tokenizer only: the prompt is not run

    prepared = prepare_task(model, task, need_corrupted=False)
    return {"token_ids": prepared.clean_tokens[0].tolist(), "answer_id": int(prepared.answer_id)}


def to_neuronpedia(
    graph: AttributionGraph,
    *,
    slug: str = "",
    token_ids: Sequence[int] = (),
    answer_id: int | None = None,
    info: dict | None = None,
    view: dict | None = None,
) -> dict:
    """The graph in Neuronpedia's graph JSON (every node and link of ``graph``).

    ``view`` (default: ``graph.view``): the view to save with it, in our node ids: ``pins`` (the
    pinned subgraph; default: the strongest paths), ``groups`` {name: members} (Neuronpedia's
    ``supernodes``, each [name, member, ...]), ``clicked`` (``clickedId``) and ``names`` {node:
    label} (the node's ``clerp``). Raises GraphExportError when a value is not finite
    (``export_problem``)."""
    problem = export_problem(graph)
    if problem:
        raise GraphExportError(problem)
    view = dict(graph.view if view is None else view)
    names = view.get("names") or {}
    ids: dict[str, str] = {}
    nodes = []
    influence = cumulative_influence(graph)
    for node in graph.nodes:
        node_id, js_id, feature, layer = _node_ids(node, graph.n_layers, token_ids, answer_id)
        ids[node.id] = node_id
        label = f"{node.component}: {node.caption}" if node.caption else node.component
        label = str(names.get(node.id, label))
        nodes.append(
            {
                "node_id": node_id,
                "feature": feature,
                "layer": layer,
                "ctx_idx": int(node.position),
                "feature_type": FEATURE_TYPES.get(node.kind, node.kind),
                "jsNodeId": js_id,
                "clerp": label,
                "influence": float(influence[node.id]),
                "activation": float(node.influence),
                "is_target_logit": node.kind == "logit",
                "circuitviz_component": node.component,
            }
        )
    links = [
        {
            "source": ids[link.source],
            "target": ids[link.target],
            "weight": float(link.weight),
            "circuitviz_kind": link.kind,  # which input of the target it feeds (q, k, v, mlp, logits)
        }
        for link in graph.links
    ]
    pins = view.get("pins")
    if pins is None:
        pinned = sorted({ids[node] for path in strongest_paths(graph) for node in path})
    else:
        pinned = [ids[node] for node in pins if node in ids]
    supernodes = [
        [str(name), *[ids[m] for m in members if m in ids]]
        for name, members in (view.get("groups") or {}).items()
        if any(m in ids for m in members)
    ]
    clicked = ids.get(str(view.get("clicked") or ""), "")
    metadata = {
        "slug": slug or slug_of(f"{graph.model_id} {graph.prompt}"),
        "scan": graph.model_id or "unknown",
        "prompt_tokens": list(graph.tokens),
        "prompt": graph.prompt,
        "node_threshold": 1.0,
        "info": {
            "description": graph.title,
            "generator": {"name": "circuitviz"},
            **(info or {}),
        },
    }
    return {  # every number above is finite (export_problem), so json.dumps writes strict JSON
        "metadata": metadata,
        "qParams": {
            "pinnedIds": pinned,
            "supernodes": supernodes,
            "linkType": "both",
            "clickedId": clicked,
            "sg_pos": "",
        },
        "nodes": nodes,
        "links": links,
    }


# ----- reading -----------------------------------------------------------------------------------
def _require(condition: bool, message: str) -> None:
    if not condition:
        raise GraphFileError(message)


def _layer_number(value, feature_type: str) -> int | None:
    """A node's layer as a number: embeddings -1, logits None (placed after the last layer)."""
    if feature_type == "embedding" or value == "E":
        return -1
    if feature_type == "logit":
        return None
    try:
        layer = int(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: a layer of Infinity
        raise GraphFileError(f"A node's layer {str(value)[:20]!r} is not a number or 'E'.") from None
    if not -1 <= layer < MAX_LAYER:
        raise GraphFileError(
            f"A node's layer {str(value)[:20]!r} is not a layer of a model (0 to {MAX_LAYER - 1:,})."
        )
    return layer


def _finite(value, what: str) -> float:
    """A number of the file as a float, or GraphFileError in one sentence when it is not finite
    (JSON as Python reads it allows NaN and Infinity, and a 400-digit integer overflows a float):
    the drawing would fail in the browser on it."""
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise GraphFileError(f"{what} is {shown_number(value, 20)}, not a finite number; fix it in the file.")
    return number


def _is_number(value) -> bool:
    """A JSON number (true and false are Python ints, but no weight or activation)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _kind_of(feature_type: str) -> str:
    text = feature_type.lower()
    if text in ("embedding", "logit"):
        return text
    if "lorsa" in text or "attention" in text or "head" in text:
        return "head"
    if "mlp" in text or "transcoder" in text:
        return "mlp"
    return "other"


def _component(entry: dict, kind: str, layer: int) -> str:
    """Our component name for an imported node (``circuitviz_component`` when we wrote it)."""
    if isinstance(entry.get("circuitviz_component"), str):
        return entry["circuitviz_component"]
    if kind == "embedding":
        return "input"
    if kind == "logit":
        return "logits"
    feature = entry.get("feature")
    return f"L{layer} #{feature}" if feature is not None else f"L{layer} {kind}"


def from_neuronpedia(data: dict, origin: str = "the graph file") -> AttributionGraph:
    """An ``AttributionGraph`` from a parsed Neuronpedia graph JSON (GraphFileError in one
    sentence when it is not one)."""
    _require(isinstance(data, dict), f"{origin} is not a JSON object; give a Neuronpedia graph JSON.")
    missing = [key for key in ("metadata", "nodes", "links") if key not in data]
    _require(
        not missing,
        f"{origin} has no {', '.join(missing)}; a Neuronpedia graph JSON has metadata, nodes and links.",
    )
    metadata, entries, link_entries = data["metadata"], data["nodes"], data["links"]
    _require(
        isinstance(metadata, dict)
        and isinstance(metadata.get("prompt_tokens"), list)
        and all(isinstance(token, str) for token in metadata["prompt_tokens"]),
        f"{origin}: metadata.prompt_tokens must be a list of tokens in quotes.",
    )
    _require(
        isinstance(entries, list) and isinstance(link_entries, list),
        f"{origin}: nodes and links must be lists.",
    )
    parsed = []
    for entry in entries:
        _require(isinstance(entry, dict), f"{origin}: every node must be an object.")
        lacking = [key for key in ("node_id", "layer", "ctx_idx", "feature_type") if key not in entry]
        _require(not lacking, f"{origin}: a node lacks {', '.join(lacking)}.")
        _require(
            isinstance(entry["ctx_idx"], int)
            and not isinstance(entry["ctx_idx"], bool)
            and entry["ctx_idx"] >= 0,
            f"{origin}: node {str(entry['node_id'])[:30]!r} has a ctx_idx that is not a token position "
            "(an integer from 0).",
        )
        feature_type = str(entry["feature_type"])
        parsed.append((entry, feature_type, _layer_number(entry["layer"], feature_type)))
    layers = [layer for _, _, layer in parsed if layer is not None and layer >= 0]
    n_layers = max(layers) + 1 if layers else 0
    nodes = []
    for entry, feature_type, layer in parsed:
        kind = _kind_of(feature_type)
        layer = n_layers if layer is None else layer
        head = entry.get("feature") if kind == "head" and isinstance(entry.get("feature"), int) else None
        influence = entry.get("activation")
        _require(
            influence is None or _is_number(influence),
            f"{origin}: the activation of node {shown(str(entry['node_id']), 30)} is not a number or null.",
        )
        influence = _finite(
            influence or 0.0, f"{origin}: the activation of node {shown(str(entry['node_id']), 30)}"
        )
        clerp = str(entry.get("clerp") or "")
        component = _component(entry, kind, layer)
        caption = clerp[len(component) + 2 :] if clerp.startswith(f"{component}: ") else clerp
        nodes.append(
            GraphNode(
                id=str(entry["node_id"]),
                component=component,
                kind=kind,
                layer=layer,
                position=int(entry["ctx_idx"]),
                head=head,
                influence=influence,
                caption=caption if caption != component else "",
                details={"feature type": feature_type},
            )
        )
    known = {node.id for node in nodes}
    if len(known) < len(nodes):  # the drawing keys its nodes by id: a second one stopped it in the browser
        seen: set[str] = set()
        twice = next(node.id for node in nodes if node.id in seen or seen.add(node.id))
        raise GraphFileError(
            f"{origin}: the node_id {shown(twice, 30)} is given to two nodes; each node needs its own."
        )
    links, dangling = [], 0
    for entry in link_entries:
        _require(
            isinstance(entry, dict) and {"source", "target", "weight"} <= set(entry),
            f"{origin}: every link needs source, target and weight.",
        )
        _require(_is_number(entry["weight"]), f"{origin}: a link's weight is not a number.")
        _require(
            isinstance(entry["source"], str) and isinstance(entry["target"], str),
            f"{origin}: a link's source and target must be node ids in quotes.",
        )
        if entry["source"] in known and entry["target"] in known:
            kind = str(entry.get("circuitviz_kind") or "link")
            weight = _finite(
                entry["weight"],
                f"{origin}: the weight of the link {shown(entry['source'], 30)} -> {shown(entry['target'], 30)}",
            )
            links.append(GraphLink(str(entry["source"]), str(entry["target"]), weight, kind))
        else:
            dangling += 1
    notes = (
        [f"{dangling:,} links of the file name nodes it does not have; they are not drawn."]
        if dangling
        else []
    )
    beyond = [node for node in nodes if node.position >= len(metadata["prompt_tokens"])]
    if beyond:
        notes.append(
            f"The file places {counted(len(beyond), 'node')} past its {len(metadata['prompt_tokens']):,} "
            f"prompt_tokens (the first: {shown(beyond[0].id, 30)} at position {beyond[0].position:,}); "
            "their column is drawn with no token."
        )
    info = metadata.get("info") if isinstance(metadata.get("info"), dict) else {}
    view, sentence = read_qparams(data.get("qParams"), known)
    if sentence:
        notes.append(sentence)
    tokens = [str(token) for token in metadata["prompt_tokens"]]
    title = str(info.get("description") or metadata.get("slug") or "")
    prompt = str(metadata.get("prompt", ""))
    # (the tokens are drawn by their repr, which writes such characters as codes already)
    hidden = "".join([title, prompt, *(node.component + node.caption for node in nodes)])
    found = len(invisible_characters(hidden))
    if found:  # a right-to-left override drew a label or token reversed
        notes.append(
            f"The file's labels or title hold {counted(found, 'invisible character')} "
            f"({invisible_kinds(hidden)}), which draw text reordered or not at all: "
            f"{'it is' if found == 1 else 'they are'} written as {'its code' if found == 1 else 'codes'}."
        )
        title, prompt = invisible_as_codes(title), invisible_as_codes(prompt)
        nodes = [
            dataclasses.replace(
                node, component=invisible_as_codes(node.component), caption=invisible_as_codes(node.caption)
            )
            for node in nodes
        ]
    return AttributionGraph(
        tokens=tokens,
        nodes=nodes,
        links=links,
        n_layers=n_layers,
        title=title,
        prompt=prompt,
        model_id=str(metadata.get("scan", "")),
        notes=notes,
        source=origin,
        view=view,
    )


MAX_PINS = 2000


def read_qparams(qparams, known: set[str]) -> tuple[dict, str]:
    """The saved view of a graph file's ``qParams`` in node ids ({pins, groups, clicked}), and
    one sentence on what was left out (unknown node ids, a group of nothing, a huge list)."""
    from ..render.groups import check_groups

    if not isinstance(qparams, dict):
        return {}, ""
    problems = []
    pins = qparams.get("pinnedIds") or []
    if not isinstance(pins, list) or len(pins) > MAX_PINS:
        problems.append(f"its pinned nodes are not a list of at most {MAX_PINS:,}, so none is pinned")
        pins = []
    unknown = [p for p in pins if not isinstance(p, str) or p not in known]  # a list is no node id
    if unknown:
        problems.append(
            f"{counted(len(unknown), 'pinned node')} it does not have {'is' if len(unknown) == 1 else 'are'} left out"
        )
    groups, group_sentence = check_groups(qparams.get("supernodes") or [], known)
    if group_sentence:
        problems.append(group_sentence.removeprefix("Groups: ").removesuffix("; the rest is shown."))
    clicked = qparams.get("clickedId") or ""
    if not isinstance(clicked, str) or (clicked and clicked not in known):
        problems.append("its clicked node is one it does not have, so none is clicked")
        clicked = ""
    view = {
        "pins": [p for p in pins if isinstance(p, str) and p in known],
        "groups": groups,
        "clicked": clicked,
    }
    # each part a clause of its own: "...: group 'x' names 1 node this circuit does not have were left
    # out." and "1 pinned nodes" read so under an opened file's graph (Chromium, 2026-12-07)
    sentence = f"The file's saved view: {'; '.join(problems)}; the rest is shown." if problems else ""
    return view, sentence


def read_neuronpedia_bytes(data: bytes, origin: str = "the graph file") -> AttributionGraph:
    """Read a Neuronpedia graph JSON given as the file's bytes: UTF-8, with or without the byte
    order mark some editors write; anything else is refused in one sentence (its bytes were read
    with replacement characters before, so a Latin-1 label showed U+FFFD unsaid)."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as problem:
        raise GraphFileError(
            f"{origin} is not UTF-8 text (byte {problem.start + 1:,}); save it as UTF-8 and open it again."
        ) from None
    return read_neuronpedia(text, origin)


def read_neuronpedia(text: str, origin: str = "the graph file") -> AttributionGraph:
    """Parse and read a Neuronpedia graph JSON given as text."""
    try:
        data = json_text.loads(text)
    except json.JSONDecodeError as error:
        raise GraphFileError(f"{origin} is not valid JSON ({error.msg} at line {error.lineno}).") from None
    except RecursionError:
        raise GraphFileError(f"{origin} is nested too deeply to be a graph file.") from None
    return from_neuronpedia(data, origin)
