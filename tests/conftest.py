"""Shared fixtures: tiny models are cheap; the embedded model is loaded once per session."""

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="session")
def embedded_model():
    from circuitviz.models import EMBEDDED_MODEL, load_model

    return load_model(EMBEDDED_MODEL, device="cpu")
