"""What a model booted through the bridge must pass before circuitviz reads circuits from it.

TransformerLens's bridge has adapters for architectures whose circuits circuitviz's graph cannot
hold, and some whose forward differs from the ``transformers`` model's; either would give every
figure of a run about another function, with no error. The checks cost two passes over a few
tokens at load, and each refuses with one sentence naming the reason and the way out:

- ``require_transformer_blocks``: every block is attention and an MLP with their norms, nothing
  else (Mamba, linear-attention, convolution and recurrent layers, alone or beside attention as
  in Falcon-H1, write to the residual through no node of the graph);
- ``require_head_wise_qk_norms``: query and key norms act on each head alone, or the model is
  OLMo's (MiniMax-M2 normalises its whole query and key vectors);
- ``refuse_divergent``: GPT-1 normalises the residual stream itself after each sublayer, so no
  sum of writers reaches the unembedding; TransformerLens 3.9's HunYuan attention normalises
  queries and keys before the rotation, HunYuan after (6 % of the logits' size on a tiny random model whose norm
  weights are not 1; nothing where they are);
- ``require_faithful_graph``: the logits circuitviz reads from the booted bridge are the original
  ``transformers`` model's, and the
  graph's writers (the embedding, every head, every MLP) add up to the residual stream the
  unembedding reads (a norm after attention or the MLP that the adapter does not know of, as in
  EXAONE 4, leaves the heads' outputs unnormalised).
"""

from __future__ import annotations

import torch

from circuitviz.core.text import first_sentence
from circuitviz.models.architectures import DIVERGENT, NO_RESIDUAL_SUM, WHOLE_VECTOR_QK_NORMS, labels
from circuitviz.models.errors import ModelLoadError

# a block's parts circuitviz reads: its norms, its attention and its MLP
BLOCK_PARTS = frozenset({"ln1", "ln2", "ln1_post", "ln2_post", "attn", "mlp"})
PROBE_LENGTH = 4


def refuse_divergent(architecture: str) -> None:
    """Refuse, before boot, an architecture the bridge is known to compute otherwise, or whose
    residual stream is no sum of writers."""
    if architecture in NO_RESIDUAL_SUM:
        raise ModelLoadError(
            f"{NO_RESIDUAL_SUM[architecture]} ({architecture}), so its heads' and MLPs' outputs "
            "do not add up to what the unembedding reads; use a model whose residual stream sums "
            "them (GPT-2 and the families after it)."
        )
    if architecture in DIVERGENT:
        raise ModelLoadError(
            f"TransformerLens's bridge computes {architecture} otherwise than transformers does "
            f"({DIVERGENT[architecture]}), so every figure would describe another function; use "
            "another architecture or a newer TransformerLens."
        )


def tolerance(dtype: torch.dtype) -> float:
    """The share of a result's size that rounding may move it by in ``dtype``. On the tiny models of
    the 39 families of ``toy_families.FAMILIES`` the logits and the writers' sum agreed to 2.3e-7
    and 2.9e-7 of the largest in float32, 4.5e-3 and 8.5e-3 in bfloat16; on Gemma-3-270M and
    SmolLM2-135M the logits to 2.1e-7 and 2.5e-7 (float32; equal in bfloat16) and the sum to
    1.8e-8 and 8.7e-8 (float32), 8.2e-3 and 2.5e-3 (bfloat16), 2026-12-07."""
    return 5e-2 if torch.finfo(dtype).bits <= 16 else 1e-3


def probe_tokens(hf_model) -> torch.Tensor:
    """A few token ids spread over the vocabulary, on the embedding's device. [1, PROBE_LENGTH]"""
    embedding = hf_model.get_input_embeddings()
    n_vocab = int(embedding.weight.shape[0])
    ids = [(index * 7919 + 3) % n_vocab for index in range(PROBE_LENGTH)]
    return torch.tensor([ids], dtype=torch.long, device=embedding.weight.device)


@torch.no_grad()
def reference_logits(hf_model, tokens: torch.Tensor) -> torch.Tensor:
    """The ``transformers`` model's own logits on ``tokens``, before any rewrite, without dropout
    (as the booted bridge runs it). [1, pos, vocab]"""
    hf_model.eval()
    try:
        return hf_model(tokens, use_cache=False).logits.detach()
    except Exception as error:  # noqa: BLE001  (a model transformers cannot run raises anything)
        raise ModelLoadError(
            f"transformers cannot run {type(hf_model).__name__} on a few tokens ({type(error).__name__}: "
            f"{first_sentence(error)}); check its config.json against the model's release."
        ) from error


def _share(difference: torch.Tensor, reference: torch.Tensor) -> float:
    """The largest absolute difference as a share of the reference's largest magnitude."""
    scale = float(reference.abs().max())
    return float(difference.abs().max()) / scale if scale > 0 else float(difference.abs().max())


def require_transformer_blocks(bridge) -> None:
    """Refuse a model with a block that is not attention and an MLP (with their norms) alone."""
    architecture = bridge.cfg.architecture
    for index, block in enumerate(bridge.blocks):
        parts = set(getattr(block, "submodules", {}) or {})
        extra = sorted(parts - BLOCK_PARTS)
        missing = [part for part in ("attn", "mlp") if part not in parts]
        if not extra and not missing:
            continue
        layer = type(getattr(block, "original_component", block)).__name__
        mixers = " and ".join(f"a {part!r}" for part in extra if "norm" not in part) or "other parts"
        absent = " or ".join("attention" if part == "attn" else "MLP" for part in missing)
        found = (
            f"has no {absent}" + (f" but {mixers}" if extra else "")
            if missing
            else f"has {mixers} beside its attention and MLP"
        )
        raise ModelLoadError(
            f"{architecture}'s block {index} ({layer}) {found}: a state-space, "
            "recurrent, convolution or linear-attention layer, which no node of circuitviz's graph "
            "of heads and MLPs stands for; use a transformer whose every block is attention and an MLP."
        )


def require_head_wise_qk_norms(hf_model, architecture: str) -> None:
    """Refuse a q- or k-norm over a token's whole query or key vector (all heads together) outside
    the architectures of ``architectures.WHOLE_VECTOR_QK_NORMS`` (OLMo's), whose whole-vector norms circuitviz ungroups and whose methods
    refuse them by name; elsewhere a method that recomputes queries and keys reads each head's
    alone."""
    if architecture in WHOLE_VECTOR_QK_NORMS:
        return
    followed = labels(WHOLE_VECTOR_QK_NORMS)
    for module in hf_model.modules():
        for part in ("q_norm", "k_norm"):
            weight = getattr(getattr(module, part, None), "weight", None)
            head_dim = getattr(module, "head_dim", None)
            if weight is None or weight.dim() != 1 or not head_dim or int(weight.shape[0]) <= int(head_dim):
                continue
            raise ModelLoadError(
                f"{architecture} normalises each token's whole {'query' if part == 'q_norm' else 'key'} "
                f"vector across its heads (a {part.replace('_', '-')} {int(weight.shape[0])} wide for heads "
                f"{int(head_dim)} wide), which circuitviz follows only for {followed}; use another architecture."
            )


@torch.no_grad()
def require_faithful_graph(bridge, tokens: torch.Tensor, expected: torch.Tensor) -> None:
    """Refuse a bridge whose logits on ``tokens`` (at the last position, through circuitviz's own
    final norm and unembedding) are not the ``transformers`` model's ``expected``, or whose graph's
    writers do not add up to the residual the unembedding reads. One pass, keeping every writer."""
    from circuitviz.core.graph import GraphSpec
    from circuitviz.engine.capture import writers_and_residual
    from circuitviz.models.adapter import adapter_of

    if not bool(torch.isfinite(expected).all()):
        return  # transformers' own logits are NaN: the load's finite-logits check says why
    architecture = bridge.cfg.architecture
    writers, residual = writers_and_residual(bridge, GraphSpec.from_model(bridge), tokens)
    last = expected[:, -1]
    logits = adapter_of(bridge).unembed(residual).to(last.device, last.dtype)
    share = _share(logits - last, last)
    if not share <= tolerance(last.dtype):  # NaN fails too
        raise ModelLoadError(
            f"TransformerLens's bridge computes {architecture} otherwise than transformers does (its "
            f"logits differ by {share:.1%} of the largest on a few tokens), so every figure would "
            "describe another function; use another architecture or a newer TransformerLens."
        )
    total = writers[:, -1].float().sum(dim=1).to(residual.device)  # [batch, d_model]
    share = _share(total - residual.float(), residual.float())
    if not share <= tolerance(residual.dtype):
        raise ModelLoadError(
            f"The embedding, heads and MLPs of {architecture} add up to its residual stream only to "
            f"within {share:.1%} of its size (a norm after attention or the MLP, or a term outside "
            "them, that circuitviz does not follow for this architecture), so its circuits would be "
            "wrong; use another architecture."
        )
