"""Hostile nccl-tests outputs for the parser (slurmqual/burnin/read/parse.py):
over-long lines that could make a pattern backtrack, control bytes, non-UTF-8,
and files that block. Each must be a bounded "not a valid run" (a test error,
never a measurement), not a hang or a crash."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from slurmqual.burnin.read.parse import parse, parse_file

ROW = "  8589934592    2147483648     float     sum      -1   24523.1  350.28  656.78      0   24519.3  350.34  656.89      0"


@pytest.mark.parametrize("name,text", [
    ("1MB comment line", "#" + " " * (1 << 20) + "Rank 0"),
    ("1MB rank line", "#  Rank  0 " + "Group  0 " * 100000),
    ("1MB avg line", "# Avg bus bandwidth    : " + "9" * (1 << 20)),
    ("1MB row", ROW + "  1" * 300000),
    ("row of 1M columns", " ".join(["1"] * 500000)),
    ("NUL and escapes", ROW.replace("float", "fl\x00oat\x1b[2K")),
    ("replacement chars", "\ufffd" * 200000),
    ("a million empty lines", "\n" * 1000000),
])
def test_hostile_text_is_not_a_valid_run(name, text):
    result = parse(text)
    assert not result.ok and result.problems


def test_non_utf8_log_file_is_read_and_judged_not_ok(tmp_path):
    f = tmp_path / "out.log"
    f.write_bytes(b"# nccl-tests\n" + ROW.encode() + b"\xff\xfe\x00\n")
    assert not parse_file(str(f)).ok


def _parse_in_child(path: str, timeout: float = 20) -> subprocess.CompletedProcess:
    code = ("import sys\nfrom slurmqual.burnin.read.parse import parse_file\n"
            "try:\n    r = parse_file(sys.argv[1])\nexcept OSError as e:\n    print('error:', e.strerror or e); sys.exit(2)\n"
            "print('ok' if r.ok else 'not ok')\n")
    return subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True, timeout=timeout)


def test_dev_zero_log_is_bounded():
    p = _parse_in_child("/dev/zero", timeout=60)
    assert p.returncode in (0, 2) and ("not ok" in p.stdout or "error" in p.stdout), p.stderr


def test_fifo_log_is_a_clear_error_not_a_hang(tmp_path):
    fifo = tmp_path / "out.log"
    os.mkfifo(fifo)
    p = _parse_in_child(str(fifo), timeout=10)
    assert p.returncode == 2 and "FIFO" in p.stdout
