"""dcqcn at standard level: mlxconfig's firmware setting, real output, hung and missing tool."""

import os
import time

from nodes import check, config, tree
from slurmqual.checks.dcqcn import parse_mlxconfig
from slurmqual.result import Status

SAMPLE = "mlx/mlxconfig_query_CX4Lx_dual_port_ROCE_CC_PRIO_MASK_P1_P2_DCQCN_full.txt"


def _stub(tmp_path, body: str) -> str:
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    stub = bindir / "mlxconfig"
    stub.write_text("#!/bin/sh\n" + body + "\n")
    stub.chmod(0o755)
    return str(bindir)


def test_parse_real_mlxconfig_sample(samples):
    assert parse_mlxconfig((samples / SAMPLE).read_text()) == {"ROCE_CC_PRIO_MASK_P1": 255, "ROCE_CC_PRIO_MASK_P2": 255}


def test_firmware_mask_from_real_output_passes(tmp_path, samples, monkeypatch):
    bindir = _stub(tmp_path, f"cat '{samples / SAMPLE}'")
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    r = check(tree(tmp_path), "dcqcn", level="standard")
    assert r.status is Status.PASS, r


def test_firmware_mask_lost_after_reimage_fails(tmp_path, samples, monkeypatch):
    text = (samples / SAMPLE).read_text().replace("ROCE_CC_PRIO_MASK_P1                        255",
                                                  "ROCE_CC_PRIO_MASK_P1                        0")
    (tmp_path / "out.txt").write_text(text)
    monkeypatch.setenv("PATH", f"{_stub(tmp_path, 'cat ' + str(tmp_path / 'out.txt'))}:{os.environ['PATH']}")
    r = check(tree(tmp_path), "dcqcn", level="standard")
    assert r.status is Status.FAIL and "ROCE_CC_PRIO_MASK_P1=0 (expected 255)" in r.message


def test_hung_mlxconfig_is_error_within_timeout(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{_stub(tmp_path, 'sleep 60')}:{os.environ['PATH']}")
    from slurmqual.checks import REGISTRY, Context, run_one
    from slurmqual.fsroot import FsRoot

    ctx = Context(FsRoot(tree(tmp_path)), config(), level="standard", command_timeout=0.5)
    start = time.monotonic()
    r = run_one(REGISTRY["dcqcn"], ctx)
    assert time.monotonic() - start < 5
    assert r.status is Status.ERROR and "timed out" in r.message


def test_missing_mlxconfig_checks_sysfs_only(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    r = check(tree(tmp_path), "dcqcn", level="standard")
    assert r.status is Status.PASS and "mlxconfig not installed" in r.message


def test_fast_level_never_runs_mlxconfig(tmp_path, monkeypatch):
    marker = tmp_path / "ran"
    monkeypatch.setenv("PATH", f"{_stub(tmp_path, f'touch {marker}; exit 1')}:{os.environ['PATH']}")
    assert check(tree(tmp_path), "dcqcn", level="fast").status is Status.PASS
    assert not marker.exists()
