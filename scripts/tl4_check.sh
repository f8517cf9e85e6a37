#!/usr/bin/env bash
# TransformerLens 4 within reach: a separate venv with TransformerLens 4 (no sae-lens, which still
# pins TransformerLens < 4), circuitviz installed without its pinned dependencies, and the engine
# tests that run on TransformerBridge (tests/test_bridge_families.py: ten architecture families,
# exact patching and EAP against the reference, every method).
#
#     scripts/tl4_check.sh [venv folder, default /tmp/circuitviz-tl4] [extra pytest args]
#
# Needs PyPI (or PIP_FIND_LINKS wheels). The day sae-lens allows TransformerLens 4, the move is the
# pin in pyproject.toml plus the list in docs/models.md ("TransformerLens 4").
set -euo pipefail
VENV="${1:-/tmp/circuitviz-tl4}"
shift || true
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
python3 -m venv "$VENV"
"$VENV/bin/pip" install -q --upgrade pip
"$VENV/bin/pip" install -q "torch==2.13.0" --index-url https://download.pytorch.org/whl/cpu \
  || "$VENV/bin/pip" install -q "torch==2.13.0"
"$VENV/bin/pip" install -q "transformer-lens>=4,<5" "transformers>=5,<6" gguf pytest hypothesis \
  networkx scipy pyarrow safetensors tokenizers accelerate
"$VENV/bin/pip" install -q --no-deps -e "$ROOT"
"$VENV/bin/python" -c "import transformer_lens, sys; print('TransformerLens', transformer_lens.__version__ if hasattr(transformer_lens, '__version__') else '?')"
cd "$ROOT"
HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 "$VENV/bin/python" -m pytest tests/test_bridge_families.py -q -m slow "$@"
