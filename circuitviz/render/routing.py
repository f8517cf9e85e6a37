"""Edges drawn around the nodes they do not join: in the layered layout a straight edge (into the
logits or an MLP) or a slightly curved one (into a head) runs through every node that lies on its
way, and an edge hidden behind a box reads as ending there. ``route_around`` bends such an edge
(vis-network's ``curvedCW``/``curvedCCW``, the least roundness that clears every box) and leaves
an edge that crosses no box as it was.

The curves are worked out as vis-network draws them (``BezierEdgeStatic``: a quadratic Bézier
through a via point), so what is checked here is what the page shows.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy

from .vis import node_box

ROUNDNESS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7)  # tried in turn, each way round, the least first
SAMPLES = 24  # points along an edge checked against the boxes
SHRINK = 2.0  # layout units taken off each side of a box: an edge that grazes a corner is not hidden


def via_point(start: tuple[float, float], end: tuple[float, float], smooth) -> tuple[float, float] | None:
    """The control point vis-network gives an edge from ``start`` to ``end`` with ``smooth``
    (``False``, or {"type": "curvedCW" | "curvedCCW", "roundness": r}); None for a straight edge."""
    if not smooth or not isinstance(smooth, dict) or smooth.get("type") not in ("curvedCW", "curvedCCW"):
        return None
    factor = float(smooth.get("roundness", 0.5))
    dx, dy = end[0] - start[0], start[1] - end[1]
    radius = math.hypot(dx, dy)
    turn = 0.5 * factor + 0.5 if smooth["type"] == "curvedCW" else -0.5 * factor + 0.5
    angle = (math.atan2(dy, dx) + turn * math.pi) % (2 * math.pi)
    reach = (0.5 * factor + 0.5) * radius
    return start[0] + reach * math.sin(angle), start[1] + reach * math.cos(angle)


def edge_points(start, end, smooth, samples: int = SAMPLES) -> numpy.ndarray:
    """[samples, 2] points along the drawn edge, its two ends left out (they lie in their nodes)."""
    t = numpy.linspace(0.0, 1.0, samples + 2)[1:-1, None]
    p0, p2 = numpy.asarray(start, dtype=float), numpy.asarray(end, dtype=float)
    via = via_point(start, end, smooth)
    if via is None:
        return p0 + (p2 - p0) * t
    p1 = numpy.asarray(via, dtype=float)
    return (1 - t) ** 2 * p0 + 2 * (1 - t) * t * p1 + t**2 * p2


def _boxes(nodes: Iterable[dict]) -> tuple[list[str], numpy.ndarray]:
    ids, boxes = [], []
    for node in nodes:
        if node.get("shape") == "text":
            continue
        left, top, right, bottom = node_box(node)
        ids.append(str(node["id"]))
        boxes.append((left + SHRINK, top + SHRINK, right - SHRINK, bottom - SHRINK))
    return ids, numpy.asarray(boxes, dtype=float).reshape(-1, 4)


def _crossed(points: numpy.ndarray, boxes: numpy.ndarray, ignore: numpy.ndarray) -> numpy.ndarray:
    """Which boxes any of ``points`` falls inside (``ignore``: the edge's own two nodes)."""
    if not len(boxes):
        return numpy.zeros(0, dtype=bool)
    x, y = points[:, 0:1], points[:, 1:2]
    inside = (x > boxes[:, 0]) & (x < boxes[:, 2]) & (y > boxes[:, 1]) & (y < boxes[:, 3])
    return inside.any(axis=0) & ~ignore


def hidden_edges(
    nodes: Sequence[dict], edges: Sequence[dict], obstacles: Iterable[str] | None = None
) -> list:
    """(edge id, the node it runs behind) for each drawn edge that passes through a node's box
    other than its own two; ``obstacles``: the node ids that count (default: every node)."""
    wanted = None if obstacles is None else set(obstacles)
    ids, boxes = _boxes(n for n in nodes if wanted is None or n["id"] in wanted)
    where = {str(n["id"]): (float(n["x"]), float(n["y"])) for n in nodes}
    found = []
    for edge in edges:
        start, end = where.get(str(edge["from"])), where.get(str(edge["to"]))
        if start is None or end is None:
            continue
        ignore = numpy.asarray([i in (str(edge["from"]), str(edge["to"])) for i in ids], dtype=bool)
        crossed = _crossed(edge_points(start, end, edge.get("smooth")), boxes, ignore)
        found.extend((edge["id"], ids[i]) for i in numpy.flatnonzero(crossed))
    return found


def route_around(
    nodes: Sequence[dict], edges: Sequence[dict], obstacles: Iterable[str] | None = None, margin: float = 0.0
) -> list[dict]:
    """``edges`` with each one that runs through a node other than its own two bent around them:
    the least roundness, clockwise or anticlockwise, whose curve crosses no box of ``obstacles``
    (default: every node), that stays within ``margin`` of the nodes' own bounds on either side
    (``curves_box`` says how far the drawing then reaches, for the frame); an edge no curve clears
    keeps the one that crosses fewest."""
    wanted = None if obstacles is None else set(obstacles)
    ids, boxes = _boxes(n for n in nodes if wanted is None or n["id"] in wanted)
    every = numpy.asarray([node_box(n) for n in nodes], dtype=float).reshape(-1, 4)
    left, right = (every[:, 0].min() - margin, every[:, 2].max() + margin) if len(every) else (0.0, 0.0)
    where = {str(n["id"]): (float(n["x"]), float(n["y"])) for n in nodes}
    routed = []
    for edge in edges:
        start, end = where.get(str(edge["from"])), where.get(str(edge["to"]))
        if start is None or end is None or not len(boxes):
            routed.append(edge)
            continue
        ignore = numpy.asarray([i in (str(edge["from"]), str(edge["to"])) for i in ids], dtype=bool)
        smooth = edge.get("smooth")
        crossed = int(_crossed(edge_points(start, end, smooth), boxes, ignore).sum())
        if not crossed:
            routed.append(edge)
            continue
        own = float(smooth.get("roundness", 0.0)) if isinstance(smooth, dict) else 0.0
        first = smooth.get("type", "curvedCW") if isinstance(smooth, dict) else "curvedCW"
        other = "curvedCCW" if first == "curvedCW" else "curvedCW"
        best, fewest = smooth, crossed
        for roundness in ROUNDNESS:
            if roundness <= own:
                continue
            for kind in (first, other):
                candidate = {"type": kind, "roundness": roundness}
                points = edge_points(start, end, candidate)
                if points[:, 0].min() < left or points[:, 0].max() > right:
                    continue  # out of the frame
                count = int(_crossed(points, boxes, ignore).sum())
                if count < fewest:
                    best, fewest = candidate, count
                if not count:
                    break
            if not fewest:
                break
        routed.append(edge if best is smooth else {**edge, "smooth": best})
    return routed


def curves_box(nodes: Sequence[dict], edges: Sequence[dict]) -> tuple[float, float, float, float] | None:
    """(left, top, right, bottom) of every drawn edge's path, layout units; None without edges."""
    where = {str(n["id"]): (float(n["x"]), float(n["y"])) for n in nodes}
    paths = [
        edge_points(where[str(e["from"])], where[str(e["to"])], e.get("smooth"))
        for e in edges
        if str(e["from"]) in where and str(e["to"]) in where
    ]
    if not paths:
        return None
    points = numpy.concatenate(paths)
    return (
        float(points[:, 0].min()),
        float(points[:, 1].min()),
        float(points[:, 0].max()),
        float(points[:, 1].max()),
    )
