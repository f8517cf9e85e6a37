"""circuitviz: the sparse circuit inside a language model that carries one prompt's answer."""

__version__ = "0.1.0"
