"""Core types every layer shares: the model's graph, a task, a result and its curve, and the small
text and key helpers they are written with. Nothing here imports the engine, a method or the UI."""
