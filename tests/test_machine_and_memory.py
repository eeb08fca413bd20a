"""Tests for the small facts every figure carries: the machine it was measured on
(nmt/core/machine.py), the memory it took (nmt/core/memory.py), and the one-line form of
a library's error inside ours (nmt/core/errors.py)."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest

from nmt.core.errors import one_line
from nmt.core.machine import cpu_fields, cpu_model
from nmt.core.memory import peak_rss_mib, rss_mib

CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 9R14 96-Core Processor
flags\t\t: fpu sse2 avx512f avx512_bf16
address sizes\t: 48 bits physical, 48 bits virtual

processor\t: 1
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8488C
flags\t\t: fpu amx_bf16
"""


def test_cpu_fields_are_the_first_cpus_split_at_the_first_colon(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text(CPUINFO)
    fields = cpu_fields(info)
    assert fields["model name"] == "AMD EPYC 9R14 96-Core Processor"  # the first CPU's
    assert fields["flags"] == "fpu sse2 avx512f avx512_bf16"
    assert fields["vendor_id"] == "AuthenticAMD" and fields["processor"] == "0"
    assert fields["address sizes"] == "48 bits physical, 48 bits virtual"
    assert cpu_model(info) == "AMD EPYC 9R14 96-Core Processor"


def test_cpu_model_falls_back_to_the_platform_where_cpuinfo_says_nothing(tmp_path):
    missing, bare = tmp_path / "none", tmp_path / "bare"
    bare.write_text("processor\t: 0\nflags\t: fpu\n")
    assert cpu_fields(missing) == {}
    expected = platform.processor() or platform.machine()
    assert cpu_model(missing) == expected and cpu_model(bare) == expected
    assert cpu_fields(tmp_path) == {}  # a folder: unreadable, no error
    (tmp_path / "binary").write_bytes(b"model name : \xff\xfe\n")
    assert cpu_fields(tmp_path / "binary") == {}


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="Linux's /proc")
def test_rss_and_peak_are_in_mib_as_the_kernel_counts_them():
    """rss_mib and peak_rss_mib against /proc/self/status's VmRSS and VmHWM (KiB), read
    after them: the same MiB within a few (the interpreter allocates between the reads)."""
    now, peak = rss_mib(), peak_rss_mib()
    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines()
                  if ":" in line)
    vm_rss, vm_hwm = (int(status[k].split()[0]) / 1024 for k in ("VmRSS", "VmHWM"))
    assert now is not None and peak is not None
    assert abs(now - vm_rss) < 8, (now, vm_rss)
    assert abs(peak - vm_hwm) < 8, (peak, vm_hwm)
    assert peak >= now - 8 and now > 10  # torch and numpy are loaded: tens of MiB at least


def test_one_line_is_the_messages_first_line_cut_or_the_type():
    assert one_line(ValueError("bad shape\nTraceback detail")) == "bad shape"
    assert one_line(ValueError("x" * 300)) == "x" * 120
    assert one_line(ValueError("abcdef"), limit=3) == "abc"
    assert one_line(KeyError()) == "KeyError" and one_line(OSError("  \n ")) == "OSError"
    assert one_line(RuntimeError("\n  second\nthird")) == "second"  # the first with text


@pytest.mark.parametrize("system, expected", [("linux", 3 * 2**10), ("darwin", 3)])
def test_the_peak_reads_getrusage_in_each_systems_unit(monkeypatch, system, expected):
    """getrusage's ru_maxrss counts KiB on Linux and bytes on macOS: the same number,
    3 x 2^20, is 3,072 MiB on Linux and 3 MiB on macOS; no resource module, no peak."""
    import types

    import nmt.core.memory as memory

    usage = types.SimpleNamespace(ru_maxrss=3 * 2**20)
    fake = types.SimpleNamespace(RUSAGE_SELF=0, getrusage=lambda who: usage)
    monkeypatch.setattr(memory, "resource", fake)
    monkeypatch.setattr(memory.sys, "platform", system)
    assert memory.peak_rss_mib() == expected
    monkeypatch.setattr(memory, "resource", None)
    assert memory.peak_rss_mib() is None
