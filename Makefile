# One venv, two entry points: `make demo` (the whole job, offline) and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)

.PHONY: install test demo bench bench-align multi30k lint clean mutants lab

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,align]'
	rm -f $(VENV)/.installed-*; touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest

demo: $(STAMP)
	bash scripts/demo.sh

# Multi30k de-en from the local raw files (the hub path: drop --from).
multi30k: $(STAMP)
	$(BIN)/nmt data download multi30k --pair de-en --from ../shared/corpora/multi30k

# The attention essays' claims as checked experiments: reports/lab/report.html.
lab: $(STAMP)
	$(BIN)/nmt lab all --out reports/lab

bench: $(STAMP)
	$(BIN)/python benchmarks/throughput.py

# Word alignments: family x method x single/symmetrised x adapted, synthetic test set and
# Hansards en-fr, with the diagonal and eflomal rows (reports/bench-align/alignment.md).
bench-align: $(STAMP)
	OMP_NUM_THREADS=1 $(BIN)/python benchmarks/alignment.py $(ARGS)

# One-line mutants of the model, search and alignment code against the fast tests
# (scripts/mutants.py --help: --files, --limit, --sample, --only, --named, --list).
mutants: $(STAMP)
	OMP_NUM_THREADS=1 $(BIN)/python scripts/mutants.py $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check nmt tests

clean:
	rm -rf $(VENV) runs reports data/synth
