"""Weights kept in the memory layout TransformerLens's forward multiplies them in.

TransformerLens 3.9 stores a linear map as ``[d_in, d_out]`` but multiplies it as
``F.linear(x, W.T.contiguous())`` (the MLP's W_in, W_gate and W_out, the unembedding W_U) and the
attention output as ``rearrange(W_O, "h e m -> m (h e)").contiguous()``. With weights stored
row-major in their TransformerLens shape, every forward pass copies each of them: on the embedded
Gemma-3-270M that is 840 MB a pass (W_U alone is 262,144 x 640 floats), and a full forward took
0.91 s instead of 0.24 s on the 2-core CPU. Kept as views of a tensor stored the other way round,
the same parameters have the same shapes and values, but ``.T.contiguous()`` (and W_O's
rearrangement) is already contiguous and copies nothing.

``storage_form`` and ``from_storage`` turn such a weight into the contiguous tensor a file keeps
and back (the conversion cache stores that form, so a cached load pays no transposition);
``use_linear_layout`` re-lays a model's weights in place, and leaves ones already laid out alone.
"""

from __future__ import annotations

import torch

# the axis order a weight is stored in, for each weight TransformerLens copies before multiplying
_MATRIX_ORDER = (1, 0)  # W_in, W_gate, W_out, W_U [d_in, d_out] stored as [d_out, d_in]
_OUTPUT_ORDER = (2, 0, 1)  # W_O [heads, d_head, d_model] stored as [d_model, heads, d_head]
_MLP_WEIGHTS = ("W_in", "W_gate", "W_out")


def _order(name: str, tensor: torch.Tensor) -> tuple[int, ...] | None:
    """The storage order of the state-dict entry ``name``, or None for a weight left as it is."""
    leaf = name.rsplit(".", 1)[-1]
    in_block = name.startswith("blocks.")
    if in_block and ".attn." in name and leaf == "W_O" and tensor.dim() == 3:
        return _OUTPUT_ORDER
    mlp = in_block and ".mlp." in name and leaf in _MLP_WEIGHTS
    if (mlp or name == "unembed.W_U") and tensor.dim() == 2:
        return _MATRIX_ORDER
    return None


def _inverse(order: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(sorted(range(len(order)), key=order.__getitem__))


def storage_form(name: str, tensor: torch.Tensor) -> torch.Tensor:
    """The tensor as a file keeps it: contiguous in its storage order (other weights unchanged)."""
    order = _order(name, tensor)
    return tensor if order is None else tensor.permute(order).contiguous()


def from_storage(name: str, stored: torch.Tensor) -> torch.Tensor:
    """What ``storage_form`` gave, back in the weight's TransformerLens shape (a view, no copy)."""
    order = _order(name, stored)
    return stored if order is None else stored.permute(_inverse(order))


def is_laid_out(name: str, tensor: torch.Tensor) -> bool:
    """Whether the weight is a view of its storage form (or needs no layout)."""
    order = _order(name, tensor)
    return order is None or tensor.permute(order).is_contiguous()


@torch.no_grad()
def use_linear_layout(model) -> int:
    """Re-lay every weight of ``model`` that TransformerLens would copy in each forward pass;
    returns how many were re-laid. Values, shapes, dtypes and devices are unchanged."""
    moved = 0
    for name, parameter in model.named_parameters():
        if not is_laid_out(name, parameter):
            parameter.data = from_storage(name, storage_form(name, parameter.data))
            moved += 1
    return moved
