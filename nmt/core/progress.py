"""Progress a person can watch: a live bar in a terminal, today's plain lines elsewhere.

The arithmetic is pure (`training_budget`, `eta`, `format_duration`); the displays draw
with rich (installed with typer) only when the stream is a terminal, so logs written to a
file, CI or `nohup` keep the plain lines. Decoding and alignment loops report finished
sentences with `tick(n)`; a `counting(...)` block turns those ticks into a bar.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import IO, Any


@dataclass(frozen=True)
class Budget:
    """How far training is along the limit that ends first."""

    fraction: float | None  # 0..1 of that limit; None without any limit
    eta: float | None  # seconds left; None when no rate is known yet
    limit: str  # e.g. "max_steps=800"; "" without any limit


def eta(done: float, total: float, seconds: float) -> float | None:
    """Seconds left at the rate so far: seconds * (total - done) / done (None before any)."""
    if done <= 0 or seconds <= 0:
        return None
    return max(total - done, 0.0) * seconds / done


def training_budget(*, step: int, position: float, elapsed: float, session_steps: int,
                    session_positions: float, session_seconds: float, max_steps: int = 0,
                    max_minutes: float = 0.0, max_epochs: int = 0) -> Budget:
    """ETA against whichever of max_steps, max_minutes, max_epochs ends first.

    `position` is epochs done as a real number (epoch + batch / batches); `elapsed` counts
    earlier sessions too (resume), while rates come from this session only: steps and epoch
    positions gained over `session_seconds` of wall-clock time (validation included).
    A limit of 0 is no limit. The step and epoch limits have an ETA once a rate is known.
    """
    limits = []  # (eta or None, fraction, name)
    if max_steps:
        left = eta(session_steps, session_steps + max_steps - step, session_seconds)
        limits.append((left, step / max_steps, f"max_steps={max_steps}"))
    if max_minutes:
        budget = max_minutes * 60
        limits.append((max(budget - elapsed, 0.0), elapsed / budget, f"max_minutes={max_minutes:g}"))
    if max_epochs:
        left = eta(session_positions, session_positions + max_epochs - position, session_seconds)
        limits.append((left, position / max_epochs, f"max_epochs={max_epochs}"))
    if not limits:
        return Budget(None, None, "")
    known = [lim for lim in limits if lim[0] is not None]
    left, fraction, name = (min(known, key=lambda lim: lim[0]) if known
                            else max(limits, key=lambda lim: lim[1]))
    return Budget(min(max(fraction, 0.0), 1.0), left, name)


def format_duration(seconds: float | None) -> str:
    """"m:ss" or "h:mm:ss"; "--:--" when unknown."""
    if seconds is None:
        return "--:--"
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def is_live(stream: IO[str] | None = None) -> bool:
    """Draw live bars only on a terminal (and never with TERM=dumb or NMT_PROGRESS=plain)."""
    stream = sys.stderr if stream is None else stream
    if os.environ.get("NMT_PROGRESS") == "plain" or os.environ.get("TERM") == "dumb":
        return False
    return bool(getattr(stream, "isatty", lambda: False)())


def _progress(stream: IO[str]) -> Any:
    """A rich bar: description, bar, percentage and our own `info` text, then an optional
    status line under the bars (`progress.status`); rich is imported here, when drawn."""
    from rich.console import Console  # start-up: rich only when a bar is drawn
    from rich.progress import (  # start-up: rich only when a bar is drawn
        BarColumn,
        Progress,
        TaskProgressColumn,
        TextColumn,
    )
    from rich.text import Text  # start-up: rich only when a bar is drawn

    class Bars(Progress):
        status = ""

        def get_renderables(self):  # the bars, then the status line
            yield self.make_tasks_table(self.tasks)
            if self.status:
                yield Text(self.status)

    console = Console(file=stream, force_terminal=True)
    return Bars(TextColumn("[bold]{task.description}"), BarColumn(bar_width=24),
                TaskProgressColumn(), TextColumn("{task.fields[info]}"), console=console,
                refresh_per_second=4)


class TrainDisplay:
    """Training progress: step, epoch, loss, tokens/s, elapsed, ETA, validation BLEU.

    `print` writes a plain line (above the bar when it is live); `update` after every step
    and `validated` after every validation only move the bar, so without a terminal the
    output is exactly the plain lines.
    """

    def __init__(self, max_steps: int = 0, max_minutes: float = 0.0, max_epochs: int = 0,
                 enabled: bool = True, stream: IO[str] | None = None):
        self.limits = dict(max_steps=max_steps, max_minutes=max_minutes, max_epochs=max_epochs)
        self._stream = stream  # None: sys.stderr as it is when a line is printed
        self.live = enabled and is_live(self.stream)
        self.enabled = enabled
        self.bar: Any = None
        self.first: tuple[float, int, float] | None = None  # (time, step, position)
        self.rate = (0.0, 0.0)  # recent tokens and train seconds (exponential average)
        self.bleu = ""

    @property
    def stream(self) -> IO[str]:
        return sys.stderr if self._stream is None else self._stream

    def __enter__(self) -> TrainDisplay:
        if self.live:
            self.bar = _progress(self.stream)
            self.bar.start()
            self.task = self.bar.add_task("train", total=1.0, info="starting")
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None

    def print(self, text: str) -> None:
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.console.print(text, markup=False, highlight=False)
        else:
            print(text, file=self.stream, flush=True)

    def update(self, *, step: int, epoch: int, position: float, loss: float, tokens: int,
               seconds: float, elapsed: float) -> None:
        """After a training step: `tokens` trained on in `seconds` of step time."""
        if self.bar is None:
            return
        now = time.perf_counter()
        if self.first is None:
            self.first = (now, step, position)
        t0, step0, pos0 = self.first
        budget = training_budget(step=step, position=position, elapsed=elapsed,
                                 session_steps=step - step0, session_positions=position - pos0,
                                 session_seconds=now - t0, **self.limits)
        toks, secs = self.rate
        self.rate = (0.9 * toks + tokens, 0.9 * secs + seconds)
        tok_s = self.rate[0] / max(self.rate[1], 1e-9)
        until = f" ({budget.limit})" if budget.limit else ""
        info = f"elapsed {format_duration(elapsed)} · ETA {format_duration(budget.eta)}{until}"
        self.bar.status = (f"step {step} · epoch {epoch} · loss {loss:.3f} · "
                           f"{tok_s:,.0f} tgt tok/s{self.bleu}")
        self.bar.update(self.task, completed=budget.fraction or 0.0, info=info,
                        total=1.0 if budget.fraction is not None else None)

    def validated(self, bleu: float, best: float) -> None:
        self.bleu = f" · BLEU {bleu:.2f} (best {best:.2f})"


# ------------------------------------------------------------------ sentences done + ETA

_counter: ContextVar[Any] = ContextVar("nmt_progress_counter", default=None)


def tick(n: int = 1) -> None:
    """Report `n` more sentences done to the enclosing `counting` block (if any)."""
    bar = _counter.get()
    if bar is not None:
        bar.advance(n)


class _Count:
    def __init__(self, progress: Any, total: int, label: str):
        self.progress, self.start = progress, time.perf_counter()
        self.task = progress.add_task(label, total=total, info="")
        self.total, self.done = total, 0

    def advance(self, n: int) -> None:
        self.done += n
        left = eta(self.done, self.total, time.perf_counter() - self.start)
        info = f"{self.done}/{self.total} sentences · ETA {format_duration(left)}"
        self.progress.update(self.task, completed=self.done, info=info)


@contextmanager
def counting(total: int, label: str, stream: IO[str] | None = None) -> Iterator[None]:
    """A bar of sentences done and ETA while the block runs, fed by `tick`; nothing at all
    when the stream is not a terminal (no plain lines were printed here before)."""
    stream = sys.stderr if stream is None else stream
    if not is_live(stream) or total <= 0:
        yield
        return
    progress = _progress(stream)
    token = _counter.set(_Count(progress, total, label))
    progress.start()
    try:
        yield
    finally:
        progress.stop()
        _counter.reset(token)


@contextmanager
def rate(label: str, unit: str, stream: IO[str] | None = None) -> Iterator[Callable[[int], None]]:
    """A live count of `unit`s done and their rate per second while the block runs, fed by
    the function it yields (an import's pairs, whose total is unknown while streaming);
    nothing at all when the stream is not a terminal."""
    stream = sys.stderr if stream is None else stream
    if not is_live(stream):
        yield lambda n: None
        return
    progress = _progress(stream)
    task = progress.add_task(label, total=None, info="")
    start, done = time.perf_counter(), 0

    def advance(n: int) -> None:
        nonlocal done
        done += n
        speed = done / max(time.perf_counter() - start, 1e-9)
        progress.update(task, completed=done, info=f"{done:,} {unit} · {speed:,.0f} {unit}/s")

    progress.start()
    try:
        yield advance
    finally:
        progress.stop()
