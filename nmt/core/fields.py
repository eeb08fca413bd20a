"""How a config field declares its limits, and the YAML loader configs are read with
(nmt.core.config builds the dataclasses from both; docs/configuration.md)."""

from __future__ import annotations

import math
import re
from dataclasses import MISSING, Field, field
from typing import Any

import yaml

# Each field declares its own limits: every number a range (`positive`, `non_negative`,
# `fraction`, `between`, `all_or_count`, `integer`), every name `one_of` a literal list or
# `registered` in a registry that the models define (the one list of names). A range is
# finite: inf and NaN are refused everywhere (docs/configuration.md).
INT_LIMIT = 2**63  # integers are 64-bit, as torch and numpy hold them


def _finite(test: Any) -> Any:
    return lambda v: math.isfinite(v) and test(v)


CHECKS = {"positive": _finite(lambda v: v > 0), "zero or positive": _finite(lambda v: v >= 0),
          "in [0, 1)": _finite(lambda v: 0 <= v < 1),
          "-1 (all) or at least 1": _finite(lambda v: v == -1 or v >= 1)}


def _check(name: str, test: Any) -> dict:
    CHECKS.setdefault(name, _finite(test))
    return {"check": name}


def positive(default: float) -> Any:
    return field(default=default, metadata={"check": "positive"})


def non_negative(default: float) -> Any:
    return field(default=default, metadata={"check": "zero or positive"})


def fraction(default: float) -> Any:
    return field(default=default, metadata={"check": "in [0, 1)"})


def between(default: float, low: float, high: float, above: bool = False) -> Any:
    """In [low, high], or in (low, high] with `above` (low itself excluded)."""
    name = f"in {'(' if above else '['}{low}, {high}]"
    return field(default=default, metadata=_check(
        name, (lambda v: low < v <= high) if above else (lambda v: low <= v <= high)))


def all_or_count(default: int) -> Any:
    return field(default=default, metadata={"check": "-1 (all) or at least 1"})


def integer(default: int, check: str = "any 64-bit integer") -> Any:
    """Any integer the type holds (`_coerce` refuses the rest); `check` names a range that
    other keys set, checked with them (nmt.models.checks)."""
    return field(default=default, metadata=_check(check, lambda v: True))


def one_of(default: str, *others: str) -> Any:
    return field(default=default, metadata={"choices": (default, *others)})


def registered(default: str, registry: str) -> Any:
    return field(default=default, metadata={"registry": registry})


# Each field also declares, once, what a change to it does on `--resume`
# (nmt.core.checkpoint.check_resumable; docs/configuration.md, "What a resume refuses"):
# `fixed`: it changes what the run reads or how (its corpus and splits, vocabulary and
# segmentation, model, batches, teacher, the validation that picks its best checkpoint),
# so the run would no longer continue the one it is, and a resume refuses it; `free`: it
# changes where the run is, how long it goes on, what it logs or the device's work
# (budgets, logging, threads, precision, search options), so a resume takes it.
FIXED, FREE = "fixed", "free"


def fixed(spec: Any = MISSING) -> Any:
    """A field (a default value, or a limit's field: `fixed(positive(100))`) that a
    resume refuses to change."""
    return _on_resume(spec, FIXED)


def free(spec: Any = MISSING) -> Any:
    """A field that a resume may change."""
    return _on_resume(spec, FREE)


def _on_resume(spec: Any, kind: str) -> Any:
    if isinstance(spec, Field):
        return field(default=spec.default, default_factory=spec.default_factory,
                     metadata={**spec.metadata, "resume": kind})
    return field(default=spec, metadata={"resume": kind})


class Loader(yaml.SafeLoader):
    """SafeLoader that reads `5e-4` as a float (YAML 1.2), not as the string '5e-4', and
    refuses a key written twice in one mapping (YAML forbids it; PyYAML would keep the
    last, so a second `train:` block would drop the first one's keys unseen)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[Any, yaml.Node] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *base` may be overridden
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.setdefault(key, key_node)
            except TypeError:  # an unhashable key: SafeLoader names it below
                continue
            if first is not key_node:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} written twice (first on line "
                    f"{first.start_mark.line + 1}); keep one", key_node.start_mark)
        return super().construct_mapping(node, deep)


Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."))
