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


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_a_signal_right_after_the_submission_still_cancels_requalifys_burnin(tmp_path, monkeypatch, sig):
    """The signal lands after sbatch answered and submit() returned, before
    requalify had the job ids (on 22.05 under load: the burn-in kept running in
    the reservation, which then could never be deleted). It is held until
    requalify has them: its cleanup cancels them."""
    import signal

    from slurmqual import requalify as rq_mod
    from slurmqual.burnin.run import runner

    cfg = tmp_path / "sq.toml"
    cfg.write_text(f'[burnin]\nrun_dir = "{tmp_path}/runs"\n[store]\npath = "{tmp_path}/sq.db"\n'
                   f'[hooks]\nstate_dir = "{tmp_path}/state"\n')
    real = runner.submit

    def submit_then_signal(*args, **kw):
        out = real(*args, **kw)
        os.kill(os.getpid(), getattr(signal, sig))  # as the admin's Ctrl-C/kill lands here
        return out

    monkeypatch.setattr(runner, "submit", submit_then_signal)
    adapter = FakeAdapter()
    rq = rq_mod.Requalify(load(str(cfg), use_cache=False), adapter, ["n1"], 2, out=lambda _m: None)
    old = {s: signal.signal(s, rq._cancel) for s in (signal.SIGTERM, signal.SIGINT)}  # as run() sets them
    try:
        with pytest.raises(Cancelled, match=f"cancelled by signal {int(getattr(signal, sig))}"):
            rq._burnin(["n1"], ["n2", "n3"])
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    submitted = [str(101 + i) for i in range(len(adapter.submitted))]
    assert len(submitted) == 2 and rq.jobs == submitted  # the task job and the analysis job: what cleanup cancels
