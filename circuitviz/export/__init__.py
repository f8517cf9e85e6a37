"""Circuits in other tools' formats: Neuronpedia's graph JSON, written and read."""
