"""CircuitLasso's units turned into standardised regression columns, many units at a time.

A unit's principal scores [M, k] become its kept directions, each standardised to unit variance
(``units`` module docstring: a direction is dropped where its standard deviation is below
``WITHIN_UNIT_TOL`` of the unit's first, or the unit is silent, below ``SILENT_UNIT_TOL`` of the
loudest unit). Until 2026-12-04 this ran unit by unit, and each unit read three numbers back
from the device (its largest standard deviation, the kept mask's size, the standardisation's
largest spread): on a GPU, where each read waits for every queued kernel, about 2,000 waits for
the embedded model's 330 units. Here the scores arrive as the reduction's batches [n, M, k]; every
standard deviation and kept mask of a batch is one product, the masks come back in one read, a
unit that keeps all its directions (nearly all) is standardised with its whole batch, and only
a unit that drops a direction is standardised alone, as before.

Every figure is the unit-by-unit code's to the bit on the CPU: a reduction over the rows of a
batch [n, M, k] sums each column as the same reduction over one unit's [M, k] does (tested in
``tests/test_lasso_speed.py`` against the unit-by-unit code, written out there).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .solver import standardize

WITHIN_UNIT_TOL = 1e-4  # a direction with sd below this fraction of the unit's first is rank noise
SILENT_UNIT_TOL = 1e-6  # a unit whose sd is below this fraction of the largest unit's is silent


@dataclass
class Batch:
    """One reduction's scores [n, M, k] (units of one kind, k directions each) and, once
    ``measure`` has run, their standard deviations [n, k]."""

    scores: torch.Tensor
    sd: torch.Tensor | None = None

    def measure(self) -> torch.Tensor:
        if self.sd is None:
            self.sd = self.scores.double().pow(2).mean(1).sqrt()  # [n, k]
        return self.sd


def silent_floor(batches: list[Batch]) -> torch.Tensor:
    """The standard deviation below which a unit counts as silent (relative to the loudest unit of
    ``batches``), a 0-d tensor on their device (0 when they hold no unit)."""
    tops = [batch.measure().amax() for batch in batches if batch.scores.numel()]
    if not tops:
        return torch.zeros((), dtype=torch.float64, device="cpu")
    return SILENT_UNIT_TOL * torch.stack(tops).amax()


def assemble(
    units: list[tuple[int, Batch, int]], floor: torch.Tensor
) -> tuple[list[torch.Tensor], list[int], list[torch.Tensor]]:
    """(column blocks [M, j] in ``units``' order, each column's unit, each block's weights [j]).

    ``units``: (unit index, its batch, its row in the batch); several units may share a row (the
    heads of one key/value group). A unit's weights are its kept directions' standard deviations
    over their sum. Units with no kept direction are left out."""
    batches = list({id(batch): batch for _, batch, _ in units}.values())
    kept_of, whole_of = {}, {}
    for batch in batches:
        sd = batch.measure()
        first = sd.amax(1, keepdim=True) if sd.shape[1] else sd[:, :0]
        kept_of[id(batch)] = (sd > WITHIN_UNIT_TOL * first) & (sd > floor.to(sd.device))
    host = torch.cat([kept.flatten() for kept in kept_of.values()]).cpu() if batches else None  # one read
    start, counts_of = 0, {}
    for batch in batches:
        kept = kept_of[id(batch)]
        kept_of[id(batch)] = host[start : start + kept.numel()].view(kept.shape)
        # each unit's count of kept directions, for all its rows at once (not a sum and a read per
        # unit: 326 units on the embedded model)
        counts_of[id(batch)] = kept_of[id(batch)].sum(1).tolist()
        start += kept.numel()
    columns, owners, weights = [], [], []
    for unit, batch, row in units:
        n_kept = counts_of[id(batch)][row]
        if n_kept == 0:
            continue
        kept = kept_of[id(batch)][row]
        if n_kept == kept.numel():  # every direction: the batch's own standardisation
            if id(batch) not in whole_of:
                whole_of[id(batch)] = _standardize_rows(batch.scores.double())
            columns.append(whole_of[id(batch)][row])
            sd = batch.sd[row]
        else:  # a direction dropped: this unit alone, its kept directions standardised together
            index = kept.nonzero(as_tuple=True)[0].tolist()
            columns.append(standardize(batch.scores[row].double()[:, index])[0])
            sd = batch.sd[row][index]
        owners += [unit] * n_kept
        weights.append(sd / sd.sum())
    return columns, owners, weights


def _standardize_rows(scores: torch.Tensor) -> torch.Tensor:
    """``solver.standardize`` of each unit of a batch [n, M, k] (each unit's columns against its
    own largest spread).  # [n, M, k]"""
    centred = scores - scores.mean(1, keepdim=True)
    spread = centred.pow(2).mean(1).sqrt()  # [n, k]
    top = spread.amax(1, keepdim=True) if spread.shape[1] else spread[:, :0]
    kept = spread > (1e-6 * top).clamp_min(1e-30)
    scaled = centred / spread.clamp_min(1e-30)[:, None, :]
    return torch.where(kept[:, None, :], scaled, torch.zeros_like(centred))
