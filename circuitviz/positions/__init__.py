"""Circuits over token positions: the (component, position) graph, its drawing data, its export."""
