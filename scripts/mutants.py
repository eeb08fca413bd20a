"""One-line mutation check of the model, search, alignment, evaluation and training code
(`make mutants`).

Every mutant changes one line of one file (default: nmt/models, nmt/decoding/search.py,
nmt/align/*.py, nmt/decoding/evaluate.py, nmt/training/trainer.py, nmt/training/loss.py,
nmt/training/schedule.py and nmt/training/optim.py): an operator swap (+/-, * and /, ** -> *, & and |,
< and <=, > and >=, == and !=, is / is not, in / not in), a numeric constant (0 -> 1,
n -> n - 1, 1.0 -> 2.0, 2.0 -> 1.0, x -> 2x), a dropped unary call (torch.tanh(x) -> (x),
math.sqrt(x) -> (x), ...), a dropped `not`, `~` or unary minus, or an index shift
([1:] <-> [:-1]). For each mutant a fast, targeted test subset runs against a scratch copy
of the checkout (the working tree is never modified); a mutant is *killed* when a test
fails and *survives* when every test passes.

--full: the survivors of that fast pass run again, each against the whole suite (the
tests `make test` runs, with -x), after one baseline run of the unmutated suite in the
copy. The suite is reordered by test file, never cut: first the files that killed other
mutants of the same file, then the files that name the mutated module, then the rest,
quickest first, and last the files of the fast subset (they already passed). A kill is
confirmed by running the killing test alone on the unmutated copy; if it fails there too,
the mutant is *unconfirmed* (an order-dependent or flaky test), not killed. Child
processes of the tests import the mutated copy too (PYTHONPATH, no bytecode written).

Speed: the parent imports torch, numpy and pytest once and forks a child per mutant, so
a mutant costs its tests only (OMP_NUM_THREADS=1, one mutant at a time).

    python scripts/mutants.py --list                      # mutants, with ids
    python scripts/mutants.py --files nmt/decoding/search.py --limit 20
    python scripts/mutants.py --sample 200 --seed 1       # a random sample
    python scripts/mutants.py --only nmt/decoding/search.py:61:0   # chosen ids
    python scripts/mutants.py --named                     # the issue's named mutations
    python scripts/mutants.py --sample 100 --seed 1 --full --json mutants.json
"""

from __future__ import annotations

import argparse
import ast
import glob
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # --root replaces it (the script's own tests)
TARGETS = ["nmt/models/*.py", "nmt/decoding/search.py", "nmt/align/*.py", "nmt/decoding/evaluate.py",
           "nmt/training/trainer.py", "nmt/training/loss.py", "nmt/training/schedule.py", "nmt/training/optim.py"]
# The summary's areas: label -> path prefixes (a path outside them is its own area).
AREAS = {"nmt/models": ("nmt/models/",), "nmt/decoding/search.py": ("nmt/decoding/search.py",),
         "nmt/decoding/evaluate.py": ("nmt/decoding/evaluate.py",), "nmt/align": ("nmt/align/",),
         "nmt/training/trainer.py": ("nmt/training/trainer.py", "nmt/training/loss.py"),
         "nmt/training/schedule.py, optim.py": ("nmt/training/schedule.py", "nmt/training/optim.py")}
EQUATIONS = ["tests/test_equations_rnn.py", "tests/test_equations_luong.py",
             "tests/test_equations_transformer.py"]
SLOW = ["--deselect", "tests/test_limits.py::test_transformer_decodes_past_1024_target_positions",
        "--deselect", "tests/test_limits.py::test_transformer_encodes_and_teacher_forces_long_"
        "sequences"]  # 10 s together; they only concern transformer.py's position table
TRAIN = "tests/test_train.py::test_"
RELIABILITY = "tests/test_reliability.py::test_"
# Short trainings that check the loss (padding masked out, the auxiliary and guided
# terms), resume, checkpoints, the data report, non-finite steps and kept checkpoints, the
# promises of train.py's docstrings (tests/test_promises_train.py); the
# families' 260-700-step learning runs are left to the full pass, but for one (bahdanau).
TRAINING = [TRAIN + "training_loss_adds_the_terms_the_forward_pass_returns",  # quickest first
            TRAIN + "trainer_steps_the_local_window_curriculum",
            TRAIN + "the_optimiser_takes_the_models_parameter_groups_in_training_and_adapt",
            TRAIN + "checkpoint_round_trip_restores_the_model",
            TRAIN + "training_reports_the_pairs_it_leaves_out",
            TRAIN + "resume_reaches_the_same_parameters",
            "tests/test_api.py::test_keep_last_keeps_only_the_last_n",
            "tests/test_guided.py::test_weight_zero_trains_exactly_like_an_unguided_run_and_a_"
            "weight_changes_it",
            RELIABILITY + "non_finite_losses_stop_training_and_keep_the_checkpoint",
            RELIABILITY + "non_finite_losses_before_any_checkpoint",
            RELIABILITY + "one_non_finite_step_is_skipped_and_counted",
            "tests/test_schedule.py",
            "tests/test_promises_train.py",  # the docstrings' promises: loss, budgets, logs
            TRAIN + "every_family_learns_the_synthetic_corpus[bahdanau]"]
# Alignment: the metrics, readings, I/O, symmetrisation and the docstrings' promises (about
# 20 s); a file's own CLI or training tests are added below, the slow guided runs are not.
ALIGN = ["tests/test_equations_align.py", "tests/test_alignment.py",
         "tests/test_promises_align.py", "tests/test_symmetrize.py"]
GUIDED_SLOW = [arg for name in ("adapting_a_guided_run_keeps_its_guidance",
                                "guidance_teaches_the_supervised_head_to_follow_the_teacher",
                                "weight_zero_trains_exactly_like_an_unguided_run_and_a_"
                                "weight_changes_it")
               for arg in ("--deselect", f"tests/test_guided.py::test_{name}")]
# The fast tests that should kill a mutant of each file: the first prefix that matches.
# Test files that do not exist (yet) are skipped; other items are passed to pytest as is.
PUBLISH = ["tests/test_publish.py"]  # the model folder, its card and the transformers reading
GUIDED = ["tests/test_guided.py", *GUIDED_SLOW]
TESTS = {
    # this round's code (issues 60-62): a run's own data, sharing a model, in-domain alignment
    "nmt/data/store.py": ["tests/test_store.py", "tests/test_run_owns_data.py",
                          "tests/test_promises_data.py", "tests/test_signals_held.py"],
    "nmt/core/locks.py": ["tests/test_locks.py", "tests/test_signals_held.py",
                          "tests/test_export_safety.py"],
    "nmt/core/rundir.py": ["tests/test_run_owns_data.py", "tests/test_export_safety.py",
                           "tests/test_layout.py"],
    "nmt/decoding/publish.py": PUBLISH,
    "nmt/decoding/card.py": PUBLISH,
    "nmt/models/published.py": PUBLISH,
    "nmt/models/marian.py": PUBLISH,
    "nmt/align/spans.py": ALIGN + ["tests/test_spans.py"],
    "nmt/training/guided.py": GUIDED + ["tests/test_spans.py", "tests/test_bootstrap.py"],
    "nmt/training/bootstrap.py": ["tests/test_bootstrap.py"],
    "nmt/training/adapt.py": ["tests/test_guided.py"],
    "nmt/data/links.py": ALIGN + GUIDED + ["tests/test_align_methods.py"],
    "nmt/data/symmetrize.py": ["tests/test_symmetrize.py", "tests/test_align_methods.py",
                               "tests/test_bootstrap.py"],
    # importing a corpus and a run's own copy of it (issue 60)
    "nmt/data/pipeline.py": ["tests/test_import.py", "tests/test_corpora.py",
                             "tests/test_promises_data.py", "tests/test_run_owns_data.py",
                             "tests/test_data_edges.py"],
    "nmt/data/hub.py": ["tests/test_import.py", "tests/test_streaming.py",
                        "tests/test_promises_data.py"],
    "nmt/data/sources.py": ["tests/test_import.py", "tests/test_streaming.py",
                            "tests/test_promises_data.py", "tests/test_run_owns_data.py",
                            "tests/test_data_edges.py"],
    "nmt/data/corpora.py": ["tests/test_corpora.py", "tests/test_import.py",
                            "tests/test_promises_data.py", "tests/test_data_show.py",
                            "tests/test_data_edges.py"],
    "nmt/data/folder.py": ["tests/test_run_owns_data.py", "tests/test_import.py",
                           "tests/test_store.py"],
    "nmt/data/caches.py": ["tests/test_run_owns_data.py", "tests/test_promises_data.py",
                           "tests/test_data_edges.py"],
    "nmt/data/pin.py": ["tests/test_run_owns_data.py", "tests/test_promises_data.py",
                        "tests/test_data_edges.py"],
    "nmt/data/subwords.py": ["tests/test_subwords.py", "tests/test_store.py",
                             "tests/test_subword_sampling.py",
                             "tests/test_data_edges.py"],
    "nmt/training/batches.py": ["tests/test_run_owns_data.py", "tests/test_subword_sampling.py",
                                "tests/test_bad_inputs.py"],
    "nmt/core/scratch.py": ["tests/test_promises_data.py", "tests/test_run_owns_data.py",
                            "tests/test_store.py",
                            "tests/test_data_edges.py"],
    # batching, precision, the process group and the config
    "nmt/data/batching.py": ["tests/test_store.py", "tests/test_promises_data.py",
                             "tests/test_data_edges.py",
                             "tests/test_distributed.py", "tests/test_run_owns_data.py",
                             TRAIN + "join_pairs_uses_every_pair_once_and_keeps_one_eos",
                             TRAIN + "training_logits_come_from_a_few_row_counts_and_equal_the_"
                             "unpadded_ones", "tests/test_guided.py::test_guidance_teaches_the_"
                             "supervised_head_to_follow_the_teacher"],
    "nmt/training/precision.py": ["tests/test_probe_and_config.py", TRAIN + "native_bf16_reads_"
                                  "the_cpu_flags_and_refuses_cuda_emulation",
                                  TRAIN + "precision_auto_keeps_what_the_timing_finds_faster_"
                                  "and_remembers_it", TRAIN + "precision_as_written_or_without_"
                                  "native_bf16_is_not_timed", TRAIN + "precision_probe_picks_"
                                  "bf16_only_past_the_margin", TRAIN + "a_bf16_run_bounds_the_"
                                  "kernel_cache_unless_the_environment_sets_it"],
    "nmt/training/distributed.py": ["tests/test_distributed.py", "tests/test_probe_and_config.py",
                                    TRAIN + "native_bf16_reads_the_cpu_flags_and_refuses_cuda_"
                                    "emulation"],
    "nmt/core/config.py": ["tests/test_config.py", "tests/test_probe_and_config.py",
                           "tests/test_bad_inputs.py"],
    "nmt/core/fields.py": ["tests/test_config.py", "tests/test_probe_and_config.py",
                           "tests/test_bad_inputs.py"],
    # the lab, progress, plots and the command line
    "nmt/lab/": ["tests/test_lab.py"],
    "nmt/core/progress.py": ["tests/test_progress.py"],
    "nmt/core/plotting.py": ["tests/test_plotting.py", "tests/test_data_show.py"],
    "nmt/cli/": ["tests/test_cli.py", "tests/test_bad_inputs.py",
                 "tests/test_guided.py::test_teachers_and_their_errors",
                 "tests/test_guided.py::test_data_links_computes_eflomals_links_once_and_then_"
                 "reads_them", "tests/test_lab.py::test_cli_lab_list_and_run",
                 "tests/test_serve_boundaries.py::test_the_cli_allows_its_address_localhost_"
                 "and_the_names_given"],
    "nmt/data/synth.py": ["tests/test_synth.py"],
    "nmt/data/synth_words.py": ["tests/test_synth.py"],
    "nmt/data/overview.py": ["tests/test_data_show.py"],
    "nmt/training/tensorboard.py": ["tests/test_tensorboard.py"],
    "nmt/core/document.py": ["tests/test_report.py",
                             "tests/test_lab.py::test_report_embeds_every_figure"],
    # decoding, serving and reporting
    "nmt/decoding/api.py": ["tests/test_api.py", "tests/test_deploy.py"],
    "nmt/decoding/translate.py": ["tests/test_engine_agreement.py", "tests/test_promises_search.py",
                                  "tests/test_api.py"],
    "nmt/decoding/engines.py": ["tests/test_engine_agreement.py", "tests/test_deploy.py"],
    "nmt/decoding/export.py": ["tests/test_deploy.py", "tests/test_export_safety.py",
                               "tests/test_engine_agreement.py"],
    "nmt/serve/": ["tests/test_serve.py", "tests/test_serve_boundaries.py",
                   "tests/test_serve_limits.py"],
    "nmt/core/checkpoint.py": ["tests/test_checkpoint.py", "tests/test_export_safety.py",
                               "tests/test_api.py::test_average_writes_the_element_wise_mean_of_"
                               "the_last_n"],
    "nmt/report/compare.py": ["tests/test_report.py", "tests/test_statistical.py"],
    "nmt/report/align_plots.py": ["tests/test_align.py", "tests/test_bad_inputs.py"],
    # the machine a figure names, memory, one-line errors, the engines' shared limits
    "nmt/core/machine.py": ["tests/test_machine_and_memory.py", "tests/test_probe_and_config.py",
                            PUBLISH[0]],
    "nmt/core/memory.py": ["tests/test_machine_and_memory.py", "tests/test_probe_and_config.py",
                           "tests/test_promises_train.py::test_release_free_memory_hands_"
                           "freed_heap_pages_back"],
    "nmt/core/errors.py": ["tests/test_machine_and_memory.py", "tests/test_cli.py",
                           "tests/test_bad_inputs.py"],
    "nmt/core/engine.py": ["tests/test_engine_agreement.py", "tests/test_limits.py",
                           "tests/test_deploy.py"],
    "nmt/explore/": ["tests/test_explore.py"],
    "nmt/models/transformer.py": EQUATIONS + ["tests/test_attention.py", "tests/test_models.py",
                                              "tests/test_limits.py", "tests/test_guided.py::"
                                              "test_full_context_attention_sees_the_whole_"
                                              "target_and_trains_the_loss"],
    "nmt/models/": EQUATIONS + ["tests/test_attention.py", "tests/test_models.py",
                                "tests/test_equations_search.py", "tests/test_search.py",
                                "tests/test_limits.py", "tests/test_promises_models.py",
                                "tests/test_guided.py::test_teachers_and_their_errors", *SLOW],
    "nmt/decoding/search.py": ["tests/test_equations_search.py", "tests/test_search.py",
                      "tests/test_limits.py", *SLOW],
    "nmt/align/attribution.py": ALIGN + ["tests/test_attribution.py"],
    "nmt/report/align.py": ALIGN + ["tests/test_align_methods.py", "tests/test_statistical.py::"
                                    "test_align_statistical_gives_one_row_per_link_heuristic"],
    "nmt/align/guided.py": ALIGN + ["tests/test_guided.py", *GUIDED_SLOW],
    "nmt/align/statistical.py": ALIGN + ["tests/test_statistical.py"],
    "nmt/align/": ALIGN,
    # bleu_chrf scores every validation and the bahdanau run's test set; `nmt evaluate`
    # (evaluate_model, bleu_by_length) runs in the averaging test
    "nmt/decoding/evaluate.py": ["tests/test_promises_evaluate.py",
                        TRAIN + "every_family_learns_the_synthetic_corpus[bahdanau]",
                        "tests/test_api.py::test_average_writes_the_element_wise_mean_of_the_"
                        "last_n"],
    "nmt/training/trainer.py": TRAINING,
    "nmt/training/loss.py": ["tests/test_loss.py", *TRAINING],  # loss_fn: the training pass
    "nmt/training/schedule.py": ["tests/test_schedule.py", TRAIN + "resume_reaches_the_same_parameters",
                        TRAIN + "every_family_learns_the_synthetic_corpus[transformer]"],
    "nmt/training/optim.py": ["tests/test_schedule.py", TRAIN + "the_optimiser_takes_the_models_"
                     "parameter_groups_in_training_and_adapt",
                     TRAIN + "the_optimiser_is_torchs_fused_adam_with_the_same_update_as_the_"
                     "default",
                     TRAIN + "resume_reaches_the_same_parameters"],
}
BINOPS = {ast.Add: ("+", "-"), ast.Sub: ("-", "+"), ast.Mult: ("*", "/"),
          ast.Div: ("/", "*"), ast.Pow: ("**", "*"), ast.BitAnd: ("&", "|"),
          ast.BitOr: ("|", "&"), ast.FloorDiv: ("//", "*")}
COMPARES = {ast.Lt: ("<", "<="), ast.LtE: ("<=", "<"), ast.Gt: (">", ">="),
            ast.GtE: (">=", ">"), ast.Eq: ("==", "!="), ast.NotEq: ("!=", "=="),
            ast.Is: ("is", "is not"), ast.IsNot: ("is not", "is"),
            ast.In: ("in", "not in"), ast.NotIn: ("not in", "in")}
UNARY_CALLS = {"tanh", "sigmoid", "exp", "sqrt", "log", "abs", "relu", "log_softmax"}
# The one-line changes named in issue 9 ("Why"): id -> (file, exact text, replacement).
NAMED = {
    "gaussian-width": ("nmt/models/attention.py", "sigma = self.window / 2.0",
                       "sigma = self.window / 1.0"),
    "no-length-penalty": ("nmt/decoding/search.py", "/ length_penalty(len(tokens) + 1, alpha)", ""),
    "no-sqrt-dk-explicit": ("nmt/models/attention.py", " / math.sqrt(q.size(-1))", ""),
    "no-sqrt-dk-fused": ("nmt/models/attention.py", "attn_mask=mask, dropout_p=dropout)",
                         "attn_mask=mask, dropout_p=dropout, scale=1.0)"),
    "luong-previous-state": ("nmt/models/rnn.py", "query = h.unsqueeze(1)",
                             'query = state["h"][:, -1:]'),
    "local-m-position": ("nmt/models/attention.py", "torch.minimum(step.to(query.dtype),",
                         "torch.minimum(step.to(query.dtype) + 1,"),
    "shifted-naive-swap": ("nmt/align/words.py", "return mean[1:] if shifted else mean[:-1]",
                           "return mean[:-1] if shifted else mean[1:]"),
    "default-layer": ("nmt/align/words.py", "(L - 2 if L > 1 else 0) if layer is None",
                      "(L - 1 if L > 1 else 0) if layer is None"),
    "duplicate-nbest": ("nmt/decoding/search.py", 'scores[:, 1:] = float("-inf")', "scores[:, 1:] = 0.0"),
}




@dataclass
class Mutant:
    id: str  # file:line:k (k-th mutant of that line)
    path: str  # relative to the repository root
    line: int  # 1-based
    old: str  # the original line, stripped
    new: str  # the mutated line, stripped
    source: str  # the whole mutated file
    by: str = ""  # the first test that failed (fast pass)
    fast: str = ""  # fast pass: killed, survived or timeout
    full: str = ""  # full pass (survivors only): killed, survived, timeout or unconfirmed
    full_by: str = ""  # the first test of the whole suite that failed
    seconds: float = 0.0  # fast pass
    full_seconds: float = 0.0  # full pass, confirmation included

    @property
    def outcome(self) -> str:
        return self.full or self.fast


def _replace(lines: list[bytes], node: ast.AST, start: int, end: int, text: str) -> bytes:
    """The node's line with bytes [start, end) replaced (ast columns are UTF-8 offsets)."""
    raw = lines[node.lineno - 1]
    return raw[:start] + text.encode() + raw[end:]


def _operator(lines, node, left, right, old: str, new: str):
    """Swap the operator written between `left` and `right` on one line."""
    if left.end_lineno != right.lineno:
        return None
    raw = lines[left.end_lineno - 1]
    gap = raw[left.end_col_offset:right.col_offset].decode()
    core = " ".join(gap.strip(" ()").split())
    if core != old:
        return None
    offset = left.end_col_offset + len(gap[:gap.index(old.split()[0])].encode())
    return _replace(lines, left, offset, offset + len(gap.strip(" ()").encode()), new)


def _number(value):
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, int):
        return "1" if value == 0 else str(value - 1)
    return {0.0: "1.0", 1.0: "2.0", 2.0: "1.0"}.get(value, repr(value * 2))


def _node_mutations(lines, node):
    """(line number, mutated line bytes) for every mutation of one AST node."""
    one_line = getattr(node, "lineno", None) == getattr(node, "end_lineno", -1)
    seg = (node.col_offset, node.end_col_offset) if one_line else None
    if isinstance(node, ast.BinOp) and type(node.op) in BINOPS:
        yield node.left.end_lineno, _operator(lines, node, node.left, node.right,
                                              *BINOPS[type(node.op)])
    elif isinstance(node, ast.Compare):
        operands = [node.left, *node.comparators]
        for op, left, right in zip(node.ops, operands, operands[1:]):
            if type(op) in COMPARES:
                yield left.end_lineno, _operator(lines, node, left, right, *COMPARES[type(op)])
    elif isinstance(node, ast.Constant) and seg and _number(node.value) is not None:
        yield node.lineno, _replace(lines, node, *seg, _number(node.value))
    elif isinstance(node, ast.Call) and seg and len(node.args) == 1 and not node.keywords:
        name = getattr(node.func, "attr", getattr(node.func, "id", ""))
        arg = node.args[0]
        if name in UNARY_CALLS and arg.lineno == node.lineno == arg.end_lineno:
            inner = lines[node.lineno - 1][arg.col_offset:arg.end_col_offset].decode()
            yield node.lineno, _replace(lines, node, *seg, f"({inner})")
    elif isinstance(node, ast.UnaryOp) and seg and not isinstance(node.op, ast.UAdd):
        if not (isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant)):
            inner = node.operand
            if inner.lineno == inner.end_lineno == node.lineno:
                text = lines[node.lineno - 1][inner.col_offset:inner.end_col_offset].decode()
                yield node.lineno, _replace(lines, node, *seg, f"({text})")
    elif isinstance(node, ast.Slice) and seg and node.step is None:
        text = ast.unparse(node)
        swap = {"1:": ":-1", ":-1": "1:"}.get(text)
        if swap:
            yield node.lineno, _replace(lines, node, *seg, swap)


def _skipped(tree: ast.AST) -> set[int]:
    """ids of nodes not to mutate: f-strings, raise statements, annotations, defaults."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        parts = []
        if isinstance(node, ast.JoinedStr | ast.Raise):
            parts = [node]
        elif isinstance(node, ast.arguments):  # default values: settings, not equations
            parts = [d for d in node.defaults + node.kw_defaults if d is not None]
        elif isinstance(node, ast.ClassDef):  # dataclass field defaults, likewise
            parts = [n.value for n in node.body if isinstance(n, ast.AnnAssign) and n.value]
        elif isinstance(node, ast.arg | ast.AnnAssign | ast.FunctionDef) and getattr(
                node, "annotation", None) is not None:
            parts = [node.annotation]
        if isinstance(node, ast.FunctionDef) and node.returns is not None:
            parts.append(node.returns)
        for part in parts:
            skip.update(id(sub) for sub in ast.walk(part))
    return skip


def mutants_of(path: str) -> list[Mutant]:
    """Every one-line mutant of one file that still compiles."""
    text = (ROOT / path).read_text(encoding="utf-8")
    tree = ast.parse(text)
    lines = text.encode().split(b"\n")
    skip = _skipped(tree)
    found: dict[int, list[bytes]] = {}
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        for lineno, new in _node_mutations(lines, node):
            if new is not None and new != lines[lineno - 1] and new not in found.get(lineno, []):
                found.setdefault(lineno, []).append(new)
    out = []
    for lineno in sorted(found):
        for k, new in enumerate(found[lineno]):
            mutated = lines[:lineno - 1] + [new] + lines[lineno:]
            source = b"\n".join(mutated).decode()
            try:
                compile(source, path, "exec")
            except SyntaxError:
                continue
            out.append(Mutant(f"{path}:{lineno}:{k}", path, lineno,
                              lines[lineno - 1].decode().strip(), new.decode().strip(), source))
    return out


def named_mutant(name: str) -> Mutant:
    path, old, new = NAMED[name]
    text = (ROOT / path).read_text(encoding="utf-8")
    if text.count(old) != 1:
        raise SystemExit(f"mutants: named mutation {name!r}: {old!r} is not exactly once in "
                         f"{path}; update NAMED in scripts/mutants.py")
    source = text.replace(old, new)
    lineno = text[:text.index(old)].count("\n") + 1
    return Mutant(name, path, lineno, text.splitlines()[lineno - 1].strip(),
                  source.splitlines()[lineno - 1].strip(), source)




def tests_for(path: str) -> list[str]:
    for prefix, tests in TESTS.items():
        if path.startswith(prefix):
            return [t for t in tests if not t.endswith(".py") or (ROOT / t).is_file()]
    raise SystemExit(f"mutants: no test subset for {path}; add one to TESTS")


def test_files(tests: list[str]) -> set[str]:
    """The test files a pytest argument list names (node ids and files, not options)."""
    files, skip = set(), False
    for item in tests:
        if not skip and not item.startswith("-"):
            files.add(item.split("::")[0])
        skip = item in ("--deselect", "-k", "-m")
    return files


def area_of(path: str) -> str:
    return next((label for label, prefixes in AREAS.items() if path.startswith(prefixes)),
                path)


def tree_files() -> list[str]:
    """The checkout's files as `make test` sees them: tracked and untracked ones git does
    not ignore (the whole folder, caches aside, where it is not a git work tree)."""
    try:
        listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached",
                                 "--others", "--exclude-standard"], capture_output=True,
                                check=True).stdout.decode()
        files = [f for f in listed.split("\0") if f]
    except (OSError, subprocess.CalledProcessError):
        files = [str(p.relative_to(ROOT)) for p in ROOT.rglob("*") if p.is_file() and not {
            ".git", ".venv", "__pycache__", ".pytest_cache"} & set(p.relative_to(ROOT).parts)]
    return sorted(f for f in files if (ROOT / f).is_file() and not f.endswith(".pyc"))


def scratch_copy() -> Path:
    """A copy of the checkout (package, tests, docs, configs, scripts, ...) where mutants
    are written; the whole suite runs there as it does in the working tree."""
    where = Path(tempfile.mkdtemp(prefix="nmt-mutants-")) / "checkout"  # logs go beside it
    where.mkdir()
    for name in tree_files():
        (where / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, where / name)
    return where


@dataclass
class Run:
    outcome: str  # passed, failed or timeout
    failed: list  # ids of the failing tests (collection errors: the file), in order
    seconds: dict  # test file -> seconds (setup, call and teardown)
    wall: float
    skipped: int = 0

    @property
    def by(self) -> str:
        return self.failed[0] if self.failed else "(no test id: see pytest output)"


class _Recorder:
    """A pytest plugin for the child: leaves out the tests in `exclude` (exact ids), orders
    the others by file (`rank`, a stable sort, so a file's tests stay together in their
    order) and notes failures and times."""

    def __init__(self, rank: dict[str, int] | None = None, exclude=()):
        self.rank, self.exclude = rank or {}, set(exclude)
        self.failed, self.seconds, self.skipped = [], {}, 0

    def pytest_collection_modifyitems(self, config, items):
        if self.exclude:
            out = [item for item in items if item.nodeid in self.exclude]
            items[:] = [item for item in items if item.nodeid not in self.exclude]
            config.hook.pytest_deselected(items=out)
        if self.rank:
            last = len(self.rank)
            items.sort(key=lambda item: self.rank.get(item.nodeid.split("::")[0], last))

    def pytest_collectreport(self, report):
        if report.failed:
            self.failed.append(report.nodeid or "(collection)")

    def pytest_runtest_logreport(self, report):
        file = report.nodeid.split("::")[0]
        self.seconds[file] = self.seconds.get(file, 0.0) + report.duration
        if report.failed and report.nodeid not in self.failed:
            self.failed.append(report.nodeid)
        self.skipped += report.skipped


def _child(copy: Path, args: list[str], rank: dict | None, exclude) -> int:
    """In the forked child: run pytest on the copy, the (mutated) package imported from the
    copy, never the tree, in this process and in the processes the tests start."""
    os.setpgid(0, 0)  # its own process group: a timeout ends the tests' children too
    os.chdir(copy)
    sys.path.insert(0, str(copy))
    sys.dont_write_bytecode = True  # and no stale .pyc of a mutant for a later one
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(copy), *filter(None, [os.environ.get("PYTHONPATH")])])
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    os.environ["NMT_MUTANTS_RUN"] = str(os.getpid())  # marks its descendants (_leftovers)
    out = os.open(copy.parent / "pytest.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(out, 1)
    os.dup2(out, 2)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    import pytest

    recorder = _Recorder(rank, exclude)
    code = pytest.main([*args, "-q", "-p", "no:cacheprovider", "-n", "0"],  # one process: the
                       plugins=[recorder])  # recorder sees every report (no xdist workers)
    (copy.parent / "pytest.json").write_text(json.dumps(
        {"code": int(code), "failed": recorder.failed, "seconds": recorder.seconds,
         "skipped": recorder.skipped}))
    return int(code)


def _leftovers(run: int) -> list[int]:
    """Processes a run's tests started in a session of their own (`start_new_session`,
    out of its process group) and left running: found by the mark in their environment."""
    mark, found = f"NMT_MUTANTS_RUN={run}".encode(), []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if mark in (proc / "environ").read_bytes().split(b"\0"):
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def run_tests(copy: Path, args: list[str], timeout: float, rank: dict | None = None,
              exclude=()) -> Run:
    """Fork; the child runs pytest with `args` on the scratch copy."""
    report = copy.parent / "pytest.json"
    report.unlink(missing_ok=True)
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        code = 99
        try:
            code = _child(copy, args, rank, exclude)
        except BaseException:  # noqa: BLE001  (anything: the child must not return)
            traceback.print_exc()
        finally:
            os._exit(code)
    leader = pid
    try:
        os.setpgid(pid, pid)  # as the child does: whichever comes first
    except OSError:
        pass
    try:
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                pid, wall = 0, time.monotonic() - start
                seen = json.loads(report.read_text()) if report.is_file() else {}
                failed, seconds = seen.get("failed", []), seen.get("seconds", {})
                passed = os.waitstatus_to_exitcode(status) == 0
                return Run("passed" if passed else "failed", [] if passed else failed, seconds,
                           wall, seen.get("skipped", 0))
            if time.monotonic() - start > timeout:
                return Run("timeout", [], {}, time.monotonic() - start)
            time.sleep(0.02)
    finally:  # done, a timeout, or the parent interrupted: the child's group goes, with
        try:  # anything the tests started and left running
            os.killpg(leader, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if pid:
            os.waitpid(pid, 0)
        for other in _leftovers(leader):
            try:
                os.kill(other, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _swap(copy: Path, m: Mutant):
    """The mutant written into the copy; a context that puts the original back."""
    target = copy / m.path
    original = target.read_text(encoding="utf-8")
    target.write_text(m.source, encoding="utf-8")

    class Restore:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            target.write_text(original, encoding="utf-8")

    return Restore()


def fast_pass(copy: Path, mutants: list[Mutant], timeout: float, killers: dict, log) -> None:
    """Each mutant against its file's fast subset; a baseline run of each subset first."""
    for tests in sorted({tuple(tests_for(m.path)) for m in mutants}):
        base = run_tests(copy, [*tests, "-x", "-W", "ignore"], timeout * 3)
        if base.outcome != "passed":
            raise SystemExit(f"mutants: the unmutated tests fail: {' '.join(tests)}")
        log(f"fast tests, unmutated: {base.wall:.0f} s for {' '.join(tests)}")
    for n, m in enumerate(mutants, 1):
        with _swap(copy, m):
            run = run_tests(copy, [*tests_for(m.path), "-x", "-W", "ignore"], timeout)
        m.fast = {"passed": "survived", "failed": "killed", "timeout": "timeout"}[run.outcome]
        m.by, m.seconds = (run.by if run.outcome == "failed" else ""), round(run.wall, 1)
        if m.fast == "killed":
            _note_kill(killers, m.path, m.by)
        log(f"[{n}/{len(mutants)}] {m.fast.upper():8} {m.id}  {m.old}  ->  {m.new}"
            + (f"  [{m.by}]" if m.by else ""))


def _note_kill(killers: dict, path: str, test: str) -> None:
    files = killers.setdefault(path, {})
    files[test.split("::")[0]] = files.get(test.split("::")[0], 0) + 1


def suite_order(m: Mutant, seconds: dict, killers: dict, texts: dict) -> dict[str, int]:
    """The rank of each test file for the mutant's full-suite run (every file is kept):
    files that killed other mutants of its file (most kills first), then files that name
    its module, then the others, quickest first; last its fast subset, which passed."""
    module = m.path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
    kills, fast = killers.get(m.path, {}), test_files(tests_for(m.path))

    def key(file: str):
        tier = (0 if file in kills else 3 if file in fast else 1 if module in texts.get(
            file, "") else 2)
        return tier, -kills.get(file, 0), seconds[file], file

    return {file: rank for rank, file in enumerate(sorted(seconds, key=key))}


def full_pass(copy: Path, mutants: list[Mutant], killers: dict, log, suite: list[str],
              timeout: float = 0.0, confirm: bool = True) -> dict:
    """The fast pass's survivors, each against the whole suite (or `suite`) with -x.
    Returns the baseline: its seconds and the tests that fail unmutated (deselected)."""
    survivors = [m for m in mutants if m.fast == "survived"]
    if not survivors:
        return {}
    log(f"full suite: baseline run of the unmutated suite ({' '.join(suite) or 'all'}) ...")
    base = run_tests(copy, list(suite), 6 * 3600)
    if base.outcome == "timeout" or not base.seconds:
        raise SystemExit(f"mutants: the unmutated suite did not run ({base.outcome}); see "
                         "`make test`")
    ignore = [f"--ignore={test}" for test in base.failed if "::" not in test]  # collection
    if base.failed:
        log(f"full suite: {len(base.failed)} tests fail unmutated, left out of the full "
            f"pass: {' '.join(base.failed)}")
    limit = timeout or 2 * base.wall + 120
    log(f"full suite: {len(base.seconds)} files, {base.wall:.0f} s unmutated ({base.skipped} "
        "skipped, those that need ../shared among them); "
        f"{len(survivors)} survivors, at most {limit:.0f} s each")
    texts = {f: (copy / f).read_text(encoding="utf-8", errors="replace")
             for f in base.seconds if (copy / f).is_file()}
    for n, m in enumerate(survivors, 1):
        with _swap(copy, m):
            run = run_tests(copy, [*suite, "-x", *ignore], limit,
                            suite_order(m, base.seconds, killers, texts), base.failed)
        m.full, m.full_by, m.full_seconds = run.outcome, "", run.wall
        if run.outcome == "passed":
            m.full = "survived"
        elif run.outcome == "failed":
            m.full, m.full_by = "killed", run.by
            if confirm and run.failed:  # the killer, alone, on the unmutated copy
                again = run_tests(copy, [run.failed[0]], limit)
                m.full_seconds += again.wall
                if again.outcome != "passed":
                    m.full = "unconfirmed"
            if m.full == "killed":
                _note_kill(killers, m.path, m.full_by)
        m.full_seconds = round(m.full_seconds, 1)
        log(f"[full {n}/{len(survivors)}] {m.full.upper():11} {m.id}  {m.old}  ->  {m.new}"
            + (f"  [{m.full_by}]" if m.full_by else "") + f"  {m.full_seconds:.0f} s")
    return {"seconds": round(base.wall, 1), "files": len(base.seconds), "skipped": base.skipped,
            "failing_unmutated": base.failed, "timeout": round(limit)}


def check(mutants: list[Mutant], timeout: float, log=print, full: bool = False,
          suite: list[str] | None = None, full_timeout: float = 0.0, confirm: bool = True,
          baseline: dict | None = None) -> dict[str, list[Mutant]]:
    """Run every mutant's fast tests, with `full` the survivors' whole suite after them.
    Returns the mutants by their last outcome; `baseline` receives the full pass's."""
    copy = scratch_copy()
    killers: dict[str, dict[str, int]] = {}  # mutated file -> test file -> kills
    try:
        fast_pass(copy, mutants, timeout, killers, log)
        if full:
            (baseline if baseline is not None else {}).update(
                full_pass(copy, mutants, killers, log, suite or [], full_timeout, confirm))
    finally:
        shutil.rmtree(copy.parent, ignore_errors=True)
    results: dict[str, list[Mutant]] = {"killed": [], "survived": [], "timeout": []}
    if full:
        results["unconfirmed"] = []
    for m in mutants:
        results[m.outcome].append(m)
    return results


def _rate(items: list[Mutant], attr: str) -> tuple[int, int]:
    caught = sum(getattr(m, attr) in ("killed", "timeout") for m in items)
    return caught, len(items)


def areas(mutants: list[Mutant]) -> dict[str, dict]:
    """Kill rates by area: after the fast pass, and (with --full) after the full one."""
    by: dict[str, list[Mutant]] = {}
    for m in mutants:
        by.setdefault(area_of(m.path), []).append(m)
    order = list(AREAS) + sorted(set(by) - set(AREAS))
    return {label: {"mutants": len(by[label]), "fast_killed": _rate(by[label], "fast")[0],
                    "killed": _rate(by[label], "outcome")[0]} for label in order if label in by}


def summary(results: dict[str, list[Mutant]]) -> str:
    mutants = [m for items in results.values() for m in items]
    total, full = len(mutants), "unconfirmed" in results
    fast = {k: sum(m.fast == k for m in mutants) for k in ("killed", "timeout", "survived")}
    caught = fast["killed"] + fast["timeout"]
    lines = [f"mutants: {total}, killed {fast['killed']}, timeout {fast['timeout']}, survived "
             f"{fast['survived']}; kill rate {caught / max(total, 1):.1%}"
             + (" (fast tests)" if full else "")]
    if full:
        again = [m for m in mutants if m.full]
        n = {k: sum(m.full == k for m in again) for k in
             ("killed", "timeout", "unconfirmed", "survived")}
        after = caught + n["killed"] + n["timeout"]
        lines.append(f"full suite on the {len(again)} survivors: killed {n['killed']}, timeout "
                     f"{n['timeout']}, unconfirmed {n['unconfirmed']}, survived "
                     f"{n['survived']}; kill rate {after / max(total, 1):.1%} after it")
    lines.append("by area:" + ("  fast tests -> after the full suite" if full else ""))
    for label, row in areas(mutants).items():
        n = row["mutants"]
        lines.append(f"  {label:26} {row['fast_killed']:>4}/{n:<4} {row['fast_killed'] / n:5.0%}"
                     + (f"  ->  {row['killed']:>4}/{n:<4} {row['killed'] / n:5.0%}"
                        if full else ""))
    by_file: dict[str, list[int]] = {}
    for m in mutants:
        by_file.setdefault(m.path, [0, 0])[m.outcome in ("survived", "unconfirmed")] += 1
    lines.append("by file:")
    for path, (dead, alive) in sorted(by_file.items()):
        lines.append(f"  {path}: {dead}/{dead + alive} killed")
    for kind in ("unconfirmed", "survived"):
        if results.get(kind):
            lines.append(f"{kind}:")
            lines += [f"  {m.id}  {m.old}  ->  {m.new}" for m in results[kind]]
    return "\n".join(lines)


def record(results: dict[str, list[Mutant]], args, seconds: float, baseline: dict) -> dict:
    """What --json writes: ids by outcome, kill rates by area, every mutant's passes."""
    mutants = [m for items in results.values() for m in items]
    try:
        commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"],
                                capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = ""
    return {"command": " ".join(["scripts/mutants.py", *sys.argv[1:]]), "commit": commit,
            "seconds": round(seconds), "full": args.full, "suite": args.suite or "all",
            "baseline": baseline,
            **{k: [m.id for m in v] for k, v in results.items()},
            "areas": areas(mutants),
            "mutants": [{k: v for k, v in asdict(m).items() if k != "source"}
                        for m in mutants]}


def select(args) -> list[Mutant]:
    if args.named or (args.only and set(args.only) <= set(NAMED)):
        return [named_mutant(name) for name in NAMED if not args.only or name in args.only]
    files = sorted({p for pattern in (args.files or TARGETS) for p in glob.glob(
        pattern, root_dir=ROOT)})
    mutants = [m for f in files for m in mutants_of(f)]
    if args.only:
        wanted = set(args.only)
        mutants = [m for m in mutants if m.id in wanted]
        missing = wanted - {m.id for m in mutants}
        if missing:
            raise SystemExit(f"mutants: unknown ids {sorted(missing)}; see --list")
    if args.sample:
        mutants = sorted(random.Random(args.seed).sample(mutants, min(args.sample, len(mutants))),
                         key=lambda m: (m.path, m.line))
    return mutants[:args.limit] if args.limit else mutants


def main(argv: list[str] | None = None) -> int:
    global ROOT
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", nargs="+", help=f"globs (default: {' '.join(TARGETS)})")
    parser.add_argument("--limit", type=int, default=0, help="only the first N mutants")
    parser.add_argument("--sample", type=int, default=0, help="a random sample of N mutants")
    parser.add_argument("--seed", type=int, default=0, help="seed of --sample")
    parser.add_argument("--only", nargs="+", help="mutant ids (file:line:k) or named ones")
    parser.add_argument("--named", action="store_true", help="the issue's named mutations")
    parser.add_argument("--list", action="store_true", help="print the mutants, run nothing")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per mutant")
    parser.add_argument("--full", action="store_true",
                        help="run the fast pass's survivors against the whole suite too")
    parser.add_argument("--suite", nargs="+", default=[], metavar="TEST",
                        help="with --full: these tests instead of the whole suite (a quick "
                        "look; the full pass's figures need the default)")
    parser.add_argument("--full-timeout", type=float, default=0.0,
                        help="seconds per mutant of the full pass (default: twice the "
                        "unmutated suite's, plus 120)")
    parser.add_argument("--no-confirm", dest="confirm", action="store_false",
                        help="with --full: count a kill without rerunning the killing test "
                        "alone on the unmutated code")
    parser.add_argument("--tests", nargs="+", help="the fast subset of every mutant "
                        "(default: TESTS, by file)")
    parser.add_argument("--root", type=Path, help="the checkout (default: this one)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    if args.root:
        ROOT = args.root.resolve()
    if args.tests:
        TESTS.clear()
        TESTS[""] = args.tests
    os.chdir(ROOT)
    mutants = select(args)
    if args.list:
        for m in mutants:
            print(f"{m.id}  {m.old}  ->  {m.new}")
        print(f"{len(mutants)} mutants")
        return 0
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import numpy  # noqa: F401  (imported once here, shared by every forked child)
    import pytest  # noqa: F401
    import torch
    import yaml  # noqa: F401

    torch.set_num_threads(1)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # still remove the scratch copy
    start, baseline = time.monotonic(), {}
    results = check(mutants, args.timeout, log=lambda s: print(s, flush=True), full=args.full,
                    suite=args.suite, full_timeout=args.full_timeout, confirm=args.confirm,
                    baseline=baseline)
    seconds = time.monotonic() - start
    print(summary(results))
    print(f"{seconds:.0f} s")
    if args.json:
        args.json.write_text(json.dumps(record(results, args, seconds, baseline), indent=1))
    return 1 if args.named and (results["survived"] or results.get("unconfirmed")) else 0


if __name__ == "__main__":
    sys.exit(main())
