#!/usr/bin/env python3
"""A real, local Slurm cluster for tests and the demo: Debian's munge,
slurmctld and one slurmd per simulated node, all on loopback.

Each node `nX` runs `slurmd -N nX` inside its own UTS namespace (so it sees
hostname nX), uses free TCP ports, and has its own node tree as `/` through
the slurmqual site config (`node.root = "<dir>/trees/{node}"`), so one node
can be broken while the others stay healthy. Daemons are stopped by pid only.

    python3 tests/slurmcluster.py up DIR [--nodes 6]   # prints `export SLURM_CONF=...`
    python3 tests/slurmcluster.py down DIR
"""

from __future__ import annotations

import json
import os
import pwd
import random
import shutil
import signal
import socket
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DAEMONS = ("/usr/sbin/munged", "/usr/sbin/slurmctld", "/usr/sbin/slurmd")


def missing_requirements() -> str | None:
    """Why a real cluster cannot run here, or None."""
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


def _free_port_block(count: int) -> int:
    """First of `count` consecutive free TCP ports on 127.0.0.1 (several clusters may run at once)."""
    for _ in range(200):
        base = random.randrange(20000, 60000 - count)
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

    def __init__(self, base: str, nodes: int = 6, health_interval: int = 5, python: str | None = None):
        self.base = os.path.abspath(base)
        self.n = nodes
        self.names = [f"n{i}" for i in range(1, nodes + 1)]
        self.health_interval = health_interval
        self.python = python or sys.executable
        self.conf = os.path.join(self.base, "etc", "slurm.conf")
        self.sq_config = os.path.join(self.base, "etc", "slurmqual.toml")
        self.trees = os.path.join(self.base, "trees")
        self.state_dir = os.path.join(self.base, "state")
        self.log = os.path.join(self.base, "log")
        self.bin = os.path.join(self.base, "bin")
        self.pids: dict[str, int] = {}

    # -- environment for clients ------------------------------------------
    @property
    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["SLURM_CONF"] = self.conf
        env["SLURMQUAL_CONFIG"] = self.sq_config
        env["SLURMQUAL_CACHE_DIR"] = os.path.join(self.base, "cache")
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
        munge = pwd.getpwnam("munge")
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
        for hook, rel in (("prolog", "prolog/slurmqual-prolog"), ("epilog", "epilog/slurmqual-epilog"),
                          ("healthcheck", "healthcheck/slurmqual-healthcheck")):
            path = os.path.join(self.bin, f"{hook}.sh")
            with open(path, "w") as fh:
                fh.write(f"#!/bin/sh\nSLURMQUAL_CONFIG={self.sq_config} SLURMQUAL_PYTHON={self.python} "
                         f"SLURMQUAL_CACHE_DIR={self.base}/cache exec {REPO}/{rel} \"$@\"\n")
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
        self.fabric({})
        for p in (self.sq_config, self.conf):
            os.chmod(p, 0o644)

    def _write_slurm_wrappers(self) -> None:
        """slurmqual's Slurm calls go through these: each logs its argv to
        log/slurm-calls.log, then runs the real tool. Tests use the log to
        prove, e.g., that a passing prolog made no slurmctld call."""
        d = os.path.join(self.base, "slurm-bin")
        os.makedirs(d, exist_ok=True)
        for tool in ("scontrol", "sinfo", "squeue", "sbatch", "scancel", "srun", "sacct"):
            path = os.path.join(d, tool)
            with open(path, "w") as fh:
                fh.write(f'#!/bin/sh\necho "$(date +%s.%N) ${{SLURMD_NODENAME:-}} ${{SLURMQUAL_HOOK:-cli}} {tool} $*" >> {self.log}/slurm-calls.log\n'
                         f'exec /usr/bin/{tool} "$@"\n')
            os.chmod(path, 0o755)

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
    def start(self, extra_conf: str = "", sq_extra: str = "", jwt: bool = False) -> "Cluster":
        why = missing_requirements()
        if why:
            raise RuntimeError(why)
        if jwt:  # slurmrestd with rest_auth/jwt needs auth/jwt as an alternative auth type
            os.makedirs(os.path.join(self.base, "etc"), exist_ok=True)
            key = os.path.join(self.base, "etc", "jwt.key")
            with open(key, "wb") as fh:
                fh.write(os.urandom(64))
            os.chmod(key, 0o600)
            extra_conf += f"\nAuthAltTypes=auth/jwt\nAuthAltParameters=jwt_key={key}\n"
        self._write_files(extra_conf, sq_extra)
        mdir = os.path.join(self.base, "munge")
        self._spawn("munged", ["runuser", "-u", "munge", "--", "/usr/sbin/munged", "--foreground",
                               f"--socket={mdir}/munge.socket", f"--key-file={mdir}/munge.key",
                               f"--pid-file={mdir}/munged.pid", f"--log-file={mdir}/munged.log",
                               f"--seed-file={mdir}/munged.seed"])
        self._wait(lambda: os.path.exists(f"{mdir}/munge.socket"), 10, "munged socket")
        self._spawn("slurmctld", ["/usr/sbin/slurmctld", "-D", "-c", "-f", self.conf])
        self._wait(lambda: self.run("scontrol", "ping", check=False).returncode == 0, 20, "slurmctld")
        for name in self.names:
            os.makedirs(os.path.join(self.base, "spool", name), exist_ok=True)
            self._spawn(f"slurmd-{name}", self._slurmd_argv(name))
        self._wait(lambda: self._all_up(), 30, "slurmd nodes")
        self.save()
        return self

    def start_rest(self, unix: bool = False) -> str:
        """slurmrestd on a free loopback port, or with unix=True on a unix socket
        (JWT auth, as user nobody); returns its URL (http://... or unix:///...)."""
        port = _free_port_block(1)
        env = dict(self.env, SLURM_JWT="daemon")
        key = "slurmrestd-unix" if unix else "slurmrestd"
        listen = f"127.0.0.1:{port}"
        if unix:  # slurmrestd binds after dropping to nobody: give it a directory it may write
            sock_dir = os.path.join(self.base, "restd")
            os.makedirs(sock_dir, exist_ok=True)
            os.chown(sock_dir, pwd.getpwnam("nobody").pw_uid, -1)
            os.chmod(self.base, os.stat(self.base).st_mode | 0o711)
            sock = os.path.join(sock_dir, "slurmrestd.sock")
            listen = f"unix:{sock}"
        out = open(os.path.join(self.log, f"{key}.out"), "ab")
        proc = subprocess.Popen(["/usr/sbin/slurmrestd", "-f", self.conf, "-u", "nobody", "-g", "nogroup",
                                 "-s", "openapi/v0.0.38,openapi/v0.0.37,openapi/v0.0.36", "-a", "rest_auth/jwt",
                                 listen], stdout=out, stderr=subprocess.STDOUT, env=env,
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

    def token(self, user: str = "root", lifespan: int = 3600) -> str:
        out = self.run("scontrol", "token", f"username={user}", f"lifespan={lifespan}").stdout.strip()
        return out.split("=", 1)[1]

    def _slurmd_argv(self, name: str) -> list[str]:
        slurmd = ["/usr/sbin/slurmd", "-D", "-N", name, "-f", self.conf]
        probe = subprocess.run(["unshare", "--uts", "true"], capture_output=True)
        if probe.returncode == 0:
            return ["unshare", "--uts", "sh", "-c", f'hostname {name} && exec "$@"', "sh", *slurmd]
        return slurmd  # shared hostname; -N still names the node

    def _spawn(self, key: str, argv: list[str]) -> None:
        out = open(os.path.join(self.log, f"{key}.out"), "ab")
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=self.env, start_new_session=True)
        self.pids[key] = proc.pid

    def _wait(self, cond, timeout: float, what: str) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if cond():
                return
            time.sleep(0.2)
        raise RuntimeError(f"timed out waiting for {what}; logs in {self.log}")

    def nodes(self) -> dict[str, dict]:
        out = self.run("sinfo", "--json", check=False)
        if out.returncode != 0:
            return {}
        return {n["name"]: n for n in json.loads(out.stdout).get("nodes", [])}

    def _all_up(self) -> bool:
        nodes = self.nodes()
        return len(nodes) == self.n and all(
            n.get("state") in ("idle", "mixed", "allocated") and not {"NOT_RESPONDING"} & set(n.get("state_flags", []))
            for n in nodes.values())

    def wait_for(self, cond, timeout: float = 60, what: str = "condition") -> None:
        self._wait(cond, timeout, what)

    def save(self) -> None:
        with open(os.path.join(self.base, "cluster.json"), "w") as fh:
            json.dump({"pids": self.pids, "nodes": self.n}, fh)

    @classmethod
    def load(cls, base: str) -> "Cluster":
        with open(os.path.join(base, "cluster.json")) as fh:
            data = json.load(fh)
        c = cls(base, data["nodes"])
        c.pids = data["pids"]
        return c

    def stop(self) -> None:
        """Stop our own daemons by pid: slurmds first, then slurmctld, then munged."""
        order = sorted(self.pids, key=lambda k: (not k.startswith("slurmrestd"), not k.startswith("slurmd-"), k == "munged"))
        for key in order:
            pid = self.pids[key]
            _kill(pid, signal.SIGTERM)
            end = time.monotonic() + 10
            while time.monotonic() < end and _alive(pid):
                time.sleep(0.1)
            if _alive(pid):
                _kill(pid, signal.SIGKILL)
                try:
                    os.killpg(pid, signal.SIGKILL)  # slurmstepd ignores SIGTERM
                except OSError:
                    pass
        self.pids = {}
        self.save()


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
    args = ap.parse_args(argv)
    if args.action == "up":
        if os.path.exists(args.dir) and os.path.exists(os.path.join(args.dir, "cluster.json")):
            Cluster.load(args.dir).stop()
        c = Cluster(args.dir, args.nodes).start()
        print(f"export SLURM_CONF={c.conf} SLURMQUAL_CONFIG={c.sq_config}")
        return 0
    Cluster.load(args.dir).stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
