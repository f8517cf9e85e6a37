"""What each method family keeps beside a result's common fields: typed, versioned details.

``base`` holds the base class (``MethodDetails``) and the registry stored results find their
class by; it imports nothing of circuitviz, so a family's details module imports only it.
``kinds`` names every built-in family's details and reads them back from a stored state. The
families with a package of their own keep their details there (``query.details``,
``acc.circuit``, ``lasso.details``); ``ensemble`` and ``edge_pruning`` are here.
"""
