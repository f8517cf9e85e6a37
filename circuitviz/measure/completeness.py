"""Completeness: whether a circuit holds every route the model uses, the necessity figure that
separates methods.

Necessity (the model with the circuit's edges corrupted) is 0.9-1.0 for every gradient method's
circuit from 0.5 % of the edges on: any circuit holding the few edges everything passes through
(into the logits, out of the answer's token) removes the behaviour when removed, whatever else it
holds or lacks. Completeness asks what necessity cannot: does the rest of the model hold routes
the circuit lacks? Remove a part K of the circuit from the circuit and from the whole model; a
complete circuit responds as the model does, because no other route (a backup head, a parallel
path) takes over in the model and not in the circuit (Wang et al. 2022, the IOI circuit's
completeness). Here K is a random half of the circuit's edges, drawn ``draws`` times (seeded):

    completeness = 1 - min(mean over K of |L(C \\ K) - L(M \\ K)| / |L(M) - L(M')|, 1)

1: removing any half of the circuit does to the circuit what it does to the model; 0: the two
differ by the whole clean-corrupted difference on average. Every (C \\ K, M \\ K) pair of every
circuit goes through one batched evaluation of the shared evaluator.
"""

from __future__ import annotations

import math

import torch

from .evaluate import Evaluator

DRAWS = 8


def random_halves(circuit: torch.Tensor, draws: int = DRAWS, seed: int = 0) -> torch.Tensor:
    """``draws`` random halves of a circuit's edges [draws, n_forward, n_backward] bool: each keeps
    floor(n/2) of its n edges, chosen by a generator seeded with ``seed`` (drawn on the CPU, so the
    same halves on every device; returned on the circuit's device)."""
    flat = circuit.reshape(-1).bool().cpu()  # the draw is made on the CPU (device="cpu" below)
    edges = flat.nonzero()[:, 0]
    generator = torch.Generator(device="cpu").manual_seed(seed)
    halves = torch.zeros(draws, flat.numel(), dtype=torch.bool, device="cpu")
    for row in range(draws):
        chosen = edges[torch.randperm(len(edges), generator=generator, device="cpu")[: len(edges) // 2]]
        halves[row, chosen] = True
    return halves.view(draws, *circuit.shape).to(circuit.device)


def completeness(
    evaluator: Evaluator, circuits: torch.Tensor, draws: int = DRAWS, seed: int = 0
) -> list[float]:
    """Each circuit's completeness [n_circuits, n_forward, n_backward] -> [n_circuits] (NaN for a
    circuit of fewer than two edges, which has no half to remove)."""
    spec = evaluator.spec
    whole = spec.edge_mask.to(circuits.device)
    asked, rows = [], []
    for index, circuit in enumerate(circuits.bool() & whole):
        if int(circuit.sum()) < 2:
            continue
        halves = random_halves(circuit, draws, seed)
        asked += [circuit & ~halves, whole & ~halves]  # C \ K and M \ K for every half K
        rows.append(index)
    found = [math.nan] * int(circuits.shape[0])
    if not rows:
        return found
    metrics = evaluator.metrics(torch.cat(asked)).double().cpu().view(len(rows), 2, draws)
    span = abs(evaluator.baseline.clean - evaluator.baseline.corrupted)
    for index, (in_circuit, in_model) in zip(rows, metrics):
        gap = float((in_circuit - in_model).abs().mean())
        found[index] = 1.0 - min(gap / span, 1.0) if span > 0 else (1.0 if gap == 0 else 0.0)
    return found
