#!/usr/bin/env python3
"""A real, local Slurm cluster for tests and the demo: Debian's munge,
slurmctld and one slurmd per simulated node, all on loopback.

Each node `nX` runs `slurmd -N nX` inside its own UTS namespace (so it sees
hostname nX), uses free TCP ports, and has its own node tree as `/` through
the slurmqual site config (`node.root = "<dir>/trees/{node}"`), so one node
can be broken while the others stay healthy. Daemons are stopped by pid only.

Slurm versions (the test matrix, see docs/SLURM_VERSIONS.md):
`version="22.05"` runs the machine's own Debian 12 Slurm; `"24.11"` and
`"newest"` run the daemons of a cached Debian chroot (tests/chroot.py:
trixie, sid); `"25.11"` runs Slurm built from ../shared/sources
(tests/slurmbuild.py: a cached install prefix) on the host itself, with the
host's munge and Python, like 22.05 but every Slurm path under the prefix. A chroot cluster first starts a holder process in a private
mount namespace (proc, /dev, /sys, the temp dir and this checkout bound at
their own paths, so every path means the same inside and out) chrooted into
the chroot; every daemon and client then enters it with `nsenter`, so the
mounts vanish with the last daemon and nothing is ever left mounted on the
host. slurmd runs the hooks with the chroot's Python: a small venv per cluster
(`python`, under the cluster dir) whose .pth adds the chroot's cached venv
(slurmqual's dependencies) and this checkout, so `python -I -m slurmqual`
(how burn-in jobs start it) works too. Clients: `run()` and `env` (PATH)
reach the cluster's own Slurm tools from the host; `slurmqual_argv` runs
slurmqual's CLI where the cluster's Slurm is (inside the chroot), and so does
a plain `[sys.executable, "-m", "slurmqual", ...]` run with `env` (a
sitecustomize on env's PYTHONPATH re-executes it inside, same pid), so the
jobs it submits name a Python that exists on the nodes; the logging
wrappers in `bin_dir` work both from the host and from inside.

RebootProgram (`start(reboot=True)`): slurmd runs `bin/reboot.sh`, which
leaves a request under `reboot-requests/`; a watcher thread of this process
"reboots" the node: it stops that slurmd by pid, gives the node's tree a
new boot (nodetree.reboot: new boot id, fresh kernel log), calls
`on_reboot(node)` (a test's hook: break the fresh tree again, or block to
keep the reboot in flight) and starts slurmd again with `-b` (slurmd reports a fresh boot, so slurmctld
sees the reboot complete). No machine reboots; reboots happen while the
process that started the cluster runs.

    python3 tests/slurmcluster.py up DIR [--nodes 6] [--version 24.11]   # prints `export SLURM_CONF=...`
    python3 tests/slurmcluster.py down DIR
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chroot  # noqa: E402  (tests/chroot.py, beside this file)
import slurmbuild  # noqa: E402  (tests/slurmbuild.py)

DAEMONS = ("/usr/sbin/munged", "/usr/sbin/slurmctld", "/usr/sbin/slurmd")
HOST_VERSION = "22.05"  # Debian 12's Slurm, installed on the machine itself
# ("22.05", "24.11", "25.11", "newest"): Debian 12's, chroots', built from source.
VERSIONS = tuple(sorted((HOST_VERSION, *chroot.SUITES, *slurmbuild.RELEASES),
                        key=lambda v: tuple(map(int, v.split("."))) if v[:1].isdigit() else (99, 99)))
# Version a Cluster() gets when none is passed; tests/conftest.py sets it per test.
DEFAULT_VERSION = HOST_VERSION
CLIENT_TOOLS = ("scontrol", "sinfo", "squeue", "sbatch", "scancel", "srun", "sacct", "salloc", "sprio", "sshare",
                "sstat", "sdiag", "strigger", "sacctmgr")


def missing_requirements(version: str = HOST_VERSION) -> str | None:
    """Why a real cluster of `version` cannot run here, or None (a chroot that
    cannot be built raises chroot.ChrootUnavailable at start instead)."""
    if version in slurmbuild.RELEASES:
        why = slurmbuild.why_unavailable(version)
        if why:
            return why
        try:
            pwd.getpwnam("munge")
        except KeyError:
            return "user munge missing (apt-get install munge)"
        return None if os.path.exists(DAEMONS[0]) else f"{DAEMONS[0]} missing: apt-get install munge"
    if version != HOST_VERSION:
        if version not in chroot.SUITES:
            return f"unknown Slurm version {version!r} (known: {', '.join(VERSIONS)})"
        return None if os.geteuid() == 0 else "needs root (run the suite as root, as CI does: bash scripts/test.sh)"
    if os.geteuid() != 0:
        return "needs root (run the suite as root, as CI does: bash scripts/test.sh)"
    for d in DAEMONS + ("/usr/bin/sinfo",):
        if not os.path.exists(d):
            return f"{d} missing: apt-get install munge slurmctld slurmd slurm-client (scripts/test.sh does it as root)"
    try:
        pwd.getpwnam("munge")
    except KeyError:
        return "user munge missing (apt-get install munge)"
    return None


def unreachable_dir(path: str, uid: int, gid: int, groups: tuple[int, ...] = ()) -> str | None:
    """The first directory above `path` that user uid/gid (munged's user)
    cannot traverse, or None. munged makes its socket in the cluster
    directory, so such a directory (TMPDIR inside a 0700 directory, e.g.
    pytest's or `mktemp -d`'s) otherwise shows only as a timeout waiting for
    the munged socket."""
    import stat

    parts = os.path.abspath(path).split(os.sep)[1:-1]
    cur = os.sep
    for part in ["", *parts]:
        cur = os.path.join(cur, part) if part else cur
        try:
            st = os.stat(cur)
        except OSError:
            return cur
        bit = stat.S_IXUSR if st.st_uid == uid else stat.S_IXGRP if st.st_gid in (gid, *groups) else stat.S_IXOTH
        if uid != 0 and not st.st_mode & bit:
            return cur
    return None


def _unreachable_message(base: str, blocked: str, user: str, uid: int) -> str:
    import stat

    try:
        mode = f"mode {stat.S_IMODE(os.stat(blocked).st_mode):04o}"
    except OSError:
        mode = "unreadable"
    return (f"cluster directory {base} is not reachable by user {user} (uid {uid}, who runs munged there): "
            f"{blocked} ({mode}) does not let it through. Point TMPDIR at a directory every user can "
            f"traverse (e.g. TMPDIR=/tmp, where the cluster directories go), or `chmod o+x {blocked}`")


# Side by side (pytest-xdist) several clusters, the unit tests and a Slurm
# build share the CPUs: every wait for a condition (cluster start, wait_for)
# gets this factor more time; only a wait that fails takes longer.
WAIT_SCALE = float(os.environ.get("SLURMQUAL_WAIT_SCALE") or (2 if os.environ.get("PYTEST_XDIST_WORKER") else 1))

# Below Linux's ephemeral range (32768-60999 by default), so that no outgoing
# connection (slurmd -> slurmctld, clients) can hold a port a daemon is about to
# bind. Side by side (pytest-xdist), worker gwK draws from its own slice, so two
# workers never pick the same block between the check and the daemons' bind.
PORTS = (20000, 32700)
_SLICES = 8


def _port_range() -> tuple[int, int]:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")  # "gw3" under xdist, else unset
    if not worker.startswith("gw") or not worker[2:].isdigit():
        return PORTS
    width = (PORTS[1] - PORTS[0]) // _SLICES
    lo = PORTS[0] + (int(worker[2:]) % _SLICES) * width
    return lo, lo + width


def _free_port_block(count: int) -> int:
    """First of `count` consecutive free TCP ports on 127.0.0.1 (several clusters may run at once)."""
    lo, hi = _port_range()
    for _ in range(200):
        base = random.randrange(lo, hi - count)
        socks = []
        try:
            for p in range(base, base + count):
                s = socket.socket()
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind(("127.0.0.1", p))
                socks.append(s)
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free port block found")


class Cluster:
    """Handle on a running local cluster (see module docstring)."""

    def __init__(self, base: str, nodes: int = 6, health_interval: int = 5, python: str | None = None,
                 version: str | None = None):
        self.version = version or DEFAULT_VERSION
        self.root: str | None = None  # the chroot, for versions other than the host's
        self.prefix: str | None = None  # the install prefix, for versions built from source
        self._python_arg = python
        self.base = os.path.abspath(base)
        self.n = nodes
        self.names = [f"n{i}" for i in range(1, nodes + 1)]
        self.health_interval = health_interval
        self.conf = os.path.join(self.base, "etc", "slurm.conf")
        self.sq_config = os.path.join(self.base, "etc", "slurmqual.toml")
        self.trees = os.path.join(self.base, "trees")
        self.state_dir = os.path.join(self.base, "state")
        self.log = os.path.join(self.base, "log")
        self.bin = os.path.join(self.base, "bin")
        self.bin_dir = os.path.join(self.base, "slurm-bin")      # logging wrappers (slurmqual's bin_dir)
        self.client_bin = os.path.join(self.base, "client-bin")  # host -> this cluster's own tools
        self.pids: dict[str, int] = {}
        self.slurm_version = ""  # what the daemons report, e.g. "24.11.5"
        self.reboot_dir = os.path.join(self.base, "reboot-requests")
        self.on_reboot = None    # callable(node) run during each node's simulated reboot
        self.reboots: list[str] = []   # nodes rebooted, in order
        self._reboot_stop: threading.Event | None = None

    @property
    def in_chroot(self) -> bool:
        return self.version != HOST_VERSION and self.version not in slurmbuild.RELEASES

    @property
    def built(self) -> bool:
        """Slurm built from source (tests/slurmbuild.py), run on the host."""
        return self.version in slurmbuild.RELEASES

    def sbin(self, daemon: str) -> str:
        """Path (as the daemons see it) of a Slurm daemon: slurmctld, slurmd, slurmrestd."""
        if self.built:
            return os.path.join(self.prefix or slurmbuild.prefix(self.version), "sbin", daemon)
        return f"/usr/sbin/{daemon}"

    def set_sq_config(self, text: str) -> None:
        """Replace the site config in one step (0644, as the hooks demand):
        slurmd runs our healthcheck every few seconds, and a hook that read a
        config truncated by a plain rewrite would judge an empty one, whose
        defaults are the machine's /var/lib/slurmqual and root /."""
        tmp = f"{self.sq_config}.new"
        with open(tmp, "w") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, self.sq_config)

    @property
    def problem_state_dir(self) -> str:
        """Where this cluster's hooks record a refused site config (its own,
        never the machine's or a cached chroot's /var/lib/slurmqual)."""
        return os.path.join(self.base, "problems", "state")

    def tool(self, name: str) -> str:
        """Path (as the daemons see it) of a Slurm client command."""
        if self.built:
            return os.path.join(self.prefix or slurmbuild.prefix(self.version), "bin", name)
        return f"/usr/bin/{name}"

    def in_root(self, argv: list[str], cwd: str | None = None) -> list[str]:
        """argv that runs `argv` (paths as seen inside) in this cluster's Slurm
        installation: itself for the host's, else nsenter into the holder's
        namespace and root, in directory `cwd` (default: the caller's; `/`
        where that does not exist inside). No fork on the way: same pid."""
        if not self.in_chroot:
            return list(argv)
        return ["nsenter", "-t", str(self.pids["holder"]), "-m", "-r", "-w", "--", "/bin/sh", "-c",
                'cd -- "$1" 2>/dev/null || cd /; shift; exec "$@"', "sh", cwd or os.getcwd(), *argv]

    # -- environment for clients ------------------------------------------
    @property
    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["SLURM_CONF"] = self.conf
        env["SLURMQUAL_CONFIG"] = self.sq_config
        env["SLURMQUAL_CACHE_DIR"] = os.path.join(self.base, "cache")
        if self.built:
            env["PATH"] = os.path.dirname(self.tool("scontrol")) + os.pathsep + env.get("PATH", "")
        if self.in_chroot:
            env["PATH"] = self.client_bin + os.pathsep + env.get("PATH", "")
            env["PYTHONPATH"] = os.pathsep.join(p for p in (os.path.join(self.base, "pyshim"), env.get("PYTHONPATH")) if p)
        for k in ("SLURM_JOB_ID", "SLURM_JOBID", "SLURM_NODELIST", "SLURM_JOB_NODELIST"):
            env.pop(k, None)
        return env

    def run(self, *argv: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess:
        return subprocess.run(list(argv), env=self.env, capture_output=True, text=True, check=check, timeout=timeout,
                              cwd=self.base)

    # -- files ------------------------------------------------------------------
    def tree(self, node: str) -> str:
        return os.path.join(self.trees, node)

    def _write_files(self, extra_conf: str, sq_extra: str) -> None:
        from slurmqual.nodetree import build

        for d in ("etc", "munge", "log", "ctld", "spool", "bin", "state", "cache", "trees"):
            os.makedirs(os.path.join(self.base, d), exist_ok=True)
        os.chmod(self.base, 0o755)
        for name in self.names:
            build("h100-roce-healthy", self.tree(name))
        munge = self._user("munge")
        mdir = os.path.join(self.base, "munge")
        with open(os.path.join(mdir, "munge.key"), "wb") as fh:
            fh.write(os.urandom(1024))
        for p in (mdir, os.path.join(mdir, "munge.key")):
            os.chown(p, munge.pw_uid, munge.pw_gid)
        os.chmod(mdir, 0o755)
        os.chmod(os.path.join(mdir, "munge.key"), 0o400)

        self._write_slurm_wrappers()
        port = _free_port_block(self.n + 1)
        self.ctld_port = port
        # Hooks: wrappers that pin the site config and call the repo's executables,
        # since slurmd passes the hooks no PATH and an empty SLURM_CONF.
        hooks = {}
        # A refused site config's record goes to the built-in /var defaults
        # (slurmqual/configproblem.py): in a chroot those are the cached
        # chroot's own, shared with later tests (a clean-node test once read a
        # hostile test's record there). Each cluster keeps its own.
        for d in ("problems/state", "problems/log"):
            os.makedirs(os.path.join(self.base, d), mode=0o755, exist_ok=True)
        problems = (f"SLURMQUAL_PROBLEM_STATE_DIR={self.problem_state_dir} "
                    f"SLURMQUAL_PROBLEM_LOG_FILE={self.base}/problems/log/slurmqual.log ")
        for hook, rel in (("prolog", "prolog/slurmqual-prolog"), ("epilog", "epilog/slurmqual-epilog"),
                          ("healthcheck", "healthcheck/slurmqual-healthcheck")):
            path = os.path.join(self.bin, f"{hook}.sh")
            with open(path, "w") as fh:
                fh.write(f"#!/bin/sh\nSLURMQUAL_CONFIG={self.sq_config} SLURMQUAL_PYTHON={self.python} "
                         f"SLURMQUAL_CACHE_DIR={self.base}/cache {problems}exec {REPO}/{rel} \"$@\"\n")
            os.chmod(path, 0o755)
            hooks[hook] = path
        host = socket.gethostname().split(".")[0]
        conf = f"""# generated by tests/slurmcluster.py
ClusterName=sqtest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={port}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={mdir}/munge.socket
SlurmUser=root
SlurmdUser=root
StateSaveLocation={self.base}/ctld
SlurmdSpoolDir={self.base}/spool/%n
SlurmctldPidFile={self.base}/ctld/slurmctld.pid
SlurmdPidFile={self.base}/spool/slurmd-%n.pid
SlurmctldLogFile={self.log}/slurmctld.log
SlurmdLogFile={self.log}/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
MailProg=/bin/true
JobCompType=jobcomp/filetxt
JobCompLoc={self.log}/jobcomp.txt
AccountingStorageType=accounting_storage/none
SlurmdParameters=config_overrides
ReturnToService=2
HealthCheckProgram={hooks['healthcheck']}
HealthCheckInterval={self.health_interval}
HealthCheckNodeState=ANY
Prolog={hooks['prolog']}
Epilog={hooks['epilog']}
PrologEpilogTimeout=60
SlurmctldTimeout=30
SlurmdTimeout=60
MessageTimeout=10
InactiveLimit=0
MinJobAge=300
KillWait=2
Waittime=0
SchedulerParameters=sched_interval=1
NodeName={self.names[0][:1]}[1-{self.n}] NodeAddr=127.0.0.1 Port={port + 1}-{port + self.n} CPUs=2 RealMemory=1000 State=UNKNOWN
PartitionName=main Nodes=ALL Default=YES MaxTime=INFINITE State=UP
{extra_conf}
"""
        with open(self.conf, "w") as fh:
            fh.write(conf)
        if self.in_chroot or self.built:  # slurmd >= 23.11 fails on cgroup setup without a real systemd here
            with open(os.path.join(self.base, "etc", "cgroup.conf"), "w") as fh:
                fh.write("CgroupPlugin=disabled\n")
            os.chmod(os.path.join(self.base, "etc", "cgroup.conf"), 0o644)
        with open(self.sq_config, "w") as fh:
            fh.write(f"""[node]
gpus = 8
root = "{self.trees}/{{node}}"

[fabric]
nics = 8
rate_gbps = 400

[hooks]
deadline_s = 20
command_timeout_s = 5
log_file = "{self.log}/slurmqual.log"
syslog = false
state_dir = "{self.state_dir}"

[slurm]
slurm_conf = "{self.conf}"
bin_dir = "{self.base}/slurm-bin"
timeout_s = 10
retries = 3

[burnin]
run_dir = "{self.base}/runs"
nccl_tests_dir = "{self.base}/nccl-tests"
gpus_per_node = 1
srun_mpi = "none"
test_time_limit = "00:02:00"
task_time_limit = "00:10:00"
rounds = 3

[store]
path = "{self.base}/slurmqual.db"
{sq_extra}
""")
        nccl = os.path.join(self.base, "nccl-tests")
        os.makedirs(nccl, exist_ok=True)
        shutil.copy(os.path.join(REPO, "tests", "fakebin", "all_reduce_perf"), nccl)
        for other in ("all_gather_perf", "reduce_scatter_perf", "alltoall_perf", "sendrecv_perf"):
            shutil.copy(os.path.join(nccl, "all_reduce_perf"), os.path.join(nccl, other))  # the stand-in plays the test it is named after
        self.fabric({})
        for p in (self.sq_config, self.conf):
            os.chmod(p, 0o644)

    def _write_slurm_wrappers(self) -> None:
        """slurmqual's Slurm calls go through these: each logs its argv to
        log/slurm-calls.log, then runs the real tool. Tests use the log to
        prove, e.g., that a passing prolog made no slurmctld call. In a chroot
        cluster they run the chroot's tool from inside (hooks) and outside."""
        d = self.bin_dir
        os.makedirs(d, exist_ok=True)
        for tool in ("scontrol", "sinfo", "squeue", "sbatch", "scancel", "srun", "sacct"):
            path = os.path.join(d, tool)
            if self.in_chroot:
                run = (f'if [ -e {chroot.READY_MARKER} ]; then exec /usr/bin/{tool} "$@"; fi\n'
                       f'exec {self._in_root_sh(tool)} "$@"\n')
            else:
                run = f'exec {self.tool(tool)} "$@"\n'
            with open(path, "w") as fh:
                fh.write(f'#!/bin/sh\necho "$(date +%s.%N) ${{SLURMD_NODENAME:-}} ${{SLURMQUAL_HOOK:-cli}} {tool} $*" >> {self.log}/slurm-calls.log\n'
                         + run)
            os.chmod(path, 0o755)
        if self.in_chroot:
            os.makedirs(self.client_bin, exist_ok=True)
            for tool in (*CLIENT_TOOLS, "slurmqual"):
                inside = f"{self.python} -m slurmqual" if tool == "slurmqual" else f"/usr/bin/{tool}"
                path = os.path.join(self.client_bin, tool)
                with open(path, "w") as fh:
                    fh.write(f'#!/bin/sh\nif [ -e {chroot.READY_MARKER} ]; then exec {inside} "$@"; fi\n'
                             f'exec {self._in_root_sh(inside)} "$@"\n')
                os.chmod(path, 0o755)
            self._write_pyshim()

    def _write_pyshim(self) -> None:
        """sitecustomize.py that sends a host `python -m slurmqual ...` into the chroot."""
        d = os.path.join(self.base, "pyshim")
        os.makedirs(d, exist_ok=True)
        wrapper = os.path.join(self.client_bin, "slurmqual")
        with open(os.path.join(d, "sitecustomize.py"), "w") as fh:
            fh.write(f"""# generated by tests/slurmcluster.py: `python -m slurmqual ...` run on the host with this
# cluster's env goes on inside its chroot (Slurm {self.version}), with the chroot's Python.
import os
import sys

_argv = getattr(sys, "orig_argv", [])
if not os.path.exists({chroot.READY_MARKER!r}) and _argv[1:3] == ["-m", "slurmqual"]:
    os.execv({wrapper!r}, [{wrapper!r}, *_argv[3:]])
""")

    def _in_root_sh(self, cmd: str) -> str:
        """Shell text: run `cmd` (e.g. /usr/bin/sinfo) inside, in the caller's working directory."""
        return (f"nsenter -t {self.pids['holder']} -m -r -w -- /bin/sh -c "
                f"'cd -- \"$1\" 2>/dev/null || cd /; shift; exec \"$@\"' sh \"$(/bin/pwd)\" {cmd}")

    @property
    def slurmqual_argv(self) -> list[str]:
        """How a test runs slurmqual's CLI against this cluster: where its Slurm
        is (inside the chroot, with the chroot's Python, for chroot versions),
        so jobs it submits name a Python that exists on the nodes."""
        if not self.in_chroot:
            return [sys.executable, "-m", "slurmqual"]
        return [os.path.join(self.client_bin, "slurmqual")]

    def fabric(self, model: dict) -> None:
        """Set the fabric model the stand-in all_reduce_perf reads (see tests/fakebin)."""
        with open(os.path.join(self.base, "nccl-tests", "fabric.json"), "w") as fh:
            json.dump(model, fh)

    def slurm_calls(self) -> list[str]:
        try:
            with open(os.path.join(self.log, "slurm-calls.log")) as fh:
                return fh.read().splitlines()
        except FileNotFoundError:
            return []

    # -- lifecycle ------------------------------------------------------------
    def start(self, extra_conf: str = "", sq_extra: str = "", jwt: bool = False, reboot: bool = False) -> "Cluster":
        why = missing_requirements(self.version)
        if why:
            raise RuntimeError(why)
        if not self.in_chroot:  # a chroot version's munge user is known once its chroot is
            self.check_reachable()
        os.makedirs(self.log, exist_ok=True)
        if self.built:
            self.prefix = slurmbuild.ensure_slurm(self.version)  # raises SlurmBuildUnavailable
        if self.in_chroot:
            self.root = chroot.ensure_chroot(chroot.SUITES[self.version])  # raises ChrootUnavailable
            try:
                self.check_reachable()
                self._start_holder()
                self._make_venv()
            except BaseException:
                self.stop()
                raise
        try:
            if reboot:
                extra_conf += self._reboot_conf()
            self._start(extra_conf, sq_extra, jwt)
            if reboot:
                self._start_reboot_watcher()
            return self
        except BaseException:
            self.stop()  # never leave daemons (or the chroot's namespace) behind a failed start
            raise

    @property
    def python(self) -> str:
        """The Python slurmd's hooks run slurmqual with (a path inside the chroot for chroot versions)."""
        if self._python_arg:
            return self._python_arg
        return os.path.join(self.base, "venv", "bin", "python") if self.in_chroot else sys.executable

    def _make_venv(self) -> None:
        """The cluster's own venv inside the chroot: no packages, a .pth that
        adds the cached venv's site-packages (slurmqual's dependencies) and
        this checkout; .pth files count even in isolated mode (-I)."""
        venv = os.path.join(self.base, "venv")
        subprocess.run(self.in_root(["python3", "-m", "venv", "--without-pip", venv], cwd="/"), check=True,
                       capture_output=True, timeout=60)
        pyver = chroot.python_version(self.root)
        deps = f"{chroot.VENV}/lib/python{pyver}/site-packages"
        with open(os.path.join(venv, "lib", f"python{pyver}", "site-packages", "slurmqual-test.pth"), "w") as fh:
            fh.write(f"{REPO}\nimport site; site.addsitedir({deps!r})\n")

    def _binds(self) -> list[str]:
        """Host paths bound at their own path inside the chroot: the temp dir
        (cluster dirs, pytest's tmp_path for job output), this checkout, and
        /etc/hosts, /etc/resolv.conf."""
        binds = [os.path.realpath(tempfile.gettempdir()), REPO]
        if not any(self.base == b or self.base.startswith(b + "/") for b in binds):
            binds.append(self.base)
        # This machine's name resolution: Slurm >= 23.11 resolves the submit
        # host by name and retries for 10 s when the chroot cannot.
        return binds + [f for f in ("/etc/hosts", "/etc/resolv.conf") if os.path.isfile(f)]

    def _start_holder(self) -> None:
        """The private mount namespace all of this cluster's daemons share."""
        ready = os.path.join(self.log, "holder.ready")
        argv = chroot.run_in_argv(self.root, ["/bin/sh", "-c", f": > {ready}; exec sleep infinity"], self._binds())
        self._spawn("holder", argv)
        self._wait(lambda: os.path.exists(ready), 20, "chroot namespace holder")

    def _user(self, name: str) -> pwd.struct_passwd:
        """A user as the daemons see it (the chroot's /etc/passwd for chroot versions)."""
        if not self.in_chroot:
            return pwd.getpwnam(name)
        with open(os.path.join(self.root, "etc", "passwd")) as fh:
            for line in fh:
                f = line.rstrip("\n").split(":")
                if f[0] == name:
                    return pwd.struct_passwd((f[0], f[1], int(f[2]), int(f[3]), f[4], f[5], f[6]))
        raise RuntimeError(f"user {name} missing in {self.root}")

    def check_reachable(self) -> None:
        """Refuse, saying what to change, a cluster directory munged's user cannot reach."""
        munge = self._user("munge")
        groups = tuple(g.gr_gid for g in grp.getgrall() if munge.pw_name in g.gr_mem) if not self.in_chroot else ()
        blocked = unreachable_dir(self.base, munge.pw_uid, munge.pw_gid, groups)
        if blocked:
            raise RuntimeError(_unreachable_message(self.base, blocked, "munge", munge.pw_uid))

    def _start(self, extra_conf: str, sq_extra: str, jwt: bool) -> "Cluster":
        if jwt:  # slurmrestd with rest_auth/jwt needs auth/jwt as an alternative auth type
            os.makedirs(os.path.join(self.base, "etc"), exist_ok=True)
            key = os.path.join(self.base, "etc", "jwt.key")
            with open(key, "wb") as fh:
                fh.write(os.urandom(64))
            os.chmod(key, 0o600)
            extra_conf += f"\nAuthAltTypes=auth/jwt\nAuthAltParameters=jwt_key={key}\n"
        self._write_files(extra_conf, sq_extra)
        mdir = os.path.join(self.base, "munge")
        self._spawn("munged", ["setpriv", "--reuid=munge", "--regid=munge", "--init-groups", "/usr/sbin/munged", "--foreground",
                               f"--socket={mdir}/munge.socket", f"--key-file={mdir}/munge.key",
                               f"--pid-file={mdir}/munged.pid", f"--log-file={mdir}/munged.log",
                               f"--seed-file={mdir}/munged.seed"])
        self._wait(lambda: os.path.exists(f"{mdir}/munge.socket"), 10, "munged socket")
        self._spawn("slurmctld", [self.sbin("slurmctld"), "-D", "-c", "-f", self.conf])
        self._wait(lambda: self.run("scontrol", "ping", check=False).returncode == 0, 20, "slurmctld")
        self.slurm_version = self.run("scontrol", "-V").stdout.split()[-1]
        for name in self.names:
            os.makedirs(os.path.join(self.base, "spool", name), exist_ok=True)
            self._spawn(f"slurmd-{name}", self._slurmd_argv(name))
        self._wait(lambda: self._all_up(), 30, "slurmd nodes")
        self.save()
        return self

    def start_rest(self, unix: bool = False) -> str:
        """slurmrestd on a free loopback port, or with unix=True on a unix socket
        (JWT auth, as an unprivileged user: see rest_user); returns its URL (http://... or unix:///...)."""
        port = _free_port_block(1)
        env = dict(self.env, SLURM_JWT="daemon")
        key = "slurmrestd-unix" if unix else "slurmrestd"
        listen = f"127.0.0.1:{port}"
        user, group = self.rest_user()
        if unix:  # slurmrestd binds after dropping privileges: give it a directory it may write
            sock_dir = os.path.join(self.base, "restd")
            os.makedirs(sock_dir, exist_ok=True)
            os.chown(sock_dir, self._user(user).pw_uid, -1)
            os.chmod(self.base, os.stat(self.base).st_mode | 0o711)
            sock = os.path.join(sock_dir, "slurmrestd.sock")
            listen = f"unix:{sock}"
        out = open(os.path.join(self.log, f"{key}.out"), "ab")
        proc = subprocess.Popen(self.in_root([self.sbin("slurmrestd"), "-f", self.conf, "-u", user, "-g", group,
                                              "-s", self.rest_plugins(), "-a", "rest_auth/jwt", listen], cwd=self.base),
                                stdout=out, stderr=subprocess.STDOUT, env=env, cwd=self.base,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        self.pids[key] = proc.pid
        self.save()
        if unix:
            self._wait(lambda: os.path.exists(sock), 15, "slurmrestd unix socket")
            return "unix://" + sock
        url = f"http://127.0.0.1:{port}"

        def listening() -> bool:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                return True
            except OSError:
                return False

        self._wait(listening, 15, "slurmrestd")
        return url

    def rest_user(self) -> tuple[str, str]:
        """User and group slurmrestd drops to. Newer slurmrestd (26.05) refuses
        `-u nobody` ("Unable to resolve user: nobody"); the chroots' Slurm
        packages create an unprivileged `slurm` user (SlurmUser here is root)."""
        return ("slurm", "slurm") if self.in_chroot or self.built else ("nobody", "nogroup")

    def rest_plugins(self) -> str:
        """slurmrestd's -s: 23.11 replaced the per-version openapi/v0.0.x
        plugins by openapi/slurmctld, which serves every version it knows."""
        if _version_tuple(self.slurm_version or self.version) >= (23, 11):
            return "openapi/slurmctld"
        return "openapi/v0.0.38,openapi/v0.0.37,openapi/v0.0.36"

    def token(self, user: str = "root", lifespan: int = 3600) -> str:
        out = self.run("scontrol", "token", f"username={user}", f"lifespan={lifespan}").stdout.strip()
        return out.split("=", 1)[1]

    # -- simulated reboots (RebootProgram) -----------------------------------
    def _reboot_conf(self) -> str:
        """RebootProgram: a script slurmd runs (inside the node's UTS namespace,
        so `uname -n` is the node) that asks this process to reboot the node."""
        os.makedirs(self.reboot_dir, exist_ok=True)
        os.makedirs(self.bin, exist_ok=True)
        path = os.path.join(self.bin, "reboot.sh")
        with open(path, "w") as fh:
            fh.write(f'#!/bin/sh\nnode=$(uname -n)\necho "$(date +%s) $*" > {self.reboot_dir}/.$node.tmp\n'
                     f'mv {self.reboot_dir}/.$node.tmp {self.reboot_dir}/$node\n')
        os.chmod(path, 0o755)
        return f"\nRebootProgram={path}\nResumeTimeout=120\n"

    def _start_reboot_watcher(self) -> None:
        self._reboot_stop = threading.Event()
        threading.Thread(target=self._watch_reboots, args=(self._reboot_stop,), daemon=True,
                         name="slurmcluster-reboots").start()

    def _watch_reboots(self, stop: threading.Event) -> None:
        while not stop.wait(0.3):
            try:
                requests = sorted(e for e in os.listdir(self.reboot_dir) if not e.startswith("."))
            except OSError:
                continue
            for node in requests:
                if node in self.names and f"slurmd-{node}" in self.pids:
                    threading.Thread(target=self.reboot_node, args=(node,), daemon=True).start()
                try:
                    os.unlink(os.path.join(self.reboot_dir, node))
                except OSError:
                    pass

    def reboot_node(self, node: str) -> None:
        """What a real reboot does to a node, as far as Slurm and slurmqual can
        tell: slurmd goes away, the node boots anew (tree), slurmd starts and
        reports a fresh boot."""
        from slurmqual.nodetree import reboot as tree_reboot

        key = f"slurmd-{node}"
        pid = self.pids.get(key)
        if pid:
            _terminate(pid)
        # slurmctld compares boot times in whole seconds with the reboot request's:
        # a slurmd back within the same second looks booted before it (no reboot seen).
        time.sleep(2)
        tree_reboot(self.tree(node))
        if self.on_reboot is not None:
            self.on_reboot(node)
        if self._reboot_stop is not None and self._reboot_stop.is_set():
            return  # the cluster is stopping
        self.reboots.append(node)
        self._spawn(key, self._slurmd_argv(node, fresh_boot=True))

    def _slurmd_argv(self, name: str, fresh_boot: bool = False) -> list[str]:
        # The host's unshare/hostname give slurmd its own UTS namespace; nsenter
        # (for chroot versions) then enters only the mount namespace and root.
        # -b: "Report node rebooted when daemon restarted" (slurmd's own test option).
        slurmd = self.in_root([self.sbin("slurmd"), "-D", *(["-b"] if fresh_boot else []), "-N", name, "-f", self.conf],
                              cwd=self.base)
        probe = subprocess.run(["unshare", "--uts", "true"], capture_output=True)
        if probe.returncode == 0:
            return ["unshare", "--uts", "sh", "-c", f'hostname {name} && exec "$@"', "sh", *slurmd]
        return slurmd  # shared hostname; -N still names the node

    def _spawn(self, key: str, argv: list[str]) -> None:
        """Start a daemon in its own session; argv execs all the way down
        (unshare, nsenter, setpriv, sh -c exec), so its pid is the daemon's."""
        if key != "holder" and not key.startswith("slurmd-"):
            argv = self.in_root(argv, cwd=self.base)
        out = open(os.path.join(self.log, f"{key}.out"), "ab")
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=self.env, start_new_session=True, cwd=self.base)
        self.pids[key] = proc.pid
        self.save()

    def _wait(self, cond, timeout: float, what: str) -> None:
        end = time.monotonic() + timeout * WAIT_SCALE
        while time.monotonic() < end:
            if cond():
                return
            time.sleep(0.2)
        raise RuntimeError(f"timed out waiting for {what}; logs in {self.log}")

    def nodes(self) -> dict[str, dict]:
        """Node records as 22.05's `sinfo --json` writes them (name, state:
        "idle", state_flags: ["DRAIN"], reason, ...) for every version: the
        tests observe Slurm through this, independent of slurmqual's own
        decoders. From 23.02 `sinfo --json` groups nodes, so this reads
        `scontrol show nodes --json` (state a list of upper-case words from 23.11)."""
        if _version_tuple(self.slurm_version or self.version) < (23, 2):
            out = self.run("sinfo", "--json", check=False)
            if out.returncode != 0:
                return {}
            return {n["name"]: n for n in json.loads(out.stdout).get("nodes", [])}
        out = self.run("scontrol", "show", "nodes", "--json", check=False)
        if out.returncode != 0:
            return {}
        nodes = {}
        for n in json.loads(out.stdout).get("nodes", []):
            words = n.get("state") if isinstance(n.get("state"), list) else [n.get("state", "")]
            words = [w.upper() for w in words] + [f.upper() for f in n.get("state_flags", [])]
            base = next((w for w in words if w in _BASE_STATES), "UNKNOWN")
            nodes[n["name"]] = dict(n, state=base.lower(), state_flags=[w for w in words if w != base])
        return nodes

    def _all_up(self) -> bool:
        nodes = self.nodes()
        return len(nodes) == self.n and all(
            n.get("state") in ("idle", "mixed", "allocated") and not {"NOT_RESPONDING"} & set(n.get("state_flags", []))
            for n in nodes.values())

    def wait_for(self, cond, timeout: float = 60, what: str = "condition") -> None:
        self._wait(cond, timeout, what)

    def save(self) -> None:
        os.makedirs(self.base, exist_ok=True)
        with open(os.path.join(self.base, "cluster.json"), "w") as fh:
            json.dump({"pids": self.pids, "nodes": self.n, "version": self.version, "root": self.root,
                       "prefix": self.prefix}, fh)

    @classmethod
    def load(cls, base: str) -> "Cluster":
        with open(os.path.join(base, "cluster.json")) as fh:
            data = json.load(fh)
        c = cls(base, data["nodes"], version=data.get("version", HOST_VERSION))
        c.pids = data["pids"]
        c.root = data.get("root")
        c.prefix = data.get("prefix")
        return c

    def stop(self) -> None:
        """Stop our own daemons by pid: slurmds first, then slurmctld, then munged."""
        if self._reboot_stop is not None:
            self._reboot_stop.set()
        # In stages (slurmrestd, every slurmd, slurmctld, munged, the holder),
        # all of a stage at once: eight slurmds stop in the time of one.
        stage = lambda k: (k == "holder", not k.startswith("slurmrestd"),  # noqa: E731
                           not k.startswith("slurmd-"), k == "munged")
        for key in sorted({stage(k) for k in self.pids}):
            pids = [pid for k, pid in self.pids.items() if stage(k) == key]
            for pid in pids:
                _kill(pid, signal.SIGTERM)
            for pid, went in zip(pids, _wait_gone(pids)):
                if not went:
                    try:
                        os.killpg(pid, signal.SIGKILL)  # slurmstepd ignores SIGTERM
                    except OSError:
                        pass
        self.pids = {}
        self.save()
        keep = os.environ.get("SLURMQUAL_KEEP_CLUSTER_LOGS")
        if keep and os.path.isdir(self.log):  # the daemons' and hooks' logs, for a failure seen later
            shutil.copytree(self.log, os.path.join(keep, f"{os.path.basename(self.base)}-{self.version}"),
                            dirs_exist_ok=True)


_BASE_STATES = ("IDLE", "ALLOCATED", "MIXED", "DOWN", "ERROR", "FUTURE", "UNKNOWN")


def _version_tuple(version: str) -> tuple[int, int]:
    """(24, 11) from "24.11.5"; "newest" sorts after every release."""
    m = re.match(r"(\d+)\.(\d+)", version)
    return (int(m.group(1)), int(m.group(2))) if m else (99, 99)


def _terminate(pid: int, grace: float = 10.0) -> bool:
    """SIGTERM, up to `grace` seconds for it to go, then SIGKILL. True when it
    went by itself."""
    _kill(pid, signal.SIGTERM)
    return _wait_gone([pid], grace)[0]


def _wait_gone(pids: list[int], grace: float = 10.0) -> list[bool]:
    """Up to `grace` seconds for every (already signalled) pid to go, then
    SIGKILL the rest; per pid, True when it went by itself."""
    end = time.monotonic() + grace
    while time.monotonic() < end and any(_alive(pid) for pid in pids):
        time.sleep(0.1)
    went = [not _alive(pid) for pid in pids]
    for pid, gone in zip(pids, went):
        if not gone:
            _kill(pid, signal.SIGKILL)
    return went


def _alive(pid: int) -> bool:
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except OSError:
        pass


def main(argv: list[str]) -> int:
    import argparse

    sys.path.insert(0, REPO)
    ap = argparse.ArgumentParser(description="local Slurm cluster for slurmqual tests and demo")
    ap.add_argument("action", choices=("up", "down"))
    ap.add_argument("dir")
    ap.add_argument("--nodes", type=int, default=6)
    ap.add_argument("--version", default=HOST_VERSION, choices=VERSIONS,
                    help="Slurm to run: the host's 22.05, a cached Debian chroot's, or one built from source")
    args = ap.parse_args(argv)
    if args.action == "up":
        if os.path.exists(args.dir) and os.path.exists(os.path.join(args.dir, "cluster.json")):
            Cluster.load(args.dir).stop()
        c = Cluster(args.dir, args.nodes, version=args.version).start()
        path = f" PATH={c.client_bin}:$PATH" if c.in_chroot else f" PATH={os.path.dirname(c.tool('scontrol'))}:$PATH" if c.built else ""
        print(f"export SLURM_CONF={c.conf} SLURMQUAL_CONFIG={c.sq_config}{path}")
        return 0
    Cluster.load(args.dir).stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
