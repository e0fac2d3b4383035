#!/usr/bin/env bash
# The checks of a lent GPU machine in one run, each one's output saved in OUT_DIR as it ends:
# the rollout on the GPU (bench/bench_rollout.py --device cuda), the service over HTTP with 64
# clients on the GPU and on the CPU (bench/bench_service.py --store embedded) and the ceiling of
# a captured step loop (bench/gpu_graph_probe.py), then the GPU training recipe (make model-gpu)
# at four levers at once within TRAIN_MINUTES, beside the cuda tests (runtime, service and
# training on the GPU against the CPU); the runs, their epochs' weights and logs packed as
# gpu_runs.tgz: eight files in all (a device run brings back 8 files at most; pack anything
# added into one archive).
#
#   bash bench/gpu_checks.sh OUT_DIR [TRAIN_MINUTES]     (0: the benchmark and the tests alone)
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
# the benchmarks first, alone on the device
timeout 150 python3 bench/bench_rollout.py --device cuda --repeat 3 2>&1 | tee "$out/bench_gpu.txt"
# the service over HTTP, 64 clients, on the GPU and then on the CPU of the same machine (the
# embedded store: no redis-server there); the forecasts a second of the two, side by side
for device in cuda cpu; do
  timeout 120 python3 bench/bench_service.py --artifact artifacts/default --store embedded \
    --device "$device" --clients 64 --duration 5 --rounds 2 2>&1 | tee "$out/http_$device.txt"
done
if [ "$minutes" = 0 ]; then  # no training: the cuda tests alone
  timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_cuda.py 2>&1 | tee "$out/cuda_tests.txt"
  exit 0
fi
timeout 90 python3 bench/gpu_graph_probe.py 2>&1 | tee "$out/graph_probe.txt"
# then the training recipe's levers at once (each its own process: the GPU is bound by kernel
# launches): the generated corpus, with M1's real series, normalised by the per-series layer,
# and with the multistep term; each epoch's weights kept, beside the cuda tests. The windows
# normalised by the layer take minutes of one core to make: carried in .cache/smct/windows
# (cp -r ~/.cache/smct/windows .cache/smct/ before the run), they are read from there
if [ -d .cache/smct ]; then export XDG_CACHE_HOME=$PWD/.cache; fi
start=$(date +%s)
mkdir -p runs
shape="--d-model 16 --window 24 --seq-len 40"
for lever in "corpus:corpus:" "real:corpus-real:" "layer:corpus-real:--scaling layer" \
             "through:corpus-real:--scaling layer --multistep 1"; do
  name=${lever%%:*}; rest=${lever#*:}
  make -s model-gpu SMCT="python3 -m cli.app" GPU_MINUTES="$minutes" GPU_SHAPE="$shape" \
    GPU_DATA="${rest%%:*}" GPU_TRAIN="${rest#*:}" \
    GPU_RUN="runs/gpu-$name" GPU_ARTIFACT="artifacts/gpu-$name" > "runs/gpu-$name.log" 2>&1 &
done
timeout 240 python3 -m pytest -q -p no:cacheprovider tests/test_cuda.py 2>&1 | tee "$out/cuda_tests.txt"
wait
echo "training: $(( $(date +%s) - start )) s" | tee "$out/train_gpu.txt"
tail -n 4 runs/gpu-*.log | tee -a "$out/train_gpu.txt"
tar czf "$out/gpu_runs.tgz" runs/gpu-*
