"""Circuit-discovery methods behind one interface; reach them by name through the registry."""

from . import (
    acc,  # noqa: F401  (registers acc++)
    acdc,  # noqa: F401  (registers acdc)
    bon,  # noqa: F401  (registers single, average, bon, ibon, bon-csm)
    eap,  # noqa: F401  (registers eap, eap-ig, eap-ig-activations, exact)
    edge_pruning,  # noqa: F401  (registers edge-pruning)
    ensemble,  # noqa: F401  (registers ensemble)
    flow_routes,  # noqa: F401  (registers flow-routes)
    lasso,  # noqa: F401  (registers circuit-lasso)
)
from .base import (
    Cost,
    Method,
    RunContext,
    ScoringMethod,
    UnknownMethodError,
    available_methods,
    config_to_dict,
    get_method,
    register,
    setting_flags,
)

__all__ = [
    "Cost",
    "Method",
    "RunContext",
    "ScoringMethod",
    "UnknownMethodError",
    "available_methods",
    "config_to_dict",
    "get_method",
    "register",
    "setting_flags",
]
