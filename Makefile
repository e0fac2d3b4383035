# smct: set-up, the main job and the tests. Everything installs itself on a fresh machine.
PY := .venv/bin/python
VENV_STAMP := .venv/.installed
ARTIFACT ?= artifacts/default
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: serve test venv tools model bench lint clean

## the main job: train + export the default model if missing, serve it with the embedded store
serve: model
	SMCT_ARTIFACT=$(ARTIFACT) .venv/bin/smct serve --host $(HOST) --port $(PORT)

## the tests (installs redis-server, kubectl and promtool when missing)
test: venv tools
	$(PY) -m pytest -q

venv: $(VENV_STAMP)
$(VENV_STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv .venv
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $(VENV_STAMP)

tools:
	bash scripts/install_system_deps.sh

## the default model: univariate, scaled by each series' own history (documented in README);
## trained with the Noam schedule (warm-up 4000) and its last epoch
model: venv $(ARTIFACT)/manifest.json
$(ARTIFACT)/manifest.json:
	.venv/bin/smct train --dataset synthetic-mix --particles 10 --epochs 20 --limit 2000 \
		--d-model 16 --seed 0 --schedule noam --patience 0 --out runs/default --no-progress
	.venv/bin/smct export --checkpoint runs/default --out $(ARTIFACT) --scaling per-series

bench: venv
	$(PY) bench/bench_training.py
	$(PY) bench/bench_runtime.py

lint: venv
	.venv/bin/ruff check model training service cli timeseries tests bench
	.venv/bin/mypy model training service cli timeseries

clean:
	rm -rf .venv runs artifacts .pytest_cache
