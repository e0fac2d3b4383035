#!/usr/bin/env bash
# The checks of a lent GPU machine in one run, each one's output saved in OUT_DIR as it ends:
# the cuda tests (runtime, service and training on the GPU against the CPU), the rollout on
# the GPU (bench/bench_rollout.py --device cuda), and the GPU training recipe (make model-gpu)
# within TRAIN_MINUTES, its checkpoint packed as gpu_checkpoint.tgz: five files in all (a device
# run brings back 8 files at most; pack anything added into one archive).
#
#   bash bench/gpu_checks.sh OUT_DIR [TRAIN_MINUTES]
#
# Where the project is not installed (the device machine's own python3 holds torch), the
# packages it lacks come from .whl/, which bash bench/gpu_wheels.sh fills (docs/performance.md).
set -u
out=${1:?usage: bash bench/gpu_checks.sh OUT_DIR [TRAIN_MINUTES]}
minutes=${2:-8}
export PYTHONUNBUFFERED=1 PYTHONPATH=${PYTHONPATH:-}:$PWD
if [ -d .whl ]; then
  # pure-python wheels; the compiled packages unpacked per python (site-cpXY.tar.xz), with
  # llvmlite's library, the same for every python, packed once
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl
  abi=$(python3 -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
  if [ -f ".whl/site-$abi.tar.xz" ]; then
    tar -xJf ".whl/site-$abi.tar.xz" -C /tmp/site
    xz -dc .whl/libllvmlite.so.xz > /tmp/site/llvmlite/binding/libllvmlite.so
  fi
  export PYTHONPATH=/tmp/site:$PYTHONPATH
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$out/gpu.txt"
python3 -c "import torch; print('torch', torch.__version__)" | tee -a "$out/gpu.txt"
python3 -m pytest -q -p no:cacheprovider tests/test_cuda.py 2>&1 | tee "$out/cuda_tests.txt"
python3 bench/bench_rollout.py --device cuda 2>&1 | tee "$out/bench_gpu.txt"
start=$(date +%s)
make -s model-gpu SMCT="python3 -m cli.app" GPU_MINUTES="$minutes" 2>&1 | tee "$out/train_gpu.txt"
echo "model-gpu: $(( $(date +%s) - start )) s" | tee -a "$out/train_gpu.txt"
tar czf "$out/gpu_checkpoint.tgz" runs/gpu
