"""What each method family keeps beside a result's common fields: typed, versioned details.

``base`` holds the base class (``MethodDetails``) and the registry stored results find their
class by; it imports nothing of circuitviz, so a family's details module imports only it.
``kinds`` names every built-in family's details and reads them back from a stored state. Every
family's details live here, one module each (``acc``, ``edge_pruning``, ``ensemble``, ``lasso``,
``query``): plain data and the rule that reads a circuit at any budget from a result's own
data, importing no algorithm (no engine, tracer or solver), so loading a stored result loads none.
"""
