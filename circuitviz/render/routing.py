"""Edges drawn around the nodes they do not join: in the layered layout a straight edge (into the
logits or an MLP) or a slightly curved one (into a head) runs through every node that lies on its
way, and an edge hidden behind a box reads as ending there. ``route_around`` gives such an edge
the curve nearest its own that clears every box, and leaves an edge that crosses no box as it was.

The curves tried are vis-network's own, worked out as it draws them: ``curvedCW``/``curvedCCW``
(``BezierEdgeStatic``: a quadratic Bézier through a via point) of any roundness, less than the
edge's own too, and ``cubicBezier`` (``CubicBezierEdge``) leaving and reaching its nodes sideways,
an S that threads the gap between two columns, or upwards, and the quadratic ones through a via
point on a line (``LINES``: the start's row or column, the end's column), which leave a node
sideways round a box in line rows up. What is checked here is what the page shows;
``hidden_edges`` is the measure (every box a drawn edge runs behind).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence

import numpy

from .vis import framed_alike, node_box, union_box

# tried each way round: the curves vis-network can draw for an edge, the nearest its own kept
ROUNDNESS = tuple(round(0.05 * i, 2) for i in range(1, 21))  # curvedCW / curvedCCW
# cubicBezier, horizontal and vertical: how far its control points stand aside, in the edge's own
# width or height; vis-network takes more than 1 as it takes the rest (an S that swings wider).
# Up to 3 since 2026-12-07 (2 before): the Gallery's arithmetic circuit at budget 100 in words
# drew m3 -> a11.h1 behind a9.h2; no other of its 742 edges hidden or freed, none wider
CUBIC = tuple(round(0.1 * i, 1) for i in range(1, 31))
# vis-network's quadratic curves through a via point on a line: ``horizontal`` (on the start's row,
# (x0 + r dx, y0)), ``vertical`` (on its column, (x0, y0 + r dy)) and ``straightCross`` (on the
# end's column, (x1, y0 + r dy), for an edge taller than wide). vis-network takes any roundness, so
# past 1 or under 0 the via point stands beyond either node: the curve leaves its node sideways
# and bends up (or goes up and across) around a box in line two rows up, which no curve of one
# bow from a box's centre clears; until 2026-12-07 only curvedCW/CCW and cubicBezier were tried
LINES = ("horizontal", "vertical", "straightCross")
LINE_ROUNDNESS = tuple(round(0.1 * i, 1) for i in range(-30, 41) if i)
OVERSHOOT = 12.0  # layout units such a curve may reach above or below its two nodes' centres
SAMPLES = 24  # points along an edge checked against the boxes, at least
STEP = 8.0  # layout units between two of them at most (a box is about 35 tall): a long edge gets more
SHRINK = 2.0  # layout units taken off each side of a box: an edge that grazes a corner is not hidden
CLEAR = 3.0  # layout units a bent edge keeps from every box (no curve chosen grazes one)
CHUNK = 4  # curves checked closely at once, nearest first
LOOK = 30.0  # layout units between the points of a first look at every curve (a box is 35 to 70 tall)
APART = 8.0  # layout units: two edges between the same nodes (q, k, v) are never given one path


def control_points(start, end, smooth) -> list[tuple[float, float]]:
    """The Bézier control points vis-network draws an edge from ``start`` to ``end`` with:
    [start, end] straight, [start, via, end] for ``curvedCW``/``curvedCCW``, [start, via1, via2,
    end] for ``cubicBezier`` (``forceDirection`` horizontal or vertical)."""
    start, end = (float(start[0]), float(start[1])), (float(end[0]), float(end[1]))
    if isinstance(smooth, dict) and smooth.get("type") == "cubicBezier":
        factor = float(smooth.get("roundness", 0.5))
        dx, dy = start[0] - end[0], start[1] - end[1]
        force = smooth.get("forceDirection", "none")
        if (abs(dx) > abs(dy) or force is True or force == "horizontal") and force != "vertical":
            return [start, (start[0] - factor * dx, start[1]), (end[0] + factor * dx, end[1]), end]
        return [start, (start[0], start[1] - factor * dy), (end[0], end[1] + factor * dy), end]
    via = via_point(start, end, smooth)
    return [start, end] if via is None else [start, via, end]


def via_point(start: tuple[float, float], end: tuple[float, float], smooth) -> tuple[float, float] | None:
    """The control point vis-network gives an edge from ``start`` to ``end`` with ``smooth``
    (``False``, or {"type": "curvedCW" | "curvedCCW" | one of ``LINES``, "roundness": r}); None
    for a straight edge."""
    kind = smooth.get("type") if isinstance(smooth, dict) else None
    if kind in LINES:  # vis-network's BezierEdgeStatic._getViaCoordinates, written shorter
        factor = float(smooth.get("roundness", 0.5))
        (x0, y0), (x1, y1) = start, end
        if kind == "horizontal":
            return x0 + factor * (x1 - x0), y0
        if kind == "vertical":
            return x0, y0 + factor * (y1 - y0)
        if abs(x1 - x0) <= abs(y1 - y0):  # straightCross: into the end straight along its column
            return x1, y0 + factor * (y1 - y0)
        return x0 + factor * (x1 - x0), y1
    if kind not in ("curvedCW", "curvedCCW"):
        return None
    factor = float(smooth.get("roundness", 0.5))
    dx, dy = end[0] - start[0], start[1] - end[1]
    radius = math.hypot(dx, dy)
    turn = 0.5 * factor + 0.5 if smooth["type"] == "curvedCW" else -0.5 * factor + 0.5
    angle = (math.atan2(dy, dx) + turn * math.pi) % (2 * math.pi)
    reach = (0.5 * factor + 0.5) * radius
    return start[0] + reach * math.sin(angle), start[1] + reach * math.cos(angle)


def _samples(control: numpy.ndarray) -> int:
    """How many points to check along a curve of these control points: at most ``STEP`` apart."""
    length = float(numpy.hypot(*numpy.diff(control, axis=0).T).sum())  # the curve is no longer
    return max(SAMPLES, math.ceil(length / STEP))


def _bezier(control: numpy.ndarray, t: numpy.ndarray) -> numpy.ndarray:
    """Points at ``t`` [n, 1] of the Bézier curve of ``control`` [k, 2] (k = 2, 3 or 4)."""
    degree = len(control) - 1
    return sum(math.comb(degree, i) * (1 - t) ** (degree - i) * t**i * control[i] for i in range(degree + 1))


def edge_points(start, end, smooth, samples: int | None = None) -> numpy.ndarray:
    """Points along the drawn edge, its two ends left out (they lie in their nodes): ``samples``
    of them, or as many as leave no two more than ``STEP`` apart."""
    control = numpy.asarray(control_points(start, end, smooth), dtype=float)
    count = samples or _samples(control)
    t = numpy.linspace(0.0, 1.0, count + 2)[1:-1, None]
    return _bezier(control, t)


def _boxes(nodes: Iterable[dict], pad: float = -SHRINK) -> tuple[list[str], numpy.ndarray]:
    """(ids, [n, 4] boxes grown by ``pad`` layout units on each side) of the nodes drawn as boxes."""
    ids, boxes = [], []
    for node in nodes:
        if node.get("shape") == "text":
            continue
        left, top, right, bottom = node_box(node)
        ids.append(str(node["id"]))
        boxes.append((left - pad, top - pad, right + pad, bottom + pad))
    return ids, numpy.asarray(boxes, dtype=float).reshape(-1, 4)


def _crossed(points: numpy.ndarray, boxes: numpy.ndarray, ignore: numpy.ndarray) -> numpy.ndarray:
    """Which boxes any of ``points`` [..., n, 2] falls inside (``ignore``: the edge's own two
    nodes): [..., boxes]."""
    if not len(boxes):
        return numpy.zeros((*points.shape[:-2], 0), dtype=bool)
    x, y = points[..., 0:1], points[..., 1:2]
    inside = (x > boxes[:, 0]) & (x < boxes[:, 2]) & (y > boxes[:, 1]) & (y < boxes[:, 3])
    return inside.any(axis=-2) & ~ignore


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


def curve_choices(smooth) -> list:
    """The curves tried for an edge drawn with ``smooth``: its own first, then vis-network's
    ``curvedCW``/``curvedCCW`` of every roundness in ``ROUNDNESS`` and ``cubicBezier`` of every
    one in ``CUBIC``, horizontal and vertical."""
    choices = [smooth]
    for roundness in ROUNDNESS:
        choices += [{"type": kind, "roundness": roundness} for kind in ("curvedCW", "curvedCCW")]
    for roundness in CUBIC:
        choices += [
            {"type": "cubicBezier", "forceDirection": way, "roundness": roundness}
            for way in ("horizontal", "vertical")
        ]
    for kind in LINES:
        choices += [{"type": kind, "roundness": roundness} for roundness in LINE_ROUNDNESS]
    return choices


COMPARED = numpy.linspace(0.0, 1.0, 34)[1:-1]  # where two edges' paths are compared


def _path(start, end, smooth, t) -> numpy.ndarray:
    return _bezier(numpy.asarray(control_points(start, end, smooth), dtype=float), t[:, None])


def _as_cubic(control: numpy.ndarray) -> numpy.ndarray:
    """The cubic Bézier control points [..., 4, 2] of the same curve as ``control`` [..., k, 2]."""
    if control.shape[-2] == 2:
        first, last = control[..., 0, :], control[..., 1, :]
        return numpy.stack([first, first + (last - first) / 3, last - (last - first) / 3, last], axis=-2)
    if control.shape[-2] == 3:
        first, via, last = control[..., 0, :], control[..., 1, :], control[..., 2, :]
        return numpy.stack([first, first + 2 * (via - first) / 3, last + 2 * (via - last) / 3, last], axis=-2)
    return control


def _choice_controls(start, end, smooth) -> numpy.ndarray:
    """[choices, 4, 2]: the cubic control points of every curve of ``curve_choices(smooth)``, in
    its order (vis-network's formulas, as ``control_points``, for all of them at once)."""
    (x0, y0), (x1, y1) = start, end
    p0, p1 = numpy.asarray(start, dtype=float), numpy.asarray(end, dtype=float)
    rounds = numpy.asarray(ROUNDNESS)[:, None]  # curvedCW, curvedCCW in turn
    dx, dy = x1 - x0, y0 - y1
    reach = (0.5 * rounds + 0.5) * math.hypot(dx, dy)
    turns = numpy.concatenate([0.5 * rounds + 0.5, -0.5 * rounds + 0.5], axis=1).reshape(-1, 1)
    angles = (math.atan2(dy, dx) + turns * math.pi) % (2 * math.pi)
    reach = numpy.repeat(reach, 2, axis=0)
    vias = numpy.concatenate([x0 + reach * numpy.sin(angles), y0 + reach * numpy.cos(angles)], axis=1)
    curved = _as_cubic(
        numpy.stack([numpy.broadcast_to(p0, vias.shape), vias, numpy.broadcast_to(p1, vias.shape)], axis=1)
    )
    cubic = numpy.asarray(CUBIC)[:, None]
    across = (p0[0] - p1[0]) * cubic  # horizontal: leaves and reaches its nodes sideways
    upward = (p0[1] - p1[1]) * cubic
    horizontal = numpy.stack(
        [
            numpy.broadcast_to(p0, (len(CUBIC), 2)),
            numpy.concatenate([x0 - across, numpy.full_like(across, y0)], axis=1),
            numpy.concatenate([x1 + across, numpy.full_like(across, y1)], axis=1),
            numpy.broadcast_to(p1, (len(CUBIC), 2)),
        ],
        axis=1,
    )
    vertical = numpy.stack(
        [
            numpy.broadcast_to(p0, (len(CUBIC), 2)),
            numpy.concatenate([numpy.full_like(upward, x0), y0 - upward], axis=1),
            numpy.concatenate([numpy.full_like(upward, x1), y1 + upward], axis=1),
            numpy.broadcast_to(p1, (len(CUBIC), 2)),
        ],
        axis=1,
    )
    bent = numpy.stack([horizontal, vertical], axis=1).reshape(-1, 4, 2)  # horizontal, vertical in turn
    own = _as_cubic(numpy.asarray(control_points(start, end, smooth), dtype=float))[None]
    share = numpy.asarray(LINE_ROUNDNESS)[:, None]  # via points on a line (``via_point``)
    across, up = x0 + share * (x1 - x0), y0 + share * (y1 - y0)
    at = numpy.full_like(share, 1.0)
    tall = abs(x1 - x0) <= abs(y1 - y0)
    on_line = {
        "horizontal": (across, y0 * at),
        "vertical": (x0 * at, up),
        "straightCross": (x1 * at, up) if tall else (across, y1 * at),
    }
    vias = numpy.concatenate(
        [numpy.concatenate(on_line[kind], axis=1) for kind in LINES] or [share[:0].repeat(2, 1)]
    )
    lines = _as_cubic(
        numpy.stack([numpy.broadcast_to(p0, vias.shape), vias, numpy.broadcast_to(p1, vias.shape)], axis=1)
    )
    return numpy.concatenate([own, curved, bent, lines])


def _basis(t: numpy.ndarray) -> numpy.ndarray:
    """[len(t), 4]: the cubic Bernstein polynomials at ``t``."""
    t = t[:, None]
    return numpy.concatenate([(1 - t) ** 3, 3 * (1 - t) ** 2 * t, 3 * (1 - t) * t**2, t**3], axis=1)


BASIS = _basis(COMPARED)


def _route(start, end, smooth, boxes, ignore, bounds, taken, inside=None) -> tuple:
    """(the curve, its path at ``COMPARED``) for one edge: of those that cross fewest boxes
    (none, where one does; then fewest passed within ``CLEAR``) and keep within ``bounds`` (left,
    right; a curve through a via point on a line within ``inside``, the nodes' own, and its nodes'
    rows) and ``APART`` from every path in ``taken`` (the same two nodes' other edges), the one
    that strays least from its own. A first look every ``LOOK`` units finds the curves behind no
    box; they are checked closely, nearest first, a few at a time, until one keeps clear of
    every box (where none is, the few the first look saw cross fewest)."""
    choices = curve_choices(smooth)
    controls = _choice_controls(start, end, smooth)
    compared = BASIS @ controls  # [choices, points, 2]
    strays = numpy.abs(compared - compared[0]).max(axis=(1, 2))  # how far from the edge's own path
    allowed = (compared[..., 0].min(axis=1) >= bounds[0]) & (compared[..., 0].max(axis=1) <= bounds[1])
    # a curve through a via point on a line stays within its nodes' rows (past them it went over
    # its target's row and came back down into it: m1 -> a12.h0 ran behind the logits) and within
    # the nodes' own sides (beside them it widened the frame: labels drawn smaller)
    lines = len(choices) - len(LINES) * len(LINE_ROUNDNESS)
    low, high = min(start[1], end[1]) - OVERSHOOT, max(start[1], end[1]) + OVERSHOOT
    left, right = inside or bounds
    on_line = compared[lines:]
    allowed[lines:] &= (on_line[..., 1].min(axis=1) >= low) & (on_line[..., 1].max(axis=1) <= high)
    allowed[lines:] &= (on_line[..., 0].min(axis=1) >= left) & (on_line[..., 0].max(axis=1) <= right)
    for other in taken:
        allowed &= numpy.abs(compared - other).max(axis=(1, 2)) >= APART
    allowed[0] = True  # its own path may always stay
    own = numpy.asarray(control_points(start, end, smooth), dtype=float)
    length = float(numpy.hypot(*numpy.diff(own, axis=0).T).sum())
    # a first look every LOOK units: the curves it finds behind no box are
    # checked closely, nearest first; where none is, the few that cross fewest
    coarse = _basis(numpy.linspace(0.0, 1.0, max(24, math.ceil(length / LOOK)) + 2)[1:-1]) @ controls
    first_look = numpy.where(allowed, _crossed(coarse, boxes, ignore).sum(axis=1), len(boxes) + 1)
    order = [int(i) for i in numpy.lexsort((strays, first_look)) if allowed[i]]
    clear = [i for i in order if first_look[i] == 0]
    dense = _basis(numpy.linspace(0.0, 1.0, _samples(own) + 18)[1:-1])  # bends are longer: more points
    grown = boxes + numpy.asarray([-1.0, -1.0, 1.0, 1.0]) * (CLEAR + SHRINK)  # kept clear of
    best, fewest = order[0], None
    for first in range(0, max(len(clear), 1), CHUNK):
        chunk = clear[first : first + CHUNK] or order[:CHUNK]
        paths = dense @ controls[chunk]
        low, high = paths.min(axis=(0, 1)), paths.max(axis=(0, 1))
        near = (
            (grown[:, 0] < high[0])
            & (grown[:, 2] > low[0])
            & (grown[:, 1] < high[1])
            & (grown[:, 3] > low[1])
        )
        hidden = _crossed(paths, boxes[near], ignore[near]).sum(axis=1)
        grazed = _crossed(paths, grown[near], ignore[near]).sum(axis=1)
        at = int(numpy.lexsort((grazed, hidden))[0])  # the fewest hidden, then grazed; the nearest first
        if fewest is None or (hidden[at], grazed[at]) < fewest:
            best, fewest = chunk[at], (int(hidden[at]), int(grazed[at]))
        if fewest == (0, 0):
            break
    return choices[best], compared[best]


def route_around(
    nodes: Sequence[dict],
    edges: Sequence[dict],
    obstacles: Iterable[str] | None = None,
    margin: float = 0.0,
    taken: dict | None = None,
) -> list[dict]:
    """``edges`` with each one that runs through a node other than its own two given another of
    vis-network's curves (``curve_choices``): of those that cross fewest boxes of ``obstacles``
    (default: every node), none where one does, and stay within ``margin`` of the nodes' own
    bounds on either side (``curves_box`` says how far the drawing then reaches, for the frame),
    the one that strays least from the edge's own path. An edge that crosses no box stays as it
    was; a bent edge keeps ``APART`` from the other edges between its two nodes (q, k, v):
    ``taken`` holds their paths, {(from, to): [path]}, across calls (filled in here)."""
    wanted = None if obstacles is None else set(obstacles)
    ids, boxes = _boxes(n for n in nodes if wanted is None or n["id"] in wanted)
    every = numpy.asarray([node_box(n) for n in nodes], dtype=float).reshape(-1, 4)
    bounds = (every[:, 0].min() - margin, every[:, 2].max() + margin) if len(every) else (0.0, 0.0)
    where = {str(n["id"]): (float(n["x"]), float(n["y"])) for n in nodes}
    taken = {} if taken is None else taken  # the paths given to the edges between two nodes
    routed = []
    for edge in edges:
        pair = (str(edge["from"]), str(edge["to"]))
        start, end = where.get(pair[0]), where.get(pair[1])
        if start is None or end is None or not len(boxes):
            routed.append(edge)
            continue
        ignore = numpy.asarray([i in pair for i in ids], dtype=bool)
        smooth = edge.get("smooth")
        if not _crossed(edge_points(start, end, smooth), boxes, ignore).any():
            routed.append(edge)
            taken.setdefault(pair, []).append(_path(start, end, smooth, COMPARED))
            continue
        inside = (bounds[0] + margin, bounds[1] - margin)
        best, path = _route(start, end, smooth, boxes, ignore, bounds, taken.get(pair, []), inside)
        taken.setdefault(pair, []).append(path)
        routed.append(edge if best is smooth else {**edge, "smooth": best})
    return routed


def routed_alike(graphs: list) -> list:
    """Copies of ``graphs`` (``VisGraph``s in one layout, drawn side by side) with an edge of
    several of them bent alike in each: each drawing bent its edges around its own nodes, so an
    edge of two circuits ran straight in one frame and round a node of the other's in the next,
    and a side-by-side reading took it for two edges. Each edge is bent once, around the nodes of
    every drawing that has it (``route_around``; an edge of one drawing as it bent it itself);
    each frame keeps its own edges and nodes, and is widened for a curve beside its nodes. A
    drawing without ``routing`` leaves them all as they are."""
    if len(graphs) < 2 or any(graph.routing is None for graph in graphs):
        return list(graphs)
    nodes = list({str(node["id"]): node for graph in graphs for node in graph.nodes}.values())
    margin = max(float(graph.routing["margin"]) for graph in graphs)
    edges = {str(edge["id"]): edge for graph in graphs for edge in graph.routing["edges"]}
    holders: dict[str, set[int]] = {}  # edge id -> the drawings that have it
    for index, graph in enumerate(graphs):
        for edge in graph.routing["edges"]:
            holders.setdefault(str(edge["id"]), set()).add(index)
    groups: dict[frozenset, list] = {}
    for name, edge in edges.items():
        groups.setdefault(frozenset(holders[name]), []).append(edge)
    bent, taken = {}, {}
    for drawings in sorted(groups, key=len, reverse=True):  # the most shared first
        obstacles = {node for index in drawings for node in graphs[index].routing["obstacles"]}
        for edge in route_around(nodes, groups[drawings], obstacles, margin, taken):
            bent[str(edge["id"])] = edge.get("smooth")
    alike = []
    for graph in graphs:
        drawn = [{**edge, "smooth": bent.get(str(edge["id"]), edge.get("smooth"))} for edge in graph.edges]
        alike.append(dataclasses.replace(graph, edges=drawn, frame=None))
        alike[-1].frame = curves_frame(alike[-1])
    return alike


def drawn_alike(graphs: list) -> list:
    """Copies of ``graphs`` (drawn in one layout, side by side) with every edge of several of them
    on one path in each (``routed_alike``), fitted to one box (``vis.framed_alike``)."""
    return framed_alike(routed_alike(graphs))


def curves_frame(graph) -> tuple[float, float, float, float] | None:
    """The frame a ``VisGraph`` needs for its curves: its nodes' bounds widened to every edge's
    path where one runs beside them, or its own ``frame`` (None: its nodes' bounds)."""
    reach, bounds = curves_box(graph.nodes, graph.edges), graph.bounds()
    if reach is not None and (reach[0] < bounds[0] or reach[2] > bounds[2]):
        return union_box([bounds, reach])  # a curve beside the nodes is shown whole
    return graph.frame


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
