"""nmt.core.progress: the ETA arithmetic, and plain lines whenever the output is not a terminal."""

from __future__ import annotations

import io

import pytest

from nmt.core.progress import (
    Budget,
    TrainDisplay,
    counting,
    eta,
    format_duration,
    tick,
    training_budget,
)


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def _terminal_env(monkeypatch):
    monkeypatch.delenv("NMT_PROGRESS", raising=False)
    monkeypatch.setenv("TERM", "xterm")


def budget(**kwargs) -> Budget:
    base = dict(step=100, position=0.5, elapsed=50.0, session_steps=100, session_positions=0.5,
                session_seconds=50.0)
    return training_budget(**{**base, **kwargs})


def test_eta_is_linear_in_the_rate_so_far():
    assert eta(10, 100, 5.0) == pytest.approx(45.0)
    assert eta(100, 100, 5.0) == 0.0
    assert eta(0, 100, 5.0) is None and eta(5, 100, 0.0) is None


def test_steps_limit():
    b = budget(max_steps=300)  # 100 steps in 50 s: 200 more take 100 s
    assert (b.eta, b.fraction, b.limit) == (pytest.approx(100.0), pytest.approx(1 / 3),
                                            "max_steps=300")


def test_the_limit_that_ends_first_wins():
    b = budget(max_steps=300, max_minutes=2, max_epochs=10)  # steps 100 s, minutes 70 s, epochs 950 s
    assert (b.eta, b.limit) == (pytest.approx(70.0), "max_minutes=2")
    assert b.fraction == pytest.approx(50 / 120)
    b = budget(max_steps=300, max_minutes=2, max_epochs=1)  # epochs: 0.5 more in 50 s
    assert (b.eta, b.limit, b.fraction) == (pytest.approx(50.0), "max_epochs=1", 0.5)


def test_the_epoch_limit_counts_epochs_done_as_a_fraction():
    b = budget(position=0.5, max_epochs=2)  # half an epoch of two: a quarter done
    assert (b.limit, b.fraction) == ("max_epochs=2", pytest.approx(0.25))
    assert b.eta == pytest.approx(150.0)  # 1.5 epochs left at 0.5 an epoch in 50 s


def test_resumed_run_uses_this_sessions_rate():
    # 250 steps done, of which 50 in this session's 25 s; elapsed counts earlier sessions
    b = budget(step=250, session_steps=50, session_seconds=25.0, elapsed=400.0, max_steps=300)
    assert (b.eta, b.fraction) == (pytest.approx(25.0), pytest.approx(250 / 300))


def test_before_any_rate_and_without_limits():
    b = budget(session_steps=0, session_positions=0.0, max_steps=300)
    assert (b.eta, b.fraction, b.limit) == (None, pytest.approx(1 / 3), "max_steps=300")
    assert budget() == Budget(None, None, "")
    assert budget(elapsed=500.0, max_minutes=2).eta == 0.0  # over budget: nothing left


def test_format_duration():
    assert [format_duration(s) for s in (0, 75, 3725, None)] == ["0:00", "1:15", "1:02:05",
                                                                 "--:--"]


def run_display(stream) -> None:
    with TrainDisplay(max_steps=10, stream=stream) as display:
        display.print("step      5 | loss 2.000")
        for step in range(1, 4):
            display.update(step=step, epoch=0, position=step / 20, loss=2.5, tokens=1000,
                           seconds=0.1, elapsed=float(step))
        display.validated(12.5, 12.5)
        display.update(step=4, epoch=0, position=0.2, loss=2.4, tokens=1000, seconds=0.1,
                       elapsed=4.0)


def test_not_a_terminal_keeps_plain_lines():
    out = io.StringIO()
    run_display(out)
    assert out.getvalue() == "step      5 | loss 2.000\n"
    with counting(5, "decoding", stream=out):
        tick(5)
    assert out.getvalue() == "step      5 | loss 2.000\n"


def test_plain_when_asked_even_on_a_terminal(monkeypatch):
    monkeypatch.setenv("NMT_PROGRESS", "plain")
    out = Terminal()
    run_display(out)
    assert out.getvalue() == "step      5 | loss 2.000\n"


def test_terminal_shows_a_bar_with_eta_and_bleu():
    out = Terminal()
    run_display(out)
    text = out.getvalue()
    assert "step      5 | loss 2.000" in text
    assert "step 4 · epoch 0 · loss 2.400" in text and "ETA 0:" in text
    assert "(max_steps=10)" in text and "BLEU 12.50" in text and "tok/s" in text


def test_the_bar_runs_from_0_to_100_percent_of_the_limit():
    """4 of max_steps=10 done: the bar's task is at 0.4 of a total of 1, drawn as 40%."""
    out = Terminal()
    with TrainDisplay(max_steps=10, stream=out) as display:
        display.update(step=4, epoch=0, position=0.2, loss=2.4, tokens=1000, seconds=0.1,
                       elapsed=4.0)
        (task,) = display.bar.tasks
        assert (task.total, task.completed) == (1.0, pytest.approx(0.4))
        display.bar.refresh()
    assert "40%" in out.getvalue()


def test_terminal_counts_sentences():
    out = Terminal()
    with counting(4, "decoding test", stream=out):
        tick(1)
        tick(3)
    tick(2)  # outside any block: nothing happens
    assert "4/4 sentences" in out.getvalue() and "decoding test" in out.getvalue()
