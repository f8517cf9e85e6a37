"""Layer-wise relevance propagation (LRP) rules for a gradient pass: RelP's backward pass.

Each rule changes what the backward pass propagates through one kind of nonlinearity and
nothing the forward pass computes (every hook returns a value equal to its input):

- norms (LayerNorm, RMSNorm, before and after attention and the MLP, q/k-norms, the final norm):
  the scale is detached, so a norm is the linear map x -> w (x - mean) / s with s the run's value
  (the LN rule);
- attention, two choices (``constant_pattern``): with it the pattern is detached, so a head is
  linear in its values and passes nothing back to its queries and keys (the AH rule of Ali et
  al. 2022, RelP's rule for attention and its default); without it the softmax passes its own
  gradient, so queries and keys receive relevance through the pattern (the default rule set of
  RelP's released code, which leaves the AH rule out);
- the MLP's activation: y = f(x) passes back f(x)/x instead of f'(x) (the identity rule: the
  relevance x * dy/dx equals y);
- a gated MLP's product y = f(g) * l: each factor gets half the relevance (the half rule),
  y -> 0.5 * f(g)|ratio * l.detach() + 0.5 * f(g).detach() * l, with f(g) passing back f(g)/g.

Written as ``value.detach() + (a - a.detach()) * c`` with c detached, so the forward value is the
run's to the last bit and the gradient with respect to a is c.
"""

from __future__ import annotations

import torch

from ..core.graph import GraphSpec
from ..models.adapter import Hook, adapter_of
from . import sites


def _ratio(value: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """value / x where x is not 0, else 0 (value is 0 there for the activations in use)."""
    safe = torch.where(x == 0, torch.ones_like(x), x)
    return torch.where(x == 0, torch.zeros_like(x), value / safe)


def relevance_hooks(model, spec: GraphSpec, constant_pattern: bool = True) -> list[Hook]:
    """Forward hooks that make a gradient pass propagate relevance by the LRP rules above.

    Made fresh for every pass (they keep the MLP's pre-activations of the pass they run in).
    ``constant_pattern``: the AH rule (attention patterns detached); off, the softmax's gradient.
    """
    adapter = adapter_of(model)
    hooks: list[Hook] = [(name, _detach) for name in sites.norm_scales(spec) if adapter.has_hook(name)]
    for layer in range(spec.n_layers):
        if constant_pattern:
            hooks.append((sites.attention_pattern(layer), _detach))
        activation, gated = adapter.mlp_activation(layer)
        kept: dict[str, torch.Tensor] = {}

        def keep(x, hook, kept=kept, key="gate"):
            kept[key] = x
            return x

        def keep_linear(x, hook, kept=kept):
            kept["linear"] = x
            return x

        if gated:

            def half(y, hook, kept=kept, activation=activation):
                gate, linear = kept.pop("gate"), kept.pop("linear")
                fixed_gate, fixed_linear = gate.detach(), linear.detach()
                active = activation(fixed_gate)
                ratio = _ratio(active, fixed_gate)
                gate_part = (gate - fixed_gate) * ratio * fixed_linear
                linear_part = active * (linear - fixed_linear)
                return y.detach() + 0.5 * gate_part + 0.5 * linear_part

            hooks += [
                (sites.mlp_pre(layer), keep),
                (sites.mlp_pre(layer, gate=True), keep_linear),
                (sites.mlp_post(layer), half),
            ]
        else:

            def identity(y, hook, kept=kept):
                pre = kept.pop("gate")
                fixed = pre.detach()
                return y.detach() + (pre - fixed) * _ratio(y.detach(), fixed)

            hooks += [(sites.mlp_pre(layer), keep), (sites.mlp_post(layer), identity)]
    return hooks


def _detach(x: torch.Tensor, hook) -> torch.Tensor:
    return x.detach()
