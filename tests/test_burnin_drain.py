"""Burn-in drains follow the hooks' ownership rules (the real-Slurm path is in test_slurm_burnin.py)."""

from slurmqual.burnin.analyze import Analysis
from slurmqual.burnin.runner import drain_failures
from slurmqual.slurm import SlurmError
from slurmqual.slurm.adapter import NodeInfo, SlurmAdapter


class RecordingAdapter(SlurmAdapter):
    """Holds node states in memory and records drains: only the interface's two calls used here."""

    def __init__(self, nodes):
        self.nodes, self.drains = {n.name: n for n in nodes}, []

    def node_info(self, hostlist=None):
        return list(self.nodes.values())

    def drain(self, nodes, reason):
        if "n5" in nodes:
            raise SlurmError("scontrol: Invalid node name specified")
        self.drains.append((tuple(nodes), reason))


def analysis(fail):
    nodes = {n: {"verdict": "fail" if n in fail else "pass", "score": 200.0 if n in fail else 380.0}
             for n in ("n1", "n2", "n3", "n4", "n5")}
    return Analysis({"all_reduce:pair": 380.0, "all_reduce:intra": 456.0}, 0.9, nodes, [], list(fail), False)


def test_drains_with_our_reason_and_respects_others():
    ours = "slurmqual: burnin: busbw 200.0 GB/s < 90% of median 380.0"
    ad = RecordingAdapter([NodeInfo("n1", "idle"), NodeInfo("n2", "idle", ("DRAIN",), "admin: bad fan"),
                           NodeInfo("n3", "idle", ("MAINTENANCE",)), NodeInfo("n4", "idle", ("DRAIN",), ours),
                           NodeInfo("n5", "idle")])
    log = []
    done = drain_failures(ad, analysis(["n1", "n2", "n3", "n4", "n5"]), log=log.append)
    assert ad.drains == [(("n1",), ours)]
    assert len(ours) <= 80
    assert done == ["n1", "n4"]  # n4 already carries this verdict's reason
    assert any("n2: already drained by someone else" in m for m in log)
    assert any(m.startswith("n3: failing but idle (MAINTENANCE)") for m in log)
    assert any(m.startswith("n5: could not drain") for m in log)


def test_nothing_to_drain_asks_slurm_nothing():
    class Unreachable(RecordingAdapter):
        def node_info(self, hostlist=None):
            raise AssertionError("must not be called")

    assert drain_failures(Unreachable([]), analysis([])) == []
