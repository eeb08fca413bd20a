"""`signals_held`: a stop signal that arrives inside is delivered on leaving, not before."""

import os
import signal
import threading

import pytest

from nmt.core.locks import signals_held


@pytest.fixture
def seen():
    got: list[int] = []
    old = signal.signal(signal.SIGTERM, lambda n, f: got.append(n))
    yield got
    signal.signal(signal.SIGTERM, old)


def test_a_signal_inside_is_delivered_on_leaving(seen):
    with signals_held():
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(1000):  # give the interpreter every chance to run a handler
            pass
        assert seen == []
    assert seen == [signal.SIGTERM]
    os.kill(os.getpid(), signal.SIGTERM)  # the handler is back
    assert seen == [signal.SIGTERM, signal.SIGTERM]


def test_nothing_is_delivered_when_nothing_arrived(seen):
    with signals_held():
        pass
    assert seen == []


def test_an_error_inside_still_delivers_the_signal(seen):
    with pytest.raises(RuntimeError), signals_held():
        os.kill(os.getpid(), signal.SIGTERM)
        raise RuntimeError("cut")
    assert seen == [signal.SIGTERM]


def test_outside_the_main_thread_it_holds_nothing():
    errors = []

    def body():
        try:
            with signals_held():
                pass
        except Exception as exc:  # signal.signal would raise ValueError here
            errors.append(exc)

    t = threading.Thread(target=body)
    t.start()
    t.join()
    assert errors == []
