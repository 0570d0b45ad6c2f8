import os

import pytest

from slurmqual.fsroot import FsError, FsRoot


def test_relative_and_absolute_symlinks_stay_inside_root(tmp_path):
    (tmp_path / "sys/devices/pci0000:00/0000:00:01.0").mkdir(parents=True)
    (tmp_path / "sys/devices/pci0000:00/0000:00:01.0/vendor").write_text("0x10de\n")
    (tmp_path / "sys/class").mkdir()
    os.symlink("../devices/pci0000:00/0000:00:01.0", tmp_path / "sys/class/rel")
    os.symlink("/sys/devices/pci0000:00/0000:00:01.0", tmp_path / "sys/class/abs")
    os.symlink("../../../../../../../../etc", tmp_path / "sys/class/escape")
    fs = FsRoot(str(tmp_path))
    assert fs.read("/sys/class/rel/vendor") == "0x10de"
    assert fs.read("/sys/class/abs/vendor") == "0x10de"  # absolute link re-rooted, not the host's /sys
    assert fs.realpath("/sys/class/escape") == "/etc"     # clamped at the root
    assert fs.host_path("/sys/class/escape").startswith(str(tmp_path))


def test_symlink_loop_and_errors(tmp_path):
    os.symlink("b", tmp_path / "a")
    os.symlink("a", tmp_path / "b")
    fs = FsRoot(str(tmp_path))
    with pytest.raises(FsError, match="too many levels"):
        fs.read("/a")
    with pytest.raises(FsError, match="missing"):
        fs.read("/nope")
    (tmp_path / "n").write_text("x1\n")
    with pytest.raises(FsError, match="expected an integer"):
        fs.read_int("/n")
    assert fs.listdir("/nowhere") == [] and fs.read_or("/nope", "d") == "d"


def test_bad_input_reasons_name_the_node_path(tmp_path):
    (tmp_path / "sys/class/net").mkdir(parents=True)
    os.symlink("../../devices/gone/net/eth9", tmp_path / "sys/class/net/eth9")
    (tmp_path / "proc/modules").mkdir(parents=True)
    (tmp_path / "file").write_text("x\n")
    fs = FsRoot(str(tmp_path))
    with pytest.raises(FsError) as err:
        fs.read("/sys/class/net/eth9/speed")
    assert err.value.path == "/sys/class/net/eth9/speed" and err.value.reason == "missing"
    assert not fs.isdir("/sys/class/net/eth9") and not fs.exists("/sys/class/net/eth9")
    assert fs.realpath("/sys/class/net/eth9") == "/sys/devices/gone/net/eth9"
    with pytest.raises(FsError, match="is a directory, expected a file"):
        fs.read("/proc/modules")
    with pytest.raises(FsError, match="not a directory"):
        fs.listdir("/file")
    assert fs.read("/file") == "x"


def test_live_root_is_identity():
    fs = FsRoot("/")
    assert fs.host_path("/etc/nonexistent-x") == "/etc/nonexistent-x" and fs.resolve("/a/../b") == "/b"
