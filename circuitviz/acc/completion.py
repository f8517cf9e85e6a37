"""ACC++'s circuit completed with the value paths of the heads it traces, so patching can measure it.

ACC++ explains why a head attends where it does: the signals that reach its query and key. What
the head then moves is its value, and ACC++ never traces it; an MLP it finds as a seed or a
signal is likewise left without inputs. Patched as it is, every such node reads the corrupted
run through its value or MLP input, and NDF is 0 by construction, whatever the signals are worth.

The completion gives every node of the traced circuit (a head ACC++ traced or found as a signal,
an MLP it found) the inputs it lacks: the value input of a head and the input of an MLP read from
the input embedding and from every earlier node of the traced circuit itself. Nothing outside the
traced nodes enters, so the completed circuit is still ACC++'s set of components, now wired so that
what they read can flow to the answer. Each completion edge scores just below the strongest traced
edge out of the node it feeds (``COMPLETION_FACTOR``), so at any budget a node's value path comes
in right after the node itself.
"""

from __future__ import annotations

import torch

from ..core.graph import GraphSpec

COMPLETION_FACTOR = 0.999
COMPLETION_KINDS = ("v", "mlp")  # the readers ACC++ never traces
CLAIMED_KINDS = ("q", "k", "logits")  # the readers ACC++'s signals are about


def traced_nodes(spec: GraphSpec, scores: torch.Tensor) -> torch.Tensor:
    """Writers of the traced circuit: sources of a found edge, and heads a found edge reads into.
    # [n_forward] bool"""
    found = (scores != 0) & spec.edge_mask  # [F, B]
    nodes = found.any(dim=1)  # sources of signals and seeds
    owner = spec.backward_to_forward
    readers = found.any(dim=0) & (owner >= 0)  # [B] readers of found edges
    nodes[owner[readers]] = True
    return nodes


def completion_edges(spec: GraphSpec, scores: torch.Tensor) -> torch.Tensor:
    """The value and MLP-input edges that complete the traced circuit (see the module docstring).
    # [n_forward, n_backward] bool"""
    nodes = traced_nodes(spec, scores)
    nodes[0] = True  # the input embedding feeds every node
    kinds = spec.backward_kind
    owner = spec.backward_to_forward
    completing = torch.tensor([kind in COMPLETION_KINDS for kind in kinds], device="cpu")  # [B]
    into_traced = completing & (owner >= 0) & nodes[owner.clamp_min(0)]  # [B] readers of traced nodes
    return spec.edge_mask & nodes[:, None] & into_traced[None, :]


def completed_scores(spec: GraphSpec, scores: torch.Tensor) -> torch.Tensor:
    """The traced scores with every completion edge scored just below the strongest traced edge
    out of the node it feeds (budgets rank them by ``details.acc.path_ranked``).
    # [n_forward, n_backward] float32, CPU"""
    scores = scores.float().cpu() * spec.edge_mask
    strongest_out = scores.abs().max(dim=1).values  # [F]
    owner = spec.backward_to_forward
    feeding = strongest_out[owner.clamp_min(0)] * (owner >= 0)  # [B] strongest edge out of the reader's node
    added = completion_edges(spec, scores) & (scores == 0)
    value = COMPLETION_FACTOR * feeding[None, :].expand_as(scores)
    return torch.where(added, value, scores)


def claimed_mask(spec: GraphSpec) -> torch.Tensor:
    """The edges of the kinds ACC++ claims to find (into queries, keys and logits).  # [F, B] bool"""
    claimed = torch.tensor([kind in CLAIMED_KINDS for kind in spec.backward_kind], device="cpu")
    return spec.edge_mask & claimed[None, :]
