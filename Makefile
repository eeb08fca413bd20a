# One venv, two entry points: `make demo` (the whole job, offline) and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)

.PHONY: install test fuzz kill kills load gpu-check demo bench bench-data bench-bleu bench-decode bench-align bench-align-domain multi30k lint clean mutants lab docs

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,align,tensorboard,serve,load,deploy,hub]'
	rm -f $(VENV)/.installed-*; touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest

# Longer fuzzing than make test's: Schemathesis over every endpoint of nmt serve (2,000
# requests, valid and invalid) and the Hypothesis properties at 400 examples each.
fuzz: $(STAMP)
	$(BIN)/python -m pytest tests/test_fuzz.py tests/test_engine_agreement.py -n 0 -s --hypothesis-profile=fuzz

# The kill harness (tests/test_kills.py): every writer (nmt data import, data prepare, train
# with its checkpoint saves, data synth --force, export, publish, eflomal's work folder) killed
# by SIGTERM, SIGINT, SIGHUP and SIGKILL at 30 random instants each, the next command of that
# kind after each kill, and the table writer x signal x kills x leftovers (docs/data.md, "Safe
# to kill"). Not in make test: it takes hours. Fewer kills: make kills NMT_KILLS=2
NMT_KILLS ?= 30
kills: $(STAMP)
	NMT_KILLS=$(NMT_KILLS) $(BIN)/python -m pytest tests/test_kills.py -n 0 -s --timeout 7200

kill: kills

# nmt serve under Locust over make demo's Bahdanau and Transformer runs: 8, 16 and 32 users,
# 60 s each; ARGS="--soak-minutes 10" adds the soak (docs/serve.md).
load: $(STAMP)
	$(BIN)/python benchmarks/serve_load.py runs/demo/bahdanau runs/demo/transformer $(ARGS)

# On a machine with a GPU: train, resume, decode, torchrun and serve there in a few minutes
# (scripts/gpu_check.py); without CUDA it says so in one line.
gpu-check: $(STAMP)
	$(BIN)/python scripts/gpu_check.py $(ARGS)

demo: $(STAMP)
	bash scripts/demo.sh

# Multi30k de-en (it serves en-de too) from the Hugging Face hub, or from a folder of the
# raw files {split}.{lang}.gz: make multi30k MULTI30K_DIR=/path/to/multi30k
multi30k: $(STAMP)
	$(BIN)/nmt data download multi30k --pair de-en $(if $(MULTI30K_DIR),--from "$(MULTI30K_DIR)")

# The attention essays' claims as checked experiments: reports/lab/report.html.
lab: $(STAMP)
	$(BIN)/nmt lab all --out reports/lab

bench: $(STAMP)
	$(BIN)/python benchmarks/throughput.py $(ARGS)

# Data at scale: import, SentencePiece, encoding, the first step and training RSS on corpora
# of 100k, 1M and 5M pairs recombined from Multi30k (generated, deleted after; needs
# `make multi30k`): reports/bench-data/. Smaller: make bench-data ARGS="--sizes 100000"
bench-data: $(STAMP)
	$(BIN)/python benchmarks/data_scale.py $(ARGS)

# Time to BLEU: two families trained at once for 20 minutes, one thread each, then every
# test split with beam 5 (reports/bench-bleu/). Needs Multi30k de-en (`make multi30k`).
# FAMILIES, SEED: make bench-bleu FAMILIES="luong_general fixed_context" SEED=2
FAMILIES ?= transformer bahdanau
SEED ?= 1
bench-bleu: $(STAMP)
	$(BIN)/python benchmarks/time_to_bleu.py $(FAMILIES) --seed $(SEED) $(ARGS)

# Decoding per engine (docs/deploy.md): PyTorch float32 and int8, CTranslate2 float32 and
# int8 for the Transformer, on make bench-bleu's 20-minute runs of seed SEED (their test
# split, 2 threads, batch 32), and a guided synthetic Transformer's links through the engine
# (trained here first when missing: configs/demo/transformer.yaml with guided.weight 1).
DECODE_FAMILIES ?= transformer bahdanau luong_general luong_local_p fixed_context
GUIDED_RUN := runs/guided/transformer
bench-decode: $(STAMP)
	test -f $(GUIDED_RUN)/checkpoints/best.pt || $(BIN)/nmt train -c configs/demo/transformer.yaml \
	  --set guided.weight=1 --set runs_dir=runs/guided --set name=transformer --no-evaluate
	$(BIN)/python benchmarks/decode.py $(wildcard $(foreach f,$(DECODE_FAMILIES),runs/bench-bleu/$(f)_s$(SEED))) \
	  --guided $(GUIDED_RUN) $(ARGS)

# Word alignments: family x method x single/symmetrised x adapted, synthetic test set and
# Hansards en-fr, with the diagonal and eflomal rows (reports/bench-align/alignment.md).
# The Hansards gold is not in the checkout: give its folder (hansards.en-fr and
# hansards.en-fr.gold) with `make bench-align NMT_ALIGN_GOLD_DIR=DIR` (or export it),
# or leave Hansards out with `make bench-align ARGS="--only synth"`.
bench-align: $(STAMP)
	OMP_NUM_THREADS=1 NMT_ALIGN_GOLD_DIR="$(NMT_ALIGN_GOLD_DIR)" $(BIN)/python benchmarks/alignment.py $(ARGS)

# In-domain word alignment: guided Transformers trained 20 minutes a direction on in-domain
# text, against eflomal on the same text, the Hansards en-fr and Romanian-English golds,
# settings chosen on each gold's first 100 pairs (reports/bench-align-domain/alignment.md).
# Needs the Hansards gold folder (NMT_ALIGN_GOLD_DIR) and the in-domain text
# (NMT_ALIGN_DOMAIN_DIR; docs/alignment.md, "In domain", says how to build it). About 3.5
# hours on 2 cores; a killed run goes on where it stopped (ARGS="--reuse" keeps alignments).
bench-align-domain: $(STAMP)
	NMT_ALIGN_GOLD_DIR="$(NMT_ALIGN_GOLD_DIR)" NMT_ALIGN_DOMAIN_DIR="$(NMT_ALIGN_DOMAIN_DIR)" \
	  $(BIN)/python benchmarks/align_domain.py $(ARGS)

# One-line mutants of the model, search, alignment, evaluation and training code against
# the fast tests; --full runs the survivors against the whole suite too
# (scripts/mutants.py --help: --files, --limit, --sample, --only, --named, --list, --full).
mutants: $(STAMP)
	OMP_NUM_THREADS=1 $(BIN)/python scripts/mutants.py $(ARGS)

# The config reference in docs/configuration.md, from nmt/core/config.py's dataclasses and comments
# (`python scripts/config_reference.py --check` says whether it is stale; a test checks it).
docs: $(STAMP)
	$(BIN)/python scripts/config_reference.py

lint: $(STAMP)
	$(BIN)/ruff check nmt tests

clean:
	rm -rf $(VENV) runs reports data/synth
