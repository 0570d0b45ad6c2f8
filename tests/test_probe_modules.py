"""probe.modules: /proc/modules in its real line format."""

import pytest

from slurmqual.fsroot import FsError, FsRoot
from slurmqual.probe import modules

REAL = """nvidia_peermem 16384 0 - Live 0xffffffffc0b5e000 (POE)
nvidia_uvm 4648960 0 - Live 0x0000000000000000 (POE)
nvidia 56426496 3 nvidia_peermem,nvidia_uvm,nvidia_modeset, Live 0x0000000000000000 (POE)
ib_uverbs 184320 2 nvidia_peermem,mlx5_ib, Live 0xffffffffc0a1f000
mlx5_core 2330624 1 mlx5_ib, Live 0x0000000000000000
"""


def _fs(tmp_path, text):
    (tmp_path / "proc").mkdir(exist_ok=True)
    (tmp_path / "proc/modules").write_text(text)
    return FsRoot(str(tmp_path))


def test_real_lines(tmp_path):
    assert modules.loaded(_fs(tmp_path, REAL)) == {"nvidia_peermem", "nvidia_uvm", "nvidia", "ib_uverbs", "mlx5_core"}


def test_lsmod_output_is_not_proc_modules(tmp_path, samples):
    text = (samples / "nvidia/lsmod_grep_nvidia_mlx5_with_nvidia_peermem.txt").read_text()
    with pytest.raises(FsError, match="line 1 is not in /proc/modules format"):
        modules.loaded(_fs(tmp_path, text))


def test_empty_file_is_no_modules(tmp_path):
    assert modules.loaded(_fs(tmp_path, "")) == set()
