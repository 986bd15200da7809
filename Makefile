# Fresh-machine set-up: `make demo` runs the main job, `make test` runs the suite. Both need only
# this repository: the example tables are bundled in the package (privmarg.datasets).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
OUTDIR ?= out

.PHONY: venv demo test test-sdv docs bench-deps clean

# the demo needs only the core install (numpy, scipy, pandas, pyarrow, typer, rich)
$(BIN)/.core: pyproject.toml
	$(PY) -m venv $(VENV)
	@echo "installing privmarg and its core dependencies (numpy, scipy, pandas, pyarrow, typer, rich) into $(VENV)/"
	$(BIN)/pip install --progress-bar off --no-compile -e .  # bytecode is written on first import, for what is used
	touch $@

# everything the test suite exercises: torch first and pinned (an unpinned torch pulls a multi-GB
# CUDA build); spark is a 456 MB source download built into a wheel (about 40 s), its tests need
# Java 17+ and skip without it
$(BIN)/.installed: $(BIN)/.core
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[torch,plots,ml,test,docs,duckdb,spark,deep]'
	touch $@

venv: $(BIN)/.installed

demo: $(BIN)/.core
	$(BIN)/privmarg datasets write hmeq --output $(OUTDIR)/data --force
	$(BIN)/privmarg synth $(OUTDIR)/data/hmeq.csv --schema $(OUTDIR)/data/schema.json \
	  --method aim --epsilon 1 --delta 1e-9 \
	  --output $(OUTDIR)/hmeq-aim.csv --report $(OUTDIR)/hmeq-aim-run.json
	$(BIN)/privmarg evaluate $(OUTDIR)/data/hmeq.csv $(OUTDIR)/hmeq-aim.csv --schema $(OUTDIR)/data/schema.json \
	  --run-report $(OUTDIR)/hmeq-aim-run.json --output $(OUTDIR)/hmeq-aim-quality.html
	@echo "synthetic table: $(OUTDIR)/hmeq-aim.csv  (raw values, as the input writes them)"
	@echo "quality report:  $(OUTDIR)/hmeq-aim-quality.html  (open it in a browser)"
	@echo "run report:      $(OUTDIR)/hmeq-aim-run.json  (privacy ledger and measurements)"

test: venv
	$(BIN)/python -m pytest -q tests

# the API reference and method pages (docs/, mkdocs.yml) into site/; any warning fails the build
docs: venv
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

SNVENV := .venv-snsynth
SDVVENV := .venv-sdv

# the SDV bridge against SDV 2.x and sdmetrics, in a venv of their own (SDV pins its own stack);
# `make test` skips these tests where SDV is not installed
test-sdv:
	$(PY) -m venv $(SDVVENV)
	$(SDVVENV)/bin/pip install -q --upgrade pip
	$(SDVVENV)/bin/pip install -q torch==2.13.0
	$(SDVVENV)/bin/pip install -q -e '.[sdv,test,plots]'
	$(SDVVENV)/bin/python -m pytest -q tests/test_sdv_bridge.py tests/test_sdv_roundtrip.py

# Peers for side-by-side benchmarks: mbi 2.0.0 in the main venv; smartnoise-synth needs mbi<2 and
# pandas<3, so it gets a venv of its own (benchmarks/peers.py runs it there as a worker).
bench-deps: venv
	$(BIN)/pip install -q -e '.[bench]'
	$(PY) -m venv $(SNVENV)
	$(SNVENV)/bin/pip install -q --upgrade pip
	$(SNVENV)/bin/pip install -q torch==2.13.0
	$(SNVENV)/bin/pip install -q smartnoise-synth==1.0.8 mbi==1.1.0 'pandas<3'

clean:
	rm -rf $(VENV) $(SNVENV) $(SDVVENV) $(OUTDIR) site
