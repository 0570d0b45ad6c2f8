"""Proven on a clean node: the wheel, pip-installed into a clean Debian 13
(trixie) system with no checkout in reach, set up by `slurmqual install`,
verified by `install --check`, the snippet pasted into that system's own
slurm.conf, and its own slurmd's HealthCheckProgram draining a broken node
and resuming it once repaired.

The system is an overlay over tests/chroot.py's cached trixie chroot (the
cache is never written), mounted in a private mount namespace held by one
process; every command and daemon enters that namespace with nsenter, so the
mounts vanish with the processes. Only one host directory is bound inside
(/srv/in): the wheels and the node's sysfs/procfs tree.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
try:
    import chroot  # tests/chroot.py: cached debootstrap chroots
except ImportError:  # pragma: no cover - the chroot builder is not in this checkout
    chroot = None

pytestmark = [pytest.mark.slurm,
              pytest.mark.skipif(chroot is None, reason="tests/chroot.py (cached Debian chroots) is not here"),
              pytest.mark.skipif(os.geteuid() != 0, reason="a chroot with its own Slurm needs root")]

ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root", "LC_ALL": "C.UTF-8"}
HOLDER = r"""set -e
mount -t overlay overlay -o "lowerdir=$1,upperdir=$2,workdir=$3" "$4"
R=$4
mount -t proc proc "$R/proc"
mount --rbind /dev "$R/dev"
mount --rbind /sys "$R/sys"
mkdir -p "$R/srv/in"
mount --bind "$5" "$R/srv/in"
: > "$5/holder.ready"
exec chroot "$R" /bin/sleep infinity
"""


class CleanNode:
    def __init__(self, base: str):
        self.base = base
        self.inbox = os.path.join(base, "in")      # host side of /srv/in
        self.logs = os.path.join(base, "logs")     # daemons' stdout, host side
        self.pids: dict[str, int] = {}
        self.procs: list[subprocess.Popen] = []

    # -- namespace ------------------------------------------------------------
    def start(self, lower: str) -> None:
        for d in ("upper", "work", "root", "in", "logs"):
            os.makedirs(os.path.join(self.base, d), exist_ok=True)
        os.chmod(self.base, 0o755)
        argv = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", HOLDER, "sh", lower,
                *(os.path.join(self.base, d) for d in ("upper", "work", "root")), self.inbox]
        self._spawn("holder", argv)
        end = time.monotonic() + 30
        while not os.path.exists(os.path.join(self.inbox, "holder.ready")):
            if self.procs[0].poll() is not None or time.monotonic() > end:
                raise RuntimeError(f"overlay holder did not start: {self._out('holder')}")
            time.sleep(0.1)

    def argv(self, *cmd: str) -> list[str]:
        return ["nsenter", "-t", str(self.pids["holder"]), "-m", "-r", "-w", "--", *cmd]

    def sh(self, script: str, timeout: float = 300, check: bool = True, env: dict | None = None):
        proc = subprocess.run(self.argv("/bin/sh", "-c", script), env=env or ENV, capture_output=True, text=True,
                              timeout=timeout, cwd="/")
        if check:
            assert proc.returncode == 0, f"{script}\n--- rc {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        return proc

    def _spawn(self, key: str, argv: list[str]) -> None:
        out = open(os.path.join(self.logs, f"{key}.out"), "ab")
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=ENV,
                                start_new_session=True, cwd="/")
        self.pids[key] = proc.pid
        self.procs.append(proc)

    def daemon(self, key: str, *cmd: str) -> None:
        self._spawn(key, self.argv(*cmd))

    def _out(self, key: str) -> str:
        try:
            with open(os.path.join(self.logs, f"{key}.out"), errors="replace") as fh:
                return fh.read()[-3000:]
        except OSError:
            return ""

    def stop(self) -> None:
        """Daemons first (TERM, then KILL), the namespace holder last: with the
        last process gone the namespace and its mounts go too."""
        for proc in reversed(self.procs):
            if proc.poll() is None:
                try:
                    os.kill(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        end = time.monotonic() + 15
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout=max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)

    # -- Slurm ----------------------------------------------------------------
    def node(self, name: str = "n1") -> dict[str, str]:
        out = self.sh(f"scontrol -o show node {name}", timeout=30, check=False).stdout
        fields = dict(re.findall(r"(\w+)=((?:(?! \w+=).)*)", out))
        return fields

    def wait(self, cond, timeout: float, what: str) -> dict:
        end = time.monotonic() + timeout
        last: dict = {}
        while time.monotonic() < end:
            last = self.node()
            if cond(last):
                return last
            time.sleep(1)
        raise AssertionError(f"timed out ({timeout:g}s) waiting for {what}; node: {last}\n"
                             f"slurmd: {self.sh('tail -20 /var/log/slurm/slurmd.log', check=False).stdout}\n"
                             f"hook log: {self.sh('tail -20 /var/log/slurmqual/slurmqual.log', check=False).stdout}")


def _free_port_block(n: int) -> int:
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + n >= 65000:
            continue
        try:
            socks = []
            for p in range(base, base + n):
                s = socket.socket()
                s.bind(("127.0.0.1", p))
                socks.append(s)
            for s in socks:
                s.close()
            return base
        except OSError:
            for s in socks:
                s.close()
    raise RuntimeError("no free port block")


def _wheels(dest: str, python_version: str) -> str:
    """The wheel (built from the checkout's sdist, as a release is) and binary
    wheels of its dependencies for the chroot's Python, fetched on the host."""
    subprocess.run([sys.executable, "-m", "build", "-o", dest, REPO], check=True, capture_output=True, timeout=600)
    wheel = glob.glob(os.path.join(dest, "slurmqual-*.whl"))[0]
    import tomllib

    with open(os.path.join(REPO, "pyproject.toml"), "rb") as fh:
        deps = tomllib.load(fh)["project"]["dependencies"]
    target = ["--implementation", "cp", "--python-version", python_version,
              "--abi", "cp" + python_version.replace(".", ""), "--abi", "abi3", "--abi", "none",
              "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux_2_17_x86_64",
              "--platform", "manylinux2014_x86_64", "--platform", "any"]
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    for req in deps:
        got = subprocess.run([*pip, "download", "--only-binary=:all:", *target, "-d", dest, req], capture_output=True,
                             text=True, timeout=600)
        if got.returncode != 0:  # sdist-only (python-hostlist): pure Python, build the wheel here
            built = subprocess.run([*pip, "wheel", "--no-deps", "-w", dest, req], capture_output=True, text=True,
                                   timeout=600)
            if built.returncode != 0:
                pytest.skip(f"cannot fetch {req} for Python {python_version}: {got.stderr.strip()[-300:]}")
    return os.path.basename(wheel)


@pytest.fixture()
def clean_node(tmp_path):
    try:
        lower = chroot.ensure_chroot("trixie")
    except chroot.ChrootUnavailable as exc:
        pytest.skip(f"no Debian 13 chroot: {exc}")
    node = CleanNode(str(tmp_path))
    node.start(lower)
    try:
        yield node
    finally:
        node.stop()


def test_wheel_on_a_clean_trixie_node_drains_and_resumes_through_slurmd(clean_node, tmp_path):
    from slurmqual.nodetree import build, remove_module

    node = clean_node
    assert node.sh("cat /etc/debian_version").stdout.startswith("13")
    # No checkout in reach (the cached chroot may hold an empty mount point at its path).
    assert node.sh(f"ls -A {REPO} 2>/dev/null | wc -l").stdout.strip() == "0"
    assert node.sh("find / -xdev -name pyproject.toml -path '*slurmqual*' 2>/dev/null | wc -l").stdout.strip() == "0"
    # The cached chroot is shared with the 24.11 cluster tests, whose hooks run
    # inside it: a node slurmqual never touched has none of its directories
    # (a refused config's record there once showed up in `install --check`).
    node.sh("rm -rf /etc/slurmqual /var/lib/slurmqual /var/log/slurmqual /var/cache/slurmqual")

    pyver = node.sh("python3 -c 'import sys; print(\"%d.%d\" % sys.version_info[:2])'").stdout.strip()
    wheel = _wheels(os.path.join(node.inbox, "wheels"), pyver)
    tree = build("h100-roce-healthy", os.path.join(node.inbox, "trees", "n1"))

    # 1. pip install the wheel into a venv, offline, from the wheels alone.
    node.sh("python3 -m venv /opt/slurmqual && /opt/slurmqual/bin/pip install -q --disable-pip-version-check "
            f"--no-index --find-links /srv/in/wheels /srv/in/wheels/{wheel}")
    where = node.sh("/opt/slurmqual/bin/python -I -c 'import slurmqual; print(slurmqual.__file__)'").stdout
    assert where.startswith("/opt/slurmqual/lib/python"), where
    assert node.sh("/opt/slurmqual/bin/python -c 'import matplotlib'", check=False).returncode != 0

    # 2. slurmqual install, twice: the second run changes nothing.
    first = node.sh("/opt/slurmqual/bin/slurmqual install").stdout
    assert "write file 0644 root:root: /etc/slurmqual/config.toml" in first
    assert "write file 0755 root:root: /opt/slurmqual/libexec/healthcheck/slurmqual-healthcheck" in first
    assert "nothing to do" in node.sh("/opt/slurmqual/bin/slurmqual install").stdout
    # The site's one edit: where this test node's sysfs/procfs tree is.
    node.sh("sed -i 's|^root = \"/\"|root = \"/srv/in/trees/{node}\"|' /etc/slurmqual/config.toml")
    assert 'root = "/srv/in/trees/{node}"' in node.sh("cat /etc/slurmqual/config.toml").stdout

    # 3. slurm.conf: this node's cluster lines, then the snippet pasted as printed.
    port = _free_port_block(2)
    host = socket.gethostname().split(".")[0]
    snippet = node.sh("/opt/slurmqual/bin/slurmqual install --snippet").stdout
    assert "HealthCheckProgram=/opt/slurmqual/libexec/healthcheck/slurmqual-healthcheck" in snippet
    snippet = snippet.replace("HealthCheckInterval=300", "HealthCheckInterval=5")  # a test can't wait 5 minutes
    conf = f"""ClusterName=clean
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={port}
SlurmdPort={port + 1}
AuthType=auth/munge
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
MpiDefault=none
SlurmdParameters=config_overrides
ReturnToService=2
NodeName=n1 NodeAddr=127.0.0.1 CPUs=2 RealMemory=1000 State=UNKNOWN
PartitionName=main Nodes=ALL Default=YES MaxTime=INFINITE State=UP
{snippet}"""
    with open(os.path.join(node.inbox, "slurm.conf"), "w") as fh:
        fh.write(conf)
    node.sh("mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm && "
            "install -m 0644 /srv/in/slurm.conf /etc/slurm/slurm.conf && "
            "printf 'CgroupPlugin=disabled\\n' > /etc/slurm/cgroup.conf && chmod 0644 /etc/slurm/cgroup.conf")

    # 4. install --check, the way slurmd will run the hooks (no PATH, no SLURM_CONF).
    check = node.sh("/opt/slurmqual/bin/slurmqual install --check --node n1", check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "ok       prolog run: exit 0" in check.stdout
    assert "ok       slurm.conf HealthCheckProgram: /opt/slurmqual/libexec/healthcheck/slurmqual-healthcheck" in check.stdout

    # 5. Start this system's own munge and Slurm.
    node.sh("mkdir -p /run/munge /var/log/munge /var/lib/munge && chown munge:munge /run/munge /var/log/munge "
            "/var/lib/munge /etc/munge/munge.key && chmod 0400 /etc/munge/munge.key")
    node.daemon("munged", "setpriv", "--reuid=munge", "--regid=munge", "--init-groups", "/usr/sbin/munged",
                "--foreground")
    node.sh("for i in $(seq 100); do [ -S /run/munge/munge.socket.2 ] && exit 0; sleep 0.1; done; exit 1")
    node.daemon("slurmctld", "/usr/sbin/slurmctld", "-D")
    node.sh("for i in $(seq 200); do scontrol ping >/dev/null 2>&1 && exit 0; sleep 0.2; done; "
            "tail -20 /var/log/slurm/slurmctld.log; exit 1", timeout=120)
    node.daemon("slurmd", "/usr/sbin/slurmd", "-D", "-N", "n1")
    state = node.wait(lambda n: n.get("State", "").startswith("IDLE") and "DRAIN" not in n.get("State", ""),
                      120, "n1 idle")
    assert "slurmqual" not in state.get("Reason", "")

    # 6. Break the node: nvidia_peermem unloaded. slurmd's HealthCheckProgram drains it.
    remove_module(tree, "nvidia_peermem")
    drained = node.wait(lambda n: "DRAIN" in n.get("State", "") and n.get("Reason", "").startswith("slurmqual: peermem"),
                        180, "slurmd's health check to drain n1")
    assert "nvidia_peermem" in drained["Reason"]

    # 7. Repair it: the next health check resumes it (slurmqual drained it, so slurmqual may resume it).
    shutil.rmtree(tree)
    build("h100-roce-healthy", tree)
    # (Slurm 24.11 keeps the old Reason text on a resumed node: the state is what counts.)
    node.wait(lambda n: n.get("State") == "IDLE", 180, "slurmd's health check to resume n1")
    log = node.sh("cat /var/log/slurmqual/slurmqual.log", check=False).stdout
    assert "healthcheck n1: drained: slurmqual: peermem" in log and "checks pass, resumed" in log
