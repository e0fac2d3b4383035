# smct: set-up, the main job and the tests. Everything installs itself on a fresh machine.
PY := .venv/bin/python
VENV_STAMP := .venv/.installed
ARTIFACT ?= artifacts/default
HOST ?= 127.0.0.1
PORT ?= 8000
# the tests' processes (pytest-xdist); a test file runs whole in one of them
TEST_WORKERS ?= 2

.PHONY: serve test venv tools model model-long model-real model-layer model-through model-through-light model-context model-wide model-gpu gpu-checks bench lint clean

## the main job: serve the default model (committed in artifacts/default) on the embedded store
serve: venv $(ARTIFACT)/manifest.json
	SMCT_ARTIFACT=$(ARTIFACT) .venv/bin/smct serve --host $(HOST) --port $(PORT)

## the tests (installs redis-server, kubectl and promtool when missing)
test: venv tools
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile

venv: $(VENV_STAMP)
$(VENV_STAMP): pyproject.toml client/pyproject.toml
	test -x $(PY) || python3 -m venv .venv
	@echo "installing smct's environment into .venv (a few minutes on a first run)"
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install --progress-bar off -e '.[dev]' -e ./client
	touch $(VENV_STAMP)

tools:
	bash scripts/install_system_deps.sh

## the default model, rebuilt from scratch (the committed one's model id; one thread and the
## AVX2 kernels of torch and MKL: the same arithmetic on any x86-64 machine): univariate, scaled
## by each series' own history, trained on the generated corpus (training/corpus.py) with lags in
## the attention and a skip of the last value, then its forecasts' horizon growth fitted on M1
## (smct calibrate, about 3 minutes)
RECIPE_ENV := OMP_NUM_THREADS=1 ATEN_CPU_CAPABILITY=avx2 MKL_CBWR=AVX2
model: venv
	$(RECIPE_ENV) .venv/bin/smct train --dataset corpus --seq-len 40 --history 16 \
		--window 24 --lags --skip --lag-inputs --obs-scale --n-heads 2 --d-model 16 \
		--particles 10 --epochs 12 --batch-size 64 --schedule cosine --lr 0.003 --patience 0 \
		--threads 1 --seed 0 --out runs/default --no-progress --no-evaluate
	$(RECIPE_ENV) .venv/bin/smct export --checkpoint runs/default --out $(ARTIFACT) --scaling per-series --force
	$(RECIPE_ENV) .venv/bin/smct calibrate --artifact $(ARTIFACT) --threads 1
$(ARTIFACT)/manifest.json:
	$(MAKE) model

## $(call long_run,OUT,EPOCHS,ARGS): a run of the default model's shape on one core, each
## epoch's weights kept in OUT/epochs for the learning curve (smct export --epoch N), started
## with ARGS (its data set, and what else differs from the default recipe: given last, an
## option there takes the place of the recipe's) or, when OUT holds a trainer state, resumed
## from its last epoch: run it again to go on, in as many pieces as it takes, with the same
## weights as one run
define long_run
	if [ -f $(1)/trainer_state.pt ]; then \
		$(RECIPE_ENV) .venv/bin/smct train --resume $(1) --threads 1 --no-progress \
			--no-evaluate; \
	else \
		$(RECIPE_ENV) .venv/bin/smct train --seq-len 40 --history 16 --window 24 --lags \
			--skip --lag-inputs --obs-scale --n-heads 2 --d-model 16 --particles 10 \
			--epochs $(2) --batch-size 64 --schedule cosine --lr 0.003 --patience 0 --threads 1 \
			--seed 0 --out $(1) --no-progress --no-evaluate --snapshots $(3); \
	fi
endef

## the long run: the default model's recipe over LONG_EPOCHS epochs (60: 2.7 hours of one core
## beside other work, 140-270 s an epoch)
LONG_RUN ?= runs/long-d16
LONG_EPOCHS ?= 60
model-long: venv
	$(call long_run,$(LONG_RUN),$(LONG_EPOCHS),--dataset corpus)

## the real-corpus run: the default model's recipe on the generated corpus joined by M1's real
## series (--dataset corpus-real, training/datasets/real_corpus.py); smct competitions scores it
## against the default
REAL_RUN ?= runs/real-m1
REAL_EPOCHS ?= 12
model-real: venv
	$(call long_run,$(REAL_RUN),$(REAL_EPOCHS),--dataset corpus-real)

## the layer run: the real-corpus run on windows normalised by the per-series layer (its season,
## trend and scale from each series up to the window's origin, as the runtime serves them:
## --scaling layer, training/datasets/layer_windows.py), so that the network learns what the
## layer leaves; the windows are normalised once (minutes) and cached
LAYER_RUN ?= runs/layer-real
model-layer: venv
	$(call long_run,$(LAYER_RUN),$(REAL_EPOCHS),--dataset corpus-real --scaling layer)

## the through-layer run: the layer run with the multistep term (--multistep 1: the CRPS of 16
## forecast paths over each window's last 24 steps beside the one-step likelihood), about twice
## an epoch's time
THROUGH_RUN ?= runs/through-layer
model-through: venv
	$(call long_run,$(THROUGH_RUN),$(REAL_EPOCHS),--dataset corpus-real --scaling layer \
		--multistep 1 --multistep-paths 16)

## the through-layer run with the multistep term at a fifth of the weight (0.2), as the full
## weight undid what the layer's windows gained
LIGHT_RUN ?= runs/through-light
model-through-light: venv
	$(call long_run,$(LIGHT_RUN),$(REAL_EPOCHS),--dataset corpus-real --scaling layer \
		--multistep 0.2 --multistep-paths 16)

## the context run, the capacity lever: the layer run with a context of three seasons of a
## monthly series (--window 36, on windows of 60 steps, a multistep forecast conditioned on 24)
CONTEXT_RUN ?= runs/context-36
model-context: venv
	$(call long_run,$(CONTEXT_RUN),$(REAL_EPOCHS),--dataset corpus-real --scaling layer \
		--seq-len 60 --history 24 --window 36)

## the width run, the capacity lever's other half: the layer run at twice the width (--d-model
## 32 --d-ff 64), about twice an epoch's time
WIDE_RUN ?= runs/wide-32
model-wide: venv
	$(call long_run,$(WIDE_RUN),$(REAL_EPOCHS),--dataset corpus-real --scaling layer \
		--d-model 32 --d-ff 64)

## the default model's shape trained on one GPU within GPU_MINUTES (the epochs that fit, the
## schedule spanning them), into artifacts/gpu; SMCT: the command (python3 -m cli.app where
## the project is not installed); GPU_SHAPE: other widths or windows (bench/gpu_checks.sh
## trains several at once), GPU_DATA and GPU_TRAIN: the data set and other training options
## (corpus-real, --scaling layer, --multistep 1), GPU_RUN and GPU_ARTIFACT: where they go
SMCT ?= .venv/bin/smct
GPU_MINUTES ?= 8
GPU_SHAPE ?= --d-model 16 --window 24 --seq-len 40
GPU_DATA ?= corpus
GPU_TRAIN ?=
GPU_RUN ?= runs/gpu
GPU_ARTIFACT ?= artifacts/gpu
model-gpu:
	$(SMCT) train --dataset $(GPU_DATA) --history 16 $(GPU_SHAPE) $(GPU_TRAIN) \
		--lags --skip --lag-inputs --obs-scale --n-heads 2 \
		--particles 10 --epochs 200 --minutes $(GPU_MINUTES) --batch-size 1024 --schedule cosine \
		--lr 0.01 --patience 0 --seed 0 --device cuda --out $(GPU_RUN) --no-progress --no-evaluate \
		--snapshots
	$(SMCT) export --checkpoint $(GPU_RUN) --out $(GPU_ARTIFACT) --scaling per-series --force

## on a lent GPU machine: the cuda tests, the GPU benchmarks and model-gpu (bench/gpu_checks.sh)
gpu-checks:
	bash bench/gpu_checks.sh $(OUT) $(GPU_MINUTES)

bench: venv
	$(PY) bench/bench_training.py
	$(PY) bench/bench_runtime.py

lint: venv
	.venv/bin/ruff check model training service cli timeseries tests bench client scripts
	.venv/bin/mypy model training service cli timeseries client/smct_client scripts

clean:
	rm -rf .venv runs artifacts .pytest_cache
