"""Burn-in drains follow the hooks' ownership rules and name the median that
judged the node (the real-Slurm path is in test_slurm_burnin.py). Analyses
are analyze()'s own output on the fabric model."""

import re

from fleet import Fabric, run
from slurmqual.burnin.judge.analyze import analyze, median_for
from slurmqual.burnin.records import Measurement, Params
from slurmqual.burnin.run.runner import drain_failures
from slurmqual.slurm import SlurmError
from slurmqual.slurm.adapter import NodeInfo
from slurmqual.testing import FakeAdapter

NODES = [f"n{i}" for i in range(1, 17)]
SLOW = ["n1", "n4", "n6", "n9", "n12"]  # each with two healthy partners at least: clear evidence
# (n5 was one of them until e72e31f: n12 then met two slow partners, n5 and n9, and one
# clean partner, and a node is convicted with two distinct clean partners, so it is `retest`)


class RecordingAdapter(FakeAdapter):
    """Slurm refuses to drain n12 (a name it does not know)."""

    def drain(self, nodes, reason):
        if "n12" in nodes:
            raise SlurmError("scontrol: Invalid node name specified")
        super().drain(nodes, reason)


def analysis(slow, tests=("all_reduce",)):
    ms = run(NODES, Fabric(net={n: 0.5 for n in slow}, noise=0.01), seed=1, tests=tests)
    return analyze(ms, params=Params(guard_min=len(slow)))


def test_drains_with_our_reason_and_respects_others():
    a = analysis(SLOW)
    assert a.drain == sorted(SLOW)
    key, median = median_for(a.to_dict(), "n1")
    assert key == "all_reduce:pair" and median == a.median["all_reduce:pair"]
    ours = f"slurmqual: burnin: busbw {a.nodes['n1']['score']:.1f} GB/s < 90% of median {median:.1f}"
    n9 = f"slurmqual: burnin: busbw {a.nodes['n9']['score']:.1f} GB/s < 90% of median {median:.1f}"
    ad = RecordingAdapter.with_nodes([NodeInfo("n1", "idle"), NodeInfo("n4", "idle", ("DRAIN",), "admin: bad fan"),
                           NodeInfo("n6", "idle", ("MAINTENANCE",)), NodeInfo("n9", "idle", ("DRAIN",), n9),
                           NodeInfo("n12", "idle")])
    log = []
    done = drain_failures(ad, a, log=log.append)
    assert ad.drains == [(("n1",), ours)]
    assert len(ours) <= 80
    assert sorted(done) == ["n1", "n9"]  # n9 already carries this verdict's reason
    assert any("n4: already drained by someone else" in m for m in log)
    assert any(m.startswith("n6: failing but idle (MAINTENANCE)") for m in log)
    assert any(m.startswith("n12: could not drain") for m in log)


def test_reason_names_the_test_and_median_that_failed_the_node():
    ms = run(NODES, Fabric(noise=0.01), seed=1, tests=("all_reduce", "alltoall"))
    ms = [Measurement(m.nodes, m.busbw * (0.5 if m.test == "alltoall" and "n7" in m.nodes else 1), m.size, m.test,
                      m.ok, m.gpu_model) for m in ms]
    a = analyze(ms)
    ad = RecordingAdapter.with_nodes([NodeInfo(n, "idle") for n in NODES])
    assert drain_failures(ad, a) == ["n7"]
    (nodes, reason), = ad.drains
    m = re.fullmatch(r"slurmqual: burnin: alltoall pair busbw (\d+\.\d) GB/s < 90% of median (\d+\.\d)", reason)
    assert m and float(m.group(2)) == round(a.median["alltoall:pair"], 1) and len(reason) <= 80


def test_nothing_to_drain_asks_slurm_nothing():
    class Unreachable(RecordingAdapter):
        def node_info(self, hostlist=None):
            raise AssertionError("must not be called")

    assert drain_failures(Unreachable(), analysis([])) == []
