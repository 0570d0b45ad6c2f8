import os

import pytest

from slurmqual.atomic import write_text
from slurmqual.hooks import drain_reason
from slurmqual.result import CheckResult, Status
from slurmqual.security import UnsafePath, check_root_only
from slurmqual.slurm import reason


def test_reason_is_one_short_printable_line():
    r = reason.make("nic_link", 'mlx5_0/1: "DOWN"\nrm -rf / \x1b[31m\u00e9' + "x" * 200)
    assert r.startswith("slurmqual: nic_link: mlx5_0/1: DOWN rm -rf / [31m")
    assert len(r) <= 80 and r.isascii() and r.isprintable() and '"' not in r and "\n" not in r
    assert reason.is_ours(r) and not reason.is_ours("admin: RMA") and not reason.is_ours(None)
    assert reason.check_of(r) == "nic_link" and reason.check_of("Prolog error") is None


def test_long_reason_keeps_whole_clauses():
    r = reason.make("nic_link", "mlx5_3/1: state DOWN, phys_state Disabled, ens4np0 link down; mlx5_5/1: 200 Gb/s (expected 400)")
    assert r == "slurmqual: nic_link: mlx5_3/1: state DOWN, phys_state Disabled"
    assert len(reason.make("x", "a" * 200)) == 80 and reason.make("x", "a" * 200).endswith("...")


def test_drain_reason_names_first_failure_and_counts_others():
    failed = [CheckResult("peermem", Status.FAIL, "nvidia_peermem not loaded"),
              CheckResult("dcqcn", Status.FAIL, "off")]
    assert drain_reason(failed) == "slurmqual: peermem: nvidia_peermem not loaded (+1 more: dcqcn)"


def test_atomic_write_replaces_planted_symlink_instead_of_following(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    os.symlink(victim, tmp_path / "state.json")
    write_text(str(tmp_path / "state.json"), "{}")
    assert victim.read_text() == "precious"
    assert not os.path.islink(tmp_path / "state.json") and (tmp_path / "state.json").read_text() == "{}"
    assert [p for p in os.listdir(tmp_path) if p.endswith(".tmp")] == []


@pytest.mark.skipif(os.geteuid() != 0, reason="ownership rules apply when running as root")
def test_world_writable_config_is_refused(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text("")
    os.chmod(tmp_path, 0o755)
    check_root_only(str(cfg), "site config")  # fine
    os.chmod(cfg, 0o666)
    with pytest.raises(UnsafePath, match=r"site config .*config.toml is writable by group/others \(mode 0666\)"):
        check_root_only(str(cfg), "site config")
    os.chmod(cfg, 0o644)
    os.chown(cfg, 1000, 1000)
    with pytest.raises(UnsafePath, match="owned by uid 1000"):
        check_root_only(str(cfg), "site config")
