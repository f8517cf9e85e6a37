"""Groups (supernodes): named sets of nodes drawn as one node, their figures as a unit, and a
proposed grouping with its rule said.

``grouped`` redraws a ``VisGraph`` with each group's members replaced by one node (at the place
of its lowest member, so it sits in its layers' rows and takes a place no other node holds; its
members listed on hover), the edges into and out of the members redirected to it (parallel ones
merged, their widths added; edges inside a group dropped). ``group_edges`` does the same to the
drawing's ``GraphEdge``s, so a group's card sums its members' edges. ``check_groups`` reads groups
from untrusted data (a URL, a file): unknown members are dropped, a group of nothing is left out,
and one sentence says so. ``propose_groups`` groups a circuit's nodes by role and layer band.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence

from ..core.text import counted, invisible_as_codes, invisible_characters, invisible_kinds
from .vis import VisGraph, escape

MAX_GROUPS = 50
MAX_NAME = 40
GROUP_COLOUR = "#C9B3E6"
GROUP_ROOM = 14  # characters of a group's name drawn at least (cut with "…" past its column's width)
_HEAD = re.compile(r"^a(\d+)\.h(\d+)")


def group_id(name: str) -> str:
    return f"group:{name}"


def check_groups(
    data, known: set[str], read_problems: Sequence[str] = ()
) -> tuple[dict[str, list[str]], str]:
    """({name: members}, the sentence saying what was left out, or "") from untrusted ``data``:
    a dict name -> list of node ids, or a list of {"name", "members"} (Neuronpedia's supernodes
    are lists [name, member, ...]); ``read_problems``: what reading the text left out
    (``parse_groups_text``), said first."""
    problems: list[str] = list(read_problems)
    pairs: list[tuple[object, object]] = []
    if isinstance(data, dict):
        pairs = list(data.items())
    elif isinstance(data, list):
        for entry in data:
            if isinstance(entry, dict):
                pairs.append((entry.get("name"), entry.get("members")))
            elif isinstance(entry, list) and entry:
                pairs.append((entry[0], entry[1:]))
            else:
                problems.append("an entry that is not a group")
    elif data:
        return {}, "The groups are not a list or an object of names; they were left out."
    if len(pairs) > MAX_GROUPS:
        return {}, f"{len(pairs):,} groups is more than the {MAX_GROUPS} a view may hold; they were left out."
    groups: dict[str, list[str]] = {}
    taken: set[str] = set()
    for name, members in pairs:
        if not isinstance(name, str) or not name.strip() or not isinstance(members, list):
            problems.append("a group without a name or a list of members")
            continue
        if len(" ".join(name.split())) > MAX_NAME:
            problems.append(f"a group name cut to its first {MAX_NAME} characters")
        name = " ".join(name.split())[:MAX_NAME]
        hidden = invisible_characters(name)
        if hidden:  # U+202E drew 'evil' reversed as 'live' on the canvas, in the card and the hover
            kinds, name = invisible_kinds(name), invisible_as_codes(name)
            one = len(hidden) == 1
            problems.append(
                f"group '{name}' held {counted(len(hidden), 'invisible character')} ({kinds}), which "
                f"{'draws' if one else 'draw'} a name reordered or not at all: "
                f"{'it is written as its code' if one else 'they are written as their codes'}"
            )
        kept = [m for m in dict.fromkeys(str(m) for m in members[:2000]) if m in known and m not in taken]
        unknown = [m for m in dict.fromkeys(str(m) for m in members[:2000]) if m not in known]
        absent = f"{counted(len(unknown), 'node')} this circuit does not have"
        if not kept:  # one sentence a group: 'names 1 node ...; holds no node ...' said one thing twice
            if unknown and len(unknown) == len(set(map(str, members[:2000]))):
                problems.append(f"group {name!r} names only {absent}, so it holds no node of this circuit")
            else:
                also_absent = "names " + absent + " and " if unknown else ""
                problems.append(
                    f"group {name!r} {also_absent}holds no node of this circuit an earlier group has not taken"
                )
            continue
        if unknown:
            problems.append(f"group {name!r} names {absent}")
        taken.update(kept)
        groups[name] = kept
    sentence = ("Groups: " + "; ".join(dict.fromkeys(problems)) + "; the rest is shown.") if problems else ""
    return groups, sentence


def group_edges(edges: Sequence, groups: Mapping[str, Sequence[str]]) -> list:
    """The edges with each group's members replaced by the group (edges inside a group dropped)."""
    owner = {member: group_id(name) for name, members in groups.items() for member in members}
    out = []
    for edge in edges:
        source, target = owner.get(edge.source, edge.source), owner.get(edge.target, edge.target)
        if source == target and source.startswith("group:"):
            continue
        out.append(dataclasses.replace(edge, source=source, target=target))
    return out


def grouped(graph: VisGraph, groups: Mapping[str, Sequence[str]]) -> VisGraph:
    """``graph`` with each group drawn as one node (see the module docstring)."""
    by_id = {node["id"]: node for node in graph.nodes}
    owner: dict[str, str] = {}
    group_nodes = []
    for name, members in groups.items():
        present = [m for m in members if m in by_id and m not in owner]
        if not present:
            continue
        gid = group_id(name)
        for member in present:
            owner[member] = gid
        anchor = max((by_id[m] for m in present), key=lambda node: (node["y"], -node["x"]))
        width = max(len(line) for line in str(anchor.get("label", "")).split("\n"))
        room = max(width, GROUP_ROOM)
        label = name if len(name) <= room else name[: room - 1] + "…"
        members_text = ", ".join(escape(m) for m in present)
        group_nodes.append(
            {
                **{k: v for k, v in anchor.items() if k not in ("title", "label", "members", "group_name")},
                "id": gid,
                "label": f"{label}\n({len(present)})" if "\n" in str(anchor.get("label", "")) else label,
                "title": f"<b>{escape(name)}</b><br>a group of {len(present)} nodes: {members_text}",
                "color": {"background": GROUP_COLOUR, "border": "#333333"},
                "borderWidth": 2,
                "members": present,
                "group_name": name,
            }
        )
    nodes = [node for node in graph.nodes if node["id"] not in owner] + group_nodes
    merged: dict[tuple[str, str, str], dict] = {}
    for edge in graph.edges:
        source, target = owner.get(edge["from"], edge["from"]), owner.get(edge["to"], edge["to"])
        if source == target and source in {n["id"] for n in group_nodes}:
            continue
        if source == edge["from"] and target == edge["to"]:
            merged[(source, target, str(edge["id"]))] = edge
            continue
        colour = str(edge.get("color", {}).get("color"))
        key = (source, target, colour)
        if key in merged:
            merged[key]["width"] = min(12.0, merged[key]["width"] + edge["width"])
            merged[key]["title"] = merged[key]["title"] + "<br>" + edge["title"]
        else:
            merged[key] = {**edge, "from": source, "to": target, "id": f"{edge['id']}#group"}
    return VisGraph(
        nodes,
        list(merged.values()),
        legend=graph.legend,
        legend_more=graph.legend_more,
        title=graph.title,
        notes=graph.notes,
        kind=graph.kind,
    )


def _band(layer: int, n_layers: int) -> str:
    third = max(1, -(-n_layers // 3))
    return ("early", "middle", "late")[min(2, layer // third)]


PROPOSAL_RULE = (
    "Proposed by one rule: a node with an edge into the answer's logit is a 'writer' (it writes the "
    "answer); any other head a 'mover' (it moves information between positions), any other MLP an "
    "'MLP'; each split by layer band (early, middle, late thirds of the model). Edit the lines below "
    "(one group a line: name: node, node) and apply them."
)


def propose_groups(edges: Sequence, n_layers: int) -> dict[str, list[str]]:
    """{name: members} by ``PROPOSAL_RULE`` over the nodes of ``edges`` (input and logits stay out)."""
    writes = {edge.source for edge in edges if edge.target == "logits"}
    nodes = sorted({n for edge in edges for n in (edge.source, edge.target)} - {"input", "logits"})
    groups: dict[str, list[str]] = {}
    for node in nodes:
        component = node.split("@")[0]
        head = _HEAD.match(component)
        layer = int(head.group(1)) if head else int(re.sub(r"\D", "", component.split(".")[0]) or 0)
        role = "writers" if node in writes else ("movers" if head else "MLPs")
        groups.setdefault(f"{_band(layer, n_layers)} {role}", []).append(node)
    return {name: members for name, members in groups.items() if len(members) > 1}


def groups_text(groups: Mapping[str, Sequence[str]]) -> str:
    """Groups as editable text: one line a group, 'name: node, node'."""
    return "\n".join(f"{name}: {', '.join(members)}" for name, members in groups.items())


def parse_groups_text(text: str) -> tuple[dict[str, list[str]], list[str]]:
    """The inverse of ``groups_text``, and what it could not read, as phrases for
    ``check_groups``'s sentence: lines without a colon, and a name given on several lines (the
    last line is kept). Blank lines are nothing."""
    groups: dict[str, list[str]] = {}
    unread, repeated = 0, []
    for line in str(text).splitlines():
        if not line.strip():
            continue
        if ":" not in line:
            unread += 1
            continue
        name, _, members = line.rpartition(":") if line.count(":") > 1 else line.partition(":")
        if name.strip() in groups:
            repeated.append(name.strip())
        groups[name.strip()] = [m.strip() for m in members.split(",") if m.strip()]
    problems = (
        [f"{unread} line{'s' if unread != 1 else ''} without a colon ('name: node, node')"] if unread else []
    )
    problems += [
        f"group {name[:MAX_NAME]!r} on more than one line (the last one kept)"
        for name in dict.fromkeys(repeated)
    ]
    return groups, problems
