"""Measuring circuits on the real model: the batched evaluator, whether a task is meaningful,
transfer to paraphrases, edits of a circuit, and how much work one batched pass may carry."""
