#!/usr/bin/env bash
# Wheels benchmarks/gpu_check.py needs on the GPU machine, which has torch, numpy, rich,
# tensorboard, matplotlib and opencv but not these (and cannot download). Run here, in the
# repository root; .whl is ignored by git and carried by the device call:
#   bash benchmarks/gpu_wheels.sh
# then, on the GPU machine (carry: [".whl"]):
#   python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
#     --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:. \
#     && PYTHONUNBUFFERED=1 python3 benchmarks/gpu_check.py --out $OUT
# Ray's wheel (about 70 MB) is over what one call carries: the ray line says it is missing.
set -euo pipefail
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform manylinux1_x86_64 -d .whl \
  gymnasium==1.4.0 farama-notifications==0.0.6 ale-py==0.12.1 stable-baselines3==2.9.2 \
  tomli-w==1.2.0 cloudpickle==3.1.3 minatar==1.0.15
ls -la .whl
