"""Circuit-discovery methods behind one interface; reach them by name through the registry.

The registry (``registry.py``) finds the methods itself: every module of this package, and every
``circuitviz.methods`` entry point, is imported the first time a method is asked for, and each
registers its classes with ``@register``. Nothing here lists them.
"""

from .base import (
    Cost,
    Method,
    RunContext,
    ScoringMethod,
    UnknownMethodError,
    config_to_dict,
)
from .registry import (
    DEFAULT_METHOD,
    MethodTraits,
    available_methods,
    default_method,
    get_method,
    method_traits,
    methods_with,
    register,
    setting_flags,
)

__all__ = [
    "DEFAULT_METHOD",
    "Cost",
    "Method",
    "MethodTraits",
    "RunContext",
    "ScoringMethod",
    "UnknownMethodError",
    "available_methods",
    "config_to_dict",
    "default_method",
    "get_method",
    "method_traits",
    "methods_with",
    "register",
    "setting_flags",
]
