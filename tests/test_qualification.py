from slurmqual.qualification import FAILED, PENDING, QUALIFIED, STALE, UNKNOWN, NodeFacts, judge, ratio

NOW = 1_000_000.0
DAY = 86400.0


def facts(**kw):
    base = dict(name="n1", slurm_state="idle", burnin_time=NOW - DAY, burnin_verdict="pass", score=180.0, median=181.0)
    base.update(kw)
    return NodeFacts(**base)


def test_passed_recently_is_qualified():
    assert judge(facts(), NOW, 30 * DAY) == QUALIFIED


def test_old_burnin_is_stale():
    assert judge(facts(burnin_time=NOW - 31 * DAY), NOW, 30 * DAY) == STALE


def test_never_burned_in_is_unknown():
    assert judge(facts(burnin_time=None, burnin_verdict=None), NOW, 30 * DAY) == UNKNOWN


def test_drained_by_slurmqual_is_failed_even_after_a_pass():
    f = facts(slurm_flags=["DRAIN"], reason="slurmqual: peermem: nvidia_peermem not loaded")
    assert judge(f, NOW, 30 * DAY) == FAILED


def test_admin_drain_is_not_ours():
    f = facts(slurm_flags=["DRAIN"], reason="admin: RMA")
    assert judge(f, NOW, 30 * DAY) == QUALIFIED


def test_failed_burnin_is_failed():
    assert judge(facts(burnin_verdict="fail"), NOW, 30 * DAY) == FAILED


def test_failing_check_after_burnin_is_failed_but_before_is_not():
    after = facts(failing_checks=["nic_link"], last_check_time=NOW - 10)
    before = facts(failing_checks=["nic_link"], last_check_time=NOW - 2 * DAY)
    assert judge(after, NOW, 30 * DAY) == FAILED
    assert judge(before, NOW, 30 * DAY) == QUALIFIED


def test_requalify_marker_wins():
    f = facts(slurm_flags=["DRAIN"], reason="slurmqual: burnin: slow", requalify_pending=True)
    assert judge(f, NOW, 30 * DAY) == PENDING


def test_ratio():
    assert ratio(90.0, 180.0) == 0.5
    assert ratio(None, 180.0) is None and ratio(90.0, 0.0) is None


def test_down_or_not_responding_node_is_never_qualified():
    from slurmqual.qualification import DOWN

    assert judge(facts(slurm_state="down"), NOW, 30 * DAY) == DOWN
    assert judge(facts(slurm_state="idle", slurm_flags=["NOT_RESPONDING"]), NOW, 30 * DAY) == DOWN
    assert judge(facts(slurm_state="unknown", slurm_flags=["NOT_RESPONDING"]), NOW, 30 * DAY) == DOWN
    # Our own drain still says why it is out.
    f = facts(slurm_state="down", slurm_flags=["DRAIN"], reason="slurmqual: peermem: not loaded")
    assert judge(f, NOW, 30 * DAY) == FAILED
