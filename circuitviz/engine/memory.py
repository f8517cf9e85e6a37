"""Working memory of the batched passes, which ``circuitviz.measure.chunks`` cuts to fit the device.

Bytes one sequence of a forward/backward pass keeps per position and layer, per unit of the
model's width (q/k/v inputs per head, attention, MLP hidden), in float32. On the CPU, measured on
Gemma-3-270M (resident memory of a 20- and a 60-sequence pass, the gradients kept: 13.5-15) with
headroom; on an accelerator a cautious first guess that the first chunk's real peak replaces
(chunks.py). The CPU figure decides how many sequences share a pass there, and fewer than about
30 sequences of 16 tokens a pass made EAP-IG up to 10 % slower.
"""

from __future__ import annotations

from ..core.graph import GraphSpec
from ..models.adapter import adapter_of

BACKWARD_BYTES_PER_UNIT = {"cpu": 16.0, "accelerator": 40.0}
# bytes one patched circuit keeps per position and writer, per unit of d_model, in float32: the
# current-writers buffer and the patch differences, with headroom
EVALUATION_BYTES_PER_UNIT = 16


def gradient_bytes_per_position(model, n_positions: int) -> float:
    """Estimated working memory of one sequence's gradient pass, per prompt position (bytes)."""
    adapter = adapter_of(model)
    cfg = adapter.cfg
    width = 4 * cfg.n_heads * cfg.d_model + (cfg.d_mlp or 4 * cfg.d_model) + cfg.n_heads * n_positions
    per_unit = BACKWARD_BYTES_PER_UNIT["cpu" if adapter.device.type == "cpu" else "accelerator"]
    return cfg.n_layers * width * per_unit * adapter.element_size / 4


def evaluation_bytes_per_position(spec: GraphSpec, element_size: int = 4) -> float:
    """Estimated working memory of one circuit's patched run, per prompt position (bytes)."""
    return spec.n_forward * max(spec.d_model, 1) * EVALUATION_BYTES_PER_UNIT * element_size / 4
