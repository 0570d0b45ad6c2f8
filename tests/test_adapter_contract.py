"""The CLI and slurmrestd adapters (JWT over TCP and a unix socket, and
rest_auth/local over a unix socket with no token), and on Slurm 25.11 the
pyslurm adapter, pass one contract against real Slurm daemons of each
version of the matrix (tests/conftest.py): node
states and reasons, array task tracking, submission with node lists, drain/
resume and reservations (over REST where that server can, else a clear
"needs scontrol"), and creations that a slow sbatch/scontrol cannot double."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from slurm_fixtures import start_cluster, start_rest_local, stop_cluster
from slurmcluster import WAIT_SCALE
from slurmqual.slurm import SlurmError
from slurmqual.slurm.cli import CliAdapter
from slurmqual.slurm.pyslurm_adapter import PyslurmAdapter
from slurmqual.slurm.rest.adapter import RestAdapter

pytestmark = pytest.mark.slurm


def _slurm_bin(cluster) -> str:
    """The cluster's own Slurm tools (the chroot's for chroot versions)."""
    return getattr(cluster, "bin_dir", None) or os.path.join(cluster.base, "slurm-bin")


def _start_rest_local(cluster) -> str:
    """slurmrestd with rest_auth/local on a unix socket: no token; the socket's
    peer is the identity. slurmrestd refuses to run as root or SlurmUser (root
    here) and newer ones as nobody, so it runs as munge (present with every
    Slurm); a root client then acts as that unprivileged user."""
    return start_rest_local(cluster)


@pytest.fixture(scope="module")
def cluster(request):
    if not os.path.exists("/usr/sbin/slurmrestd"):
        pytest.skip("slurmrestd not installed (apt-get install slurmrestd slurm-wlm-jwt-plugin)")
    c = start_cluster("rest", 3, jwt=True)
    try:
        c.rest_url = c.start_rest()
        c.rest_unix = c.start_rest(unix=True)
        c.rest_local = _start_rest_local(c)
    except BaseException:
        stop_cluster(c)
        raise
    yield c
    stop_cluster(c)


def cli(cluster, **kw) -> CliAdapter:
    return CliAdapter(kw.pop("bin_dir", _slurm_bin(cluster)), timeout=kw.pop("timeout", 15), retries=2,
                      slurm_conf=cluster.conf)


ADMIN_TESTS = {"test_drain_and_resume", "test_reservations_where_the_server_can"}


def pyslurm_adapter(cluster) -> PyslurmAdapter:
    """pyslurm, built against Slurm 25.11 (tests/slurmbuild.py) and installed
    into this venv, talking to `cluster`; its missing calls (reboot) go to the CLI."""
    return PyslurmAdapter(cluster.conf, retries=2, cli=cli(cluster))


def pyslurm_serves(request, cluster) -> None:
    """Skip unless pyslurm is installed and its libslurm is this cluster's release."""
    request.getfixturevalue("pyslurm_installed")
    if not cluster.slurm_version.startswith("25.11."):
        pytest.skip(f"pyslurm 25.11 serves Slurm 25.11 only (this cluster: {cluster.slurm_version}); "
                    "test_auto_picks_pyslurm_only_where_it_matches covers the mismatch here")


@pytest.fixture(params=["cli", "rest", "rest-unix", "rest-local", "pyslurm"])
def adapter(request, cluster):
    if request.param == "pyslurm":
        pyslurm_serves(request, cluster)
        return pyslurm_adapter(cluster)
    if request.param == "rest-local" and request.node.originalname in ADMIN_TESTS:
        pytest.skip("rest_auth/local acts as slurmrestd's own unprivileged user here (it refuses root); "
                    "admin changes over REST are covered by the JWT adapters")
    if request.param == "cli":
        return cli(cluster)
    if request.param == "rest-local":
        return RestAdapter(cluster.rest_local, "root", None, timeout=15, retries=2)
    url = cluster.rest_unix if request.param == "rest-unix" else cluster.rest_url
    return RestAdapter(url, "root", cluster.token(), timeout=15, retries=2)


def _wait(cond, timeout=30, what="condition"):
    end = time.monotonic() + timeout * WAIT_SCALE  # more when clusters run side by side
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def test_node_info_hostlist_and_drain_flags(cluster, adapter):
    cluster.run("scontrol", "update", "nodename=n2", "state=drain", "reason=admin: RMA ticket 42")
    cluster.run("scontrol", "update", "nodename=n2", "comment=rack 4 slot 2")
    cluster.run("scontrol", "update", "nodename=n2", "extra=burnin=2026-11")
    try:
        nodes = {n.name: n for n in adapter.node_info()}
        assert sorted(nodes) == ["n1", "n2", "n3"]
        assert nodes["n2"].drained and nodes["n2"].reason == "admin: RMA ticket 42"
        assert not nodes["n1"].drained and nodes["n1"].state == "idle"
        assert [n.name for n in adapter.node_info("n[2-3]")] == ["n2", "n3"]
        (one,) = adapter.node_info("n2")   # the CLI's one-node read is the oneliner
        assert one.drained and one.reason == "admin: RMA ticket 42"
    finally:
        cluster.run("scontrol", "update", "nodename=n2", "state=resume")


def states(adapter, job: str) -> dict[str, str]:
    return {k: r.state for k, r in adapter.jobs([job]).items()}


def test_submit_states_and_cancel(cluster, adapter):
    job = adapter.submit(["--job-name=contract", "--nodes=1", "--time=00:05:00", "--output=/dev/null",
                          "--exclusive"], script="sleep 30")
    assert job.isdigit()
    _wait(lambda: states(adapter, job).get(job) == "RUNNING", what=f"job {job} running")
    assert states(adapter, job) == {job: "RUNNING"} and adapter.jobs([job])[job].active
    cluster.run("scontrol", "suspend", job)   # a suspended job is not finished (requalify, burnin watch)
    _wait(lambda: states(adapter, job).get(job) == "SUSPENDED", what=f"job {job} suspended")
    assert adapter.jobs([job])[job].active
    adapter.cancel([job])
    _wait(lambda: states(adapter, job).get(job) == "CANCELLED", what=f"job {job} cancelled")
    # 23.11+ list it as CANCELLED+COMPLETING while its epilog runs: still going until that ends.
    # The epilog (slurmqual's, under CI load) may take up to PrologEpilogTimeout (60 s) before
    # Slurm itself gives up on it: wait past that (CI run of 854cfd2 timed out at 60 s here).
    _wait(lambda: not adapter.jobs([job])[job].active, timeout=90, what=f"job {job} finished")


def test_array_tasks_are_tracked(cluster, adapter):
    job = adapter.submit(["--job-name=contract-array", "--array=0-1", "--nodes=1", "--time=00:05:00",
                          "--output=/dev/null"], script="sleep 30")
    try:
        _wait(lambda: set(states(adapter, job)) == {f"{job}_0", f"{job}_1"}, what="both array tasks listed")
        _wait(lambda: set(states(adapter, job).values()) == {"RUNNING"}, what="array tasks running")
    finally:
        adapter.cancel([job])


def _can_change_nodes(adapter) -> bool:
    return not isinstance(adapter, RestAdapter) or adapter.can("POST", "/node/{node_name}")


def test_drain_and_resume(cluster, adapter):
    if not _can_change_nodes(adapter):
        for call in (lambda: adapter.drain(["n3"], "slurmqual: x: y"), lambda: adapter.resume(["n3"])):
            with pytest.raises(SlurmError, match=f"needs scontrol on this host: slurmrestd {adapter.version} cannot"):
                call()
        assert not any(n.drained for n in cli(cluster).node_info())
        return
    reference = cli(cluster)
    adapter.drain(["n3"], "slurmqual: nic_link: mlx5_3/1: state DOWN")
    try:
        (n3,) = reference.node_info("n3")
        assert n3.drained and n3.reason == "slurmqual: nic_link: mlx5_3/1: state DOWN"
    finally:
        adapter.resume(["n3"])
    (n3,) = reference.node_info("n3")
    assert not n3.drained
    # 22.05 and 26.05 clear the reason on resume; 24.11 and 25.11 keep it on the idle
    # node (seen on 24.11.5 and 25.11.7: `State=IDLE Reason=slurmqual: ...` for good), which
    # is why policy and hooks read "drained" from the state flags, never from a reason.
    stale = cluster.slurm_version.startswith(("24.", "25."))
    assert n3.reason == ("slurmqual: nic_link: mlx5_3/1: state DOWN" if stale else "")


def test_submit_with_a_node_list(cluster, adapter):
    argv = ["--job-name=contract-nodelist", "--nodes=1", "--nodelist=n3", "--time=00:05:00",
            "--output=/dev/null"]
    if isinstance(adapter, RestAdapter) and adapter.generation <= 38:
        with pytest.raises(SlurmError, match=f"--nodelist is not supported by slurmrestd {adapter.version}: needs sbatch"):
            adapter.submit(argv, script="true")
        return
    job = adapter.submit(argv, script="sleep 30")
    try:
        _wait(lambda: states(adapter, job).get(job) == "RUNNING", what=f"job {job} running")
        where = cluster.run("squeue", "-h", "-j", job, "-o", "%N").stdout.strip()
        assert where == "n3"
    finally:
        adapter.cancel([job])


def test_reservations_where_the_server_can(cluster, adapter):
    name = f"sq-contract-{os.getpid()}-{type(adapter).__name__}"
    if isinstance(adapter, RestAdapter) and not adapter.can("POST", "/reservation"):
        with pytest.raises(SlurmError, match=f"needs scontrol on this host: slurmrestd {adapter.version} cannot"):
            adapter.create_reservation(name, ["n1"], 5)
        return
    adapter.create_reservation(name, ["n1"], 5)
    try:
        assert name in adapter.reservations() and name in cli(cluster).reservations()
    finally:
        adapter.delete_reservation(name)
    assert name not in cli(cluster).reservations()


# -- creations are never doubled ---------------------------------------------------------

def _slow_wrapper(cluster, tmp_path, tool: str, match: str) -> str:
    """A bin dir whose `tool` runs the cluster's real one and then, when its
    arguments match `match`, sleeps past the adapter's timeout (the answer is
    lost; slurmctld did the work). Every call is counted."""
    d = tmp_path / "slowbin"
    d.mkdir(exist_ok=True)
    real = _slurm_bin(cluster)
    for t in os.listdir(real):
        if t != tool and not (d / t).exists():
            os.symlink(os.path.join(real, t), d / t)
    (d / tool).write_text(f'#!/bin/sh\ncase "$*" in *"{match}"*) echo call >> {tmp_path}/{tool}.count;; esac\n'
                          f'{real}/{tool} "$@"; rc=$?\ncase "$*" in *"{match}"*) sleep 60;; esac\nexit $rc\n')
    (d / tool).chmod(0o755)
    return str(d)


def test_slow_sbatch_submits_exactly_one_job(cluster, tmp_path):
    a = cli(cluster, bin_dir=_slow_wrapper(cluster, tmp_path, "sbatch", "--"), timeout=6)
    name = f"contract-slow-{os.getpid()}"
    start = time.monotonic()
    job = a.submit([f"--job-name={name}", "--nodes=1", "--time=00:05:00", "--output=/dev/null"],
                   script="sleep 20")
    try:
        assert time.monotonic() - start < 60
        assert (tmp_path / "sbatch.count").read_text().count("call") == 1
        listed = cluster.run("squeue", "-h", "--states=all", f"--name={name}", "-o", "%i").stdout.split()
        assert listed == [job]
    finally:
        cluster.run("scancel", f"--name={name}", check=False)


def test_slow_create_reservation_creates_exactly_one(cluster, tmp_path):
    a = cli(cluster, bin_dir=_slow_wrapper(cluster, tmp_path, "scontrol", "create reservation"), timeout=6)
    name = f"sq-slow-{os.getpid()}"
    try:
        a.create_reservation(name, ["n1"], 5)
        assert (tmp_path / "scontrol.count").read_text().count("call") == 1
        shown = cluster.run("scontrol", "show", "reservation", "--oneliner").stdout
        assert shown.count(f"ReservationName={name} ") == 1
    finally:
        cluster.run("scontrol", "delete", f"reservationname={name}", check=False)


# -- REST failure modes and config -------------------------------------------------------

def test_rest_bad_token_and_unreachable_are_clear(cluster):
    bad = RestAdapter(cluster.rest_url, "root", "not-a-token", timeout=5, retries=1)
    with pytest.raises(SlurmError) as err:
        bad.node_info()
    assert "check slurm.rest" in str(err.value)   # 22.05 answers a bad token with HTTP 500, newer with 401
    assert "not-a-token" not in str(err.value) and "not-a-token" not in repr(bad)
    gone = RestAdapter("http://127.0.0.1:9", "root", "t", timeout=2, retries=2)
    start = time.monotonic()
    with pytest.raises(SlurmError, match="unreachable"):
        gone.node_info()
    assert time.monotonic() - start < 10


def test_status_over_rest_from_config(cluster, tmp_path):
    tok = tmp_path / "jwt"
    tok.write_text("SLURM_JWT=" + cluster.token() + "\n")
    tok.chmod(0o600)
    cfg = tmp_path / "rest.toml"
    cfg.write_text(f'[slurm]\nadapter = "rest"\n[slurm.rest]\nurl = "{cluster.rest_url}"\nuser = "root"\n'
                   f'token_file = "{tok}"\n[hooks]\nstate_dir = "{tmp_path}/state"\n[store]\npath = "{tmp_path}/s.db"\n')
    env = {k: v for k, v in cluster.env.items() if k not in ("SLURM_CONF", "SLURMQUAL_CONFIG")}
    p = subprocess.run([sys.executable, "-m", "slurmqual", "status", "--json", "--config", str(cfg)], env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert [r["node"] for r in out["nodes"]] == ["n1", "n2", "n3"] and out["summary"]["unknown"] == 3
    assert "SLURM_JWT" not in env


def test_status_over_a_local_auth_socket_needs_no_token(cluster, tmp_path):
    cfg = tmp_path / "rest.toml"
    cfg.write_text(f'[slurm]\nadapter = "rest"\n[slurm.rest]\nurl = "{cluster.rest_local}"\nuser = "root"\n'
                   f'[hooks]\nstate_dir = "{tmp_path}/state"\n[store]\npath = "{tmp_path}/s.db"\n')
    env = {k: v for k, v in cluster.env.items() if k not in ("SLURM_CONF", "SLURMQUAL_CONFIG", "SLURMRESTD_TOKEN")}
    p = subprocess.run([sys.executable, "-m", "slurmqual", "status", "--json", "--config", str(cfg)], env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert [r["node"] for r in json.loads(p.stdout)["nodes"]] == ["n1", "n2", "n3"]


# -- pyslurm: auto, mismatch, the call it lacks ----------------------------------------

def _site_config(cluster, tmp_path, adapter: str):
    from slurmqual.config import load

    cfg = tmp_path / f"{adapter}.toml"
    cfg.write_text(f'[slurm]\nadapter = "{adapter}"\nslurm_conf = "{cluster.conf}"\nbin_dir = "{_slurm_bin(cluster)}"\n'
                   f'[hooks]\nstate_dir = "{tmp_path}/state"\n[store]\npath = "{tmp_path}/s.db"\n')
    return load(str(cfg))


def test_auto_picks_pyslurm_only_where_it_matches(cluster, tmp_path, request):
    """"auto": pyslurm where its libslurm is the controller's release, else the
    CLI; "pyslurm" on another release: a clear error naming both versions and the fix."""
    from slurmqual.slurm import get_adapter

    request.getfixturevalue("pyslurm_installed")
    auto = get_adapter(_site_config(cluster, tmp_path, "auto"))
    explicit = get_adapter(_site_config(cluster, tmp_path, "pyslurm"))
    assert isinstance(explicit, PyslurmAdapter)
    if cluster.slurm_version.startswith("25.11."):
        assert isinstance(auto, PyslurmAdapter)
        assert [n.name for n in auto.node_info()] == ["n1", "n2", "n3"]
        return
    assert isinstance(auto, CliAdapter)
    with pytest.raises(SlurmError) as err:
        explicit.node_info()
    msg = str(err.value)
    assert "25.11.7" in msg and cluster.slurm_version in msg, msg
    assert "SLURM_LIB_DIR" in msg and 'adapter = "cli"' in msg, msg


def test_pyslurm_reboot_goes_through_scontrol(cluster, request):
    """pyslurm 25.11 has no reboot call: the adapter runs `scontrol reboot` (CLI).
    This cluster has no RebootProgram, so slurmctld refuses it, and that
    refusal is what the caller sees (the repair ladder then drains instead)."""
    pyslurm_serves(request, cluster)
    a = pyslurm_adapter(cluster)
    with pytest.raises(SlurmError, match="scontrol reboot ASAP: exit 1: scontrol_reboot_nodes error"):
        a.reboot(["n2"], "slurmqual: remediation: reboot test")
    assert [c[1:] for c in a._cli.calls if c[1:2] == ["reboot"]] == [
        ["reboot", "ASAP", "nextstate=RESUME", "reason=slurmqual: remediation: reboot test", "n2"]]
    (n2,) = a.node_info("n2")
    assert "REBOOT_REQUESTED" not in n2.flags and not n2.drained


def test_pyslurm_call_is_bounded_by_timeout_s_when_slurmctld_hangs(cluster, request):
    """A stopped slurmctld (SIGSTOP: it accepts connections, answers nothing):
    libslurm alone waits MessageTimeout (10 s here) per try and tries again,
    with the GIL held. slurm.timeout_s (2 s) bounds each pyslurm call as it
    bounds the CLI's; reads retry (retries=2), then a clear error."""
    import signal
    import time

    pyslurm_serves(request, cluster)
    a = PyslurmAdapter(cluster.conf, retries=2, cli=cli(cluster), timeout=2)
    assert [n.name for n in a.node_info()] == ["n1", "n2", "n3"]  # loaded and answering
    ctld = cluster.pids["slurmctld"]
    os.kill(ctld, signal.SIGSTOP)
    try:
        start = time.monotonic()
        with pytest.raises(SlurmError, match=r"pyslurm load nodes: timed out after 2s \(slurm.timeout_s\)"):
            a.node_info()
        took = time.monotonic() - start
    finally:
        os.kill(ctld, signal.SIGCONT)
    assert 3.5 < took < 8, took  # two tries of 2 s and the backoff between, not libslurm's 2 x 10 s
    cluster.wait_for(lambda: len(a.node_info()) == 3, 30, "slurmctld answering again")
