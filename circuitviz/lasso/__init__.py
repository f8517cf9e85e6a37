"""CircuitLasso's machinery: observations, units, the batched FISTA Lasso and the SEM fit.

The registered method is ``circuitviz.methods.lasso`` ("circuit-lasso"); the planted-circuit
benchmark that scores every method is ``circuitviz.bench.planted_benchmark``.
"""

from .solver import LassoFit, LassoPath, lasso_fista, lasso_path, sufficient_statistics

__all__ = ["LassoFit", "LassoPath", "lasso_fista", "lasso_path", "sufficient_statistics"]
