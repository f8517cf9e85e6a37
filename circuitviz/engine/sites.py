"""Where circuitviz reads and writes inside a model: every TransformerLens hook name, spelled here.

A site is a hook point of one block (``blocks.{layer}.{point}``). The engine, the labels, ACC++
and CircuitLasso ask this module for names instead of spelling them, so a change of backend
(TransformerLens 4's TransformerBridge names its hooks otherwise) is a change of this file and
of ``circuitviz.models.adapter``.
"""

from __future__ import annotations

from ..core.graph import QKV, GraphSpec


def block(layer: int, point: str) -> str:
    """The hook ``point`` of block ``layer``, e.g. ``block(3, "hook_mlp_out")``."""
    return f"blocks.{layer}.{point}"


# the residual stream
def resid_pre(layer: int) -> str:
    """Before block ``layer``; block 0's is the embedding (the ``input`` writer)."""
    return block(layer, "hook_resid_pre")


def resid_post(layer: int) -> str:
    """After block ``layer`` (the last block's is what ``logits`` reads; the embedded SAEs read here)."""
    return block(layer, "hook_resid_post")


EMBEDDING = resid_pre(0)
POSITION_EMBEDDING = "hook_pos_embed"  # learned position embeddings (``standard`` models)


# attention
def head_z(layer: int) -> str:
    """Each head's mixed values before the output projection.  # [batch, pos, n_heads, d_head]"""
    return block(layer, "attn.hook_z")


def head_projection(layer: int, kind: str) -> str:
    """A head's query, key or value (``kind`` in q/k/v) before any q/k-norm or rotation."""
    return block(layer, f"attn.hook_{kind}")


def head_input(layer: int, kind: str) -> str:
    """A head's own copy of the residual stream it reads for q, k or v (split inputs)."""
    return block(layer, f"hook_{kind}_input")


def attention_out(layer: int) -> str:
    """The layer's summed attention output as added to the residual stream."""
    return block(layer, "hook_attn_out")


def attention_pattern(layer: int) -> str:
    return block(layer, "attn.hook_pattern")


def attention_scores(layer: int) -> str:
    return block(layer, "attn.hook_attn_scores")


def norm_scale(layer: int, norm: str) -> str:
    """The scale of the norm sub-module ``norm`` of block ``layer`` (``ln1``, ``ln1_post``,
    ``attn.q_norm``, ``attn.k_norm``)."""
    return block(layer, f"{norm}.hook_scale")


def rotated_query_key(layer: int, rotary: bool) -> tuple[str, str]:
    """Where the queries and keys a layer's scores are made of can be edited: after any q/k-norm
    and the rotation on rotary models, else straight after the projection."""
    if rotary:
        return block(layer, "attn.hook_rot_q"), block(layer, "attn.hook_rot_k")
    return head_projection(layer, "q"), head_projection(layer, "k")


FINAL_NORM_SCALE = "ln_final.hook_scale"


def norm_scales(spec: GraphSpec, residual: bool = True, queries_keys: bool = True) -> list[str]:
    """Every norm scale a model of ``spec``'s depth may have (keep those the model has:
    ``ModelAdapter.has_hook``): with ``residual`` each block's pre- and post-norms and the final
    norm, with ``queries_keys`` the q/k-norms."""
    norms = (("ln1", "ln2", "ln1_post", "ln2_post") if residual else ()) + (
        ("attn.q_norm", "attn.k_norm") if queries_keys else ()
    )
    names = [norm_scale(layer, norm) for layer in range(spec.n_layers) for norm in norms]
    return [*names, FINAL_NORM_SCALE] if residual else names


# MLPs
def mlp_in(layer: int) -> str:
    return block(layer, "hook_mlp_in")


def mlp_out(layer: int) -> str:
    return block(layer, "hook_mlp_out")


def mlp_pre(layer: int, gate: bool = False) -> str:
    """The MLP's hidden pre-activation (``gate``: the linear half of a gated MLP)."""
    return block(layer, "mlp.hook_pre_linear" if gate else "mlp.hook_pre")


def mlp_post(layer: int) -> str:
    """The MLP's hidden activation, what its output projection reads.  # [batch, pos, d_mlp]"""
    return block(layer, "mlp.hook_post")


# the graph's readers and writers
def reader_sites(spec: GraphSpec) -> list[tuple[str, int, int | slice]]:
    """(hook name, number of upstream writers, backward index) for every reader of the graph."""
    points = []
    for layer in range(spec.n_layers):
        for qkv in QKV:
            points.append(
                (head_input(layer, qkv), spec.upstream_of_heads(layer), spec.head_backward(layer, qkv))
            )
        points.append((mlp_in(layer), spec.upstream_of_mlp(layer), spec.mlp_backward(layer)))
    points.append((resid_post(spec.n_layers - 1), spec.n_forward, spec.logits_backward))
    return points


def writer_site(spec: GraphSpec, node: int) -> tuple[str, int | None]:
    """Where one head or MLP writes before anything downstream of it: (hook name, head or None)."""
    for layer in range(spec.n_layers):
        heads = spec.head_forward(layer)
        if heads.start <= node < heads.stop:
            return head_z(layer), node - heads.start
        if node == spec.mlp_forward(layer):
            return mlp_out(layer), None
    raise ValueError(f"Writer {node} is not a head or an MLP; only those can be patched alone.")


def writer_group_sites(spec: GraphSpec) -> list[tuple[str, slice]]:
    """(hook whose output a writer group adds, its forward indices): the input, each layer's
    heads together, each MLP."""
    groups = [(EMBEDDING, slice(0, 1))]
    for layer in range(spec.n_layers):
        groups.append((attention_out(layer), spec.head_forward(layer)))
        mlp = spec.mlp_forward(layer)
        groups.append((mlp_out(layer), slice(mlp, mlp + 1)))
    return groups
