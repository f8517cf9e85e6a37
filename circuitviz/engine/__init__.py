"""The engine: what every method and the evaluation compute with.

One job a module: ``sites`` (hook names), ``metric`` (metric objects), ``prefix`` (runs to the
final residual, reusing the positions before the corruption), ``capture`` (writers' outputs),
``patching`` (edges carrying corrupted activations), ``gradients`` (reader gradients), ``scores``
(edge scores from gradients), ``memory`` (working-memory estimates). The model itself is reached
through ``circuitviz.models.adapter``.
"""
