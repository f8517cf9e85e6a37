#!/usr/bin/env bash
# Wheels the GPU check needs on a rented GPU machine that has torch and transformers but not
# transformer-lens (it reaches no package index). sae-lens is not carried: it imports wandb, whose
# dependencies (opentelemetry and more) that machine lacks too, so the check's SAE lines are skipped
# there and run on the simulated device of tests/test_device.py. Its transformers (5.17 on
# 2026-12-04) is below our floor of 5.24, so the bridge part fails GPT-NeoX and GPTBigCode there:
# `scripts/gpu-wheels.sh --transformers` also fetches transformers 5.25 with what it imports (not
# numpy or torch) into .whl-tf/, which gpu-session.sh's bridge part installs into a folder of its
# own, ahead of the machine's packages for that part only.
# Run here, then carry .whl/ to that machine and install it there and run from the checkout (not
# installed there, so on the path as "."):
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:.
# See docs/benchmarks.md, "The GPU check".
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
grep -qx '/.whl-tf/' .git/info/exclude 2>/dev/null || echo '/.whl-tf/' >> .git/info/exclude
mkdir -p .whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d .whl transformer-lens==3.9.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 better-abc==0.0.3 \
  fancy-einsum==0.0.3 beartype==0.23.1 typeguard==4.6.1
ls -1 .whl
if [ "${1:-}" = "--transformers" ]; then
    mkdir -p .whl-tf
    python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
      -d .whl-tf transformers==5.25.0
    rm -f .whl-tf/numpy-*.whl .whl-tf/torch-*.whl
    ls -1 .whl-tf
fi
