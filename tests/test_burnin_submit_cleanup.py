"""burnin.run.runner.submit cleans up whatever interrupts it, not only Ctrl-C and
SIGTERM: requalify's own cancel (its signal handler raises its own exception)
must not leave task jobs running that no analysis will ever read."""

from __future__ import annotations

import json
import os

import pytest

from slurmqual.burnin.run.runner import submit
from slurmqual.config import load
from slurmqual.requalify import Cancelled
from slurmqual.testing import FakeAdapter


class Interrupted(FakeAdapter):
    """Submits the first job, then the caller's cancel lands during the second sbatch."""

    def __init__(self, exc: BaseException):
        super().__init__()
        self.exc = exc

    def submit(self, argv, script=None):
        if self.submitted:
            raise self.exc
        return super().submit(argv, script)


@pytest.mark.parametrize("exc", [Cancelled("cancelled by signal 1"), KeyboardInterrupt("signal 15")],
                         ids=["requalify-cancel", "sigterm"])
def test_any_interruption_cancels_what_was_submitted(tmp_path, exc):
    cfg = tmp_path / "sq.toml"
    cfg.write_text(f'[burnin]\nrun_dir = "{tmp_path}/runs"\ngroup_size = 2\n[store]\npath = "{tmp_path}/sq.db"\n')
    adapter = Interrupted(exc)
    with pytest.raises(type(exc)):
        submit(load(str(cfg), use_cache=False), adapter, ["n1", "n2", "n3", "n4"], None, None)
    assert adapter.cancelled == ["101"] and adapter.cancelled_names and adapter.cancelled_names[0].startswith("slurmqual-burnin-")
    (run,) = os.listdir(tmp_path / "runs")
    jobs = json.loads((tmp_path / "runs" / run / "jobs.json").read_text())
    assert jobs == {"tasks": {"0": "101"}, "analysis": None, "cancelled": True}
