"""Layer-wise relevance propagation (LRP) rules for a gradient pass: RelP's backward pass.

Each rule changes what the backward pass propagates through one kind of nonlinearity and
nothing the forward pass computes (every hook returns a value equal to its input):

- norms (LayerNorm, RMSNorm, before and after attention and the MLP, the final norm; the
  q/k-norms as rule "qk-ln"): the scale is detached, so a norm is the linear map
  x -> w (x - mean) / s with s the run's value (the LN rule);
- attention, two choices (``constant_pattern``): with it the pattern is detached, so a head is
  linear in its values and passes nothing back to its queries and keys (the AH rule of Ali et
  al. 2022, RelP's rule for attention and its default); without it the softmax passes its own
  gradient, so queries and keys receive relevance through the pattern (the default rule set of
  RelP's released code, which leaves the AH rule out);
- (not RelP's, for the benchmark's comparison) AttnLRP's attention rule, "attn-half": the softmax
  passes its gradient and the products q.k and pattern.v split what they get half and half
  between their factors;
- the MLP's activation: y = f(x) passes back f(x)/x instead of f'(x) (the identity rule: the
  relevance x * dy/dx equals y);
- a gated MLP's product y = f(g) * l: each factor gets half the relevance (the half rule),
  y -> 0.5 * f(g)|ratio * l.detach() + 0.5 * f(g).detach() * l, with f(g) passing back f(g)/g.

Written as ``value.detach() + (a - a.detach()) * c`` with c detached, so the forward value is the
run's to the last bit and the gradient with respect to a is c.
"""

from __future__ import annotations

from collections.abc import Collection

import torch

from ..core.graph import GraphSpec
from ..models.adapter import Hook, adapter_of
from . import sites


def _ratio(value: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """value / x where x is not 0, else 0 (value is 0 there for the activations in use)."""
    safe = torch.where(x == 0, torch.ones_like(x), x)
    return torch.where(x == 0, torch.zeros_like(x), value / safe)


# the paper's code's rule names (LN-, Identity-, Half-, AH-rule); "qk-ln" is the LN rule on the
# q/k-norms, which the paper's models do not have (kept apart to measure it; on by default);
# "attn-half" is AttnLRP's rule for attention (Achtibat et al. 2024), which the paper does not use:
# the softmax passes its gradient and each of the two products, q.k and pattern.v, gives each
# factor half (the half rule again), i.e. what flows back to q, k, v and the pattern is halved
RULES = ("ln", "qk-ln", "identity", "half", "ah", "attn-half")
DEFAULT_RULES = frozenset(("ln", "qk-ln", "identity", "half", "ah"))


def relevance_hooks(
    model, spec: GraphSpec, constant_pattern: bool = True, rules: Collection[str] | None = None
) -> list[Hook]:
    """Forward hooks that make a gradient pass propagate relevance by the LRP rules above.

    Made fresh for every pass (they keep the MLP's pre-activations of the pass they run in).
    ``constant_pattern``: the AH rule (attention patterns detached); off, the softmax's gradient.
    ``rules``: which of ``RULES`` apply (as the paper's code's list of rules; default: all, "ah"
    as ``constant_pattern`` says); a rule left out keeps autograd's own derivative there, so no
    rule at all is EAP's gradient.
    """
    if rules is None:
        rules = DEFAULT_RULES if constant_pattern else DEFAULT_RULES - {"ah"}
    rules = frozenset(rules)
    unknown = rules - set(RULES)
    if unknown:
        raise ValueError(f"Unknown relevance rules {sorted(unknown)}; choose from {', '.join(RULES)}.")
    adapter = adapter_of(model)
    norms = sites.norm_scales(spec, residual="ln" in rules, queries_keys="qk-ln" in rules)
    hooks: list[Hook] = [(name, _detach) for name in norms if adapter.has_hook(name)]
    share = 0.5 if "half" in rules else 1.0  # what each factor of a gated product passes back
    for layer in range(spec.n_layers):
        if "ah" in rules:
            hooks.append((sites.attention_pattern(layer), _detach))
        if "attn-half" in rules:  # each factor is used once, in its product: halve what it gets
            query, key = sites.rotated_query_key(layer, adapter.rotary)
            factors = (query, key, sites.head_projection(layer, "v"), sites.attention_pattern(layer))
            hooks += [(name, _halved) for name in factors]
        activation, gated = adapter.mlp_activation(layer)
        if not gated and "identity" not in rules:
            continue  # the plain gradient: nothing to change
        kept: dict[str, torch.Tensor] = {}

        def keep(x, hook, kept=kept):
            kept["gate"] = x
            return x

        def keep_linear(x, hook, kept=kept):
            kept["linear"] = x
            return x

        def activated(gate: torch.Tensor, activation=activation) -> torch.Tensor:
            """f(gate) whose gradient is f(g)/g (the identity rule) or autograd's f'(g)."""
            fixed = gate.detach()
            if "identity" not in rules:
                return activation(gate)
            value = activation(fixed)
            return value + (gate - fixed) * _ratio(value, fixed)

        if gated:

            def product(y, hook, kept=kept, activated=activated):
                gate, linear = kept.pop("gate"), kept.pop("linear")
                live = activated(gate)
                fixed_active, fixed_linear = live.detach(), linear.detach()
                gate_part = (live - fixed_active) * fixed_linear
                linear_part = fixed_active * (linear - fixed_linear)
                return y.detach() + share * gate_part + share * linear_part

            hooks += [
                (sites.mlp_pre(layer), keep),
                (sites.mlp_pre(layer, gate=True), keep_linear),
                (sites.mlp_post(layer), product),
            ]
        else:

            def identity(y, hook, kept=kept, activated=activated):
                live = activated(kept.pop("gate"))
                return y.detach() + (live - live.detach())

            hooks += [(sites.mlp_pre(layer), keep), (sites.mlp_post(layer), identity)]
    return hooks


def _detach(x: torch.Tensor, hook) -> torch.Tensor:
    return x.detach()


def _halved(x: torch.Tensor, hook) -> torch.Tensor:
    """x itself (0.5 x + 0.5 x is exact in floating point), passing back half its gradient."""
    return 0.5 * x + 0.5 * x.detach()
