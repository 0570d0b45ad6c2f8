"""probe.nvidia: driver version from /proc/driver/nvidia/version in its real formats."""

import pytest

from slurmqual.fsroot import FsError, FsRoot
from slurmqual.probe import nvidia

# First lines as the proprietary and the open kernel module print them.
REAL = [
    ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.216.03  Thu Apr  3 01:14:19 UTC 2025", "535.216.03", False),
    ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  555.58.02  Release Build  "
     "(dvs-builder@U16-I3-B03-4-3)  Tue Jun 25 01:26:03 UTC 2024", "555.58.02", True),
    ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.142  Release Build  "
     "(dvs-builder@U22-I3-AD05-51-5)  Tue Mar  3 19:14:46 UTC 2026", "580.142", True),
    ("NVRM version: NVIDIA UNIX Kernel Module for aarch64  550.127.05  Release Build  "
     "(dvs-builder@U16-I3-D08-1-2)  Mon Oct 14 17:39:42 UTC 2024", "550.127.05", False),
]


def _fs(tmp_path, text):
    (tmp_path / "proc/driver/nvidia").mkdir(parents=True, exist_ok=True)
    (tmp_path / "proc/driver/nvidia/version").write_text(text + "\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n")
    return FsRoot(str(tmp_path))


@pytest.mark.parametrize("line,version,open_module", REAL)
def test_real_version_lines(tmp_path, line, version, open_module):
    assert nvidia.driver(_fs(tmp_path, line)) == nvidia.Driver(version, open_module)


def test_garbage_and_empty_are_errors_naming_the_file(tmp_path):
    with pytest.raises(FsError) as err:
        nvidia.driver(_fs(tmp_path, "NVRM: something else"))
    assert err.value.path == "/proc/driver/nvidia/version" and "no driver version" in err.value.reason
    (tmp_path / "proc/driver/nvidia/version").write_text("")
    with pytest.raises(FsError, match="empty file"):
        nvidia.driver(FsRoot(str(tmp_path)))


def test_kernel_release(tmp_path):
    (tmp_path / "proc/sys/kernel").mkdir(parents=True)
    (tmp_path / "proc/sys/kernel/osrelease").write_text("6.1.0-18-amd64\n")
    assert nvidia.kernel_release(FsRoot(str(tmp_path))) == "6.1.0-18-amd64"
