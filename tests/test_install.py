"""`slurmqual install` and `install --check` on a real filesystem (as root):
the wrappers it writes run the real prolog with slurmd's empty environment,
and --check finds each broken piece an admin can hit, with a fix."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

from hostile import isolated_records
from slurmqual.nodetree import build

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

pytestmark = [pytest.mark.skipif(os.geteuid() != 0, reason="install manages root-owned files: run as root"),
              pytest.mark.usefixtures("real_logrotate")]


def sq(*args: str, check: bool = False) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "slurmqual", "install", *args], capture_output=True, text=True,
                          timeout=300, cwd="/")
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


class Node:
    """One node's install in a temp dir: prefix, config, cache, state and log
    paths are all under it, so nothing outside is touched."""

    def __init__(self, tmp_path, healthy_tree: bool = True):
        os.chmod(tmp_path, 0o755)
        self.t = tmp_path
        self.prefix = str(tmp_path / "opt")
        self.config = str(tmp_path / "etc" / "config.toml")
        self.cache = str(tmp_path / "cache")
        self.state = str(tmp_path / "state")
        self.slurm_conf = str(tmp_path / "slurm.conf")
        self.tree = build("h100-roce-healthy", str(tmp_path / "tree")) if healthy_tree else None

    def write_config(self) -> None:
        os.makedirs(os.path.dirname(self.config), exist_ok=True)
        with open(self.config, "w") as fh:
            fh.write(f'[node]\nroot = "{self.tree}"\ngpus = 8\n[fabric]\nnics = 8\n'
                     f'[hooks]\nsyslog = false\nlog_file = "{self.t}/log/slurmqual.log"\nstate_dir = "{self.state}"\n')
        os.chmod(self.config, 0o644)

    def args(self, *extra: str) -> list[str]:
        return ["--prefix", self.prefix, "--config", self.config, "--cache-dir", self.cache, *extra]

    def write_slurm_conf(self, drop: str | None = None) -> None:
        snippet = sq("--snippet", "--prefix", self.prefix, check=True).stdout
        lines = [ln for ln in snippet.splitlines() if not (drop and ln.startswith(drop + "="))]
        with open(self.slurm_conf, "w") as fh:
            fh.write("ClusterName=test\nSlurmctldHost=head\nNodeName=n1 CPUs=2 State=UNKNOWN\n")
            fh.write("\n".join(lines) + "\n")

    def check(self, *extra: str) -> subprocess.CompletedProcess:
        return sq("--check", *self.args("--slurm-conf", self.slurm_conf, "--node", "n1", *extra))


def installed(tmp_path, **slurm_conf) -> Node:
    """A node with slurmqual installed and the snippet in its slurm.conf."""
    node = Node(tmp_path)
    node.write_config()
    sq(*node.args(), check=True)
    node.write_slurm_conf(**slurm_conf)
    return node


def problems(out: str) -> list[str]:
    return [ln for ln in out.splitlines() if ln.startswith("PROBLEM")]


def tree_state(root) -> dict:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            out[p] = (st.st_mode, st.st_uid, st.st_mtime_ns, st.st_size)
    return out


def test_fresh_install_writes_example_config_wrappers_dirs_logrotate(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    os.chmod(tmp_path, 0o755)
    proc = sq("--root", str(root), check=True)
    config = root / "etc/slurmqual/config.toml"
    with open(os.path.join(REPO, "config", "slurmqual.toml")) as fh:
        assert config.read_text() == fh.read()  # the annotated example, byte for byte
    st = config.stat()
    assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (0o644, 0, 0)
    for d in ("var/lib/slurmqual/state", "var/log/slurmqual", "var/cache/slurmqual"):
        st = (root / d).stat()
        assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o755 and st.st_uid == 0, d
    for hook in ("prolog", "epilog", "healthcheck"):
        w = root / f"opt/slurmqual/libexec/{hook}/slurmqual-{hook}"
        assert stat.S_IMODE(w.stat().st_mode) == 0o755
        text = w.read_text()
        assert f"from slurmqual.hookscripts import {hook}; sys.exit({hook}())" in text and f"PY={sys.executable}" in text
    rotate = (root / "etc/logrotate.d/slurmqual").read_text()
    assert rotate.startswith("# slurmqual") and "/var/log/slurmqual/slurmqual.log {" in rotate
    assert "write file 0644 root:root: /etc/slurmqual/config.toml" in proc.stdout


def test_install_is_idempotent_and_dry_run_changes_nothing(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    os.chmod(tmp_path, 0o755)
    dry = sq("--root", str(root), "--dry-run", check=True)
    assert "would write file 0755 root:root: /opt/slurmqual/libexec/prolog/slurmqual-prolog" in dry.stdout
    assert os.listdir(root) == []
    sq("--root", str(root), check=True)
    before = tree_state(root)
    again = sq("--root", str(root), check=True)
    assert "nothing to do" in again.stdout
    assert tree_state(root) == before
    assert "nothing to do" in sq("--root", str(root), "--dry-run", check=True).stdout


def test_install_keeps_an_existing_config_and_fixes_its_mode(tmp_path):
    node = Node(tmp_path)
    node.write_config()
    mine = open(node.config).read()
    os.chmod(node.config, 0o666)
    # Anyone could have edited it: install fixes the mode but acts on nothing it says yet.
    proc = sq(*node.args())
    assert proc.returncode == 1
    assert "fix mode 0666 -> 0644" in proc.stdout and "review it" in proc.stderr
    assert open(node.config).read() == mine
    assert stat.S_IMODE(os.stat(node.config).st_mode) == 0o644
    assert not os.path.exists(node.state) and not os.path.exists(node.prefix)
    sq(*node.args(), check=True)
    assert os.path.isdir(node.state) and open(node.config).read() == mine


def test_install_refuses_an_invalid_config(tmp_path):
    node = Node(tmp_path)
    node.write_config()
    with open(node.config, "a") as fh:
        fh.write("[hooks.bogus]\nx = 1\n")
    proc = sq(*node.args())
    assert proc.returncode == 2
    assert "config is invalid" in proc.stderr and "bogus" in proc.stderr
    assert not os.path.exists(node.prefix)  # nothing half-installed


def test_check_passes_on_a_good_install_and_runs_the_prolog_like_slurmd(tmp_path):
    node = installed(tmp_path)
    proc = node.check()
    assert proc.returncode == 0, proc.stdout
    assert problems(proc.stdout) == []
    assert "ok       prolog run: exit 0" in proc.stdout and "no PATH and no SLURM_CONF" in proc.stdout
    # The run went through the wrapper into the real hook: it recorded the node's state.
    assert os.path.exists(os.path.join(node.state, "nodes", "n1.json"))


def test_check_finds_world_writable_config(tmp_path):
    node = installed(tmp_path)
    os.chmod(node.config, 0o666)
    proc = node.check("--no-hook-run")
    assert proc.returncode == 1
    found = [p for p in problems(proc.stdout) if "site config" in p]
    assert found and "writable by group/others (mode 0666)" in found[0]
    assert f"chmod 0644 {node.config}" in proc.stdout
    # ...and install puts it right (then stops for a review of the content).
    assert sq(*node.args()).returncode == 1
    assert node.check("--no-hook-run").returncode == 0


def test_check_finds_missing_state_dir(tmp_path):
    node = installed(tmp_path)
    os.rmdir(node.state)
    proc = node.check("--no-hook-run")
    assert proc.returncode == 1
    assert f"PROBLEM  state dir: {node.state} is missing" in proc.stdout
    assert "fix: slurmqual install" in proc.stdout
    sq(*node.args(), check=True)
    assert os.path.isdir(node.state) and node.check("--no-hook-run").returncode == 0


@pytest.mark.parametrize("key", ["HealthCheckProgram", "Prolog", "PrologEpilogTimeout"])
def test_check_finds_a_missing_snippet_line(tmp_path, key):
    node = installed(tmp_path, drop=key)
    proc = node.check("--no-hook-run")
    assert proc.returncode == 1
    assert f"PROBLEM  slurm.conf {key}: {node.slurm_conf} has no {key}= line" in proc.stdout
    assert "slurmqual install --snippet" in proc.stdout


def test_check_finds_hook_pointing_elsewhere_and_short_timeout(tmp_path):
    node = installed(tmp_path)
    text = open(node.slurm_conf).read()
    text = text.replace(f"Epilog={node.prefix}/libexec/epilog/slurmqual-epilog", "Epilog=/etc/slurm/epilog.sh")
    text = text.replace("PrologEpilogTimeout=120", "PrologEpilogTimeout=20")
    open(node.slurm_conf, "w").write(text)
    out = node.check("--no-hook-run").stdout
    assert "PROBLEM  slurm.conf Epilog: Epilog=/etc/slurm/epilog.sh, not slurmqual's epilog hook" in out
    assert "PROBLEM  slurm.conf prolog timeout: 20s (PrologEpilogTimeout) is not above the hooks' deadline (40s" in out


def edit_conf(node, **keys) -> None:
    """Set (value) or remove (None) slurm.conf keys of an installed node."""
    lines = [ln for ln in open(node.slurm_conf).read().splitlines() if ln.split("=", 1)[0] not in keys]
    open(node.slurm_conf, "w").write("\n".join(lines + [f"{k}={v}" for k, v in keys.items() if v is not None]) + "\n")


@pytest.mark.parametrize("version,keys,want", [
    ("24.11", {"PrologEpilogTimeout": "20"}, "prolog timeout: 20s (PrologEpilogTimeout) is not above"),
    ("26.05", {"PrologTimeout": "20"}, "prolog timeout: 20s (PrologTimeout) is not above"),
    ("25.05", {"EpilogTimeout": "35"}, "epilog timeout: 35s (EpilogTimeout) is not above"),
    ("24.11", {"PrologTimeout": "300"}, "prologtimeout: Slurm 24.11 does not know this key (it is 25.05+)"),
    ("26.05", {"HealthCheckTimeout": "30"}, "healthcheck timeout: 30s (HealthCheckTimeout) is not above"),
    ("25.11", {"HealthCheckTimeout": "300"}, "healthchecktimeout: Slurm 25.11 does not know this key (it is 26.05+)"),
    ("25.11", {"HealthCheckNodeState": "REBOOT_ONLY"}, "REBOOT_ONLY is 26.05+, not known to Slurm 25.11"),
    ("25.11", {"HealthCheckNodeState": "START_ONLY"}, "START_ONLY stops the periodic health checks"),
    ("26.05", {"HealthCheckNodeState": "REBOOT_ONLY"}, "REBOOT_ONLY stops the periodic health checks"),
])
def test_check_knows_each_slurm_versions_hook_settings(tmp_path, version, keys, want):
    node = installed(tmp_path)
    edit_conf(node, **keys)
    proc = node.check("--no-hook-run", "--slurm-version", version)
    assert proc.returncode == 1 and any(want in p for p in problems(proc.stdout)), proc.stdout


@pytest.mark.parametrize("version,keys", [
    ("22.05", {}), ("26.05", {}),
    ("26.05", {"PrologEpilogTimeout": "20", "PrologTimeout": "120", "EpilogTimeout": "120"}),  # both overridden
    ("26.05", {"HealthCheckTimeout": "0"}),    # 0 is reset to the default 60 s
])
def test_check_accepts_settings_that_outlast_the_hooks(tmp_path, version, keys):
    node = installed(tmp_path)
    edit_conf(node, **keys)
    proc = node.check("--no-hook-run", "--slurm-version", version)
    assert problems(proc.stdout) == [] and proc.returncode == 0, proc.stdout
    assert "ok       slurm.conf prolog timeout:" in proc.stdout


def test_reboot_program_is_needed_only_when_the_ladder_may_reboot():
    from slurmqual import slurmconf
    from slurmqual.nodeinstall.check import ladder_may_reboot
    from slurmqual.config import Config

    def problems_of(conf, may):
        return [w for ok, w, _d, _f in slurmconf.findings(conf, (26, 5), 40.0, may) if not ok]

    assert problems_of({}, True) == ["slurm.conf RebootProgram"]
    assert problems_of({"rebootprogram": "/usr/sbin/reboot"}, True) == [] and problems_of({}, False) == []
    assert ladder_may_reboot(Config({"remediation": {"enabled": True}}, None))
    assert not ladder_may_reboot(Config({"remediation": {"enabled": True, "xid": {"79": "drain"}}}, None))
    assert ladder_may_reboot(Config({"remediation": {"enabled": True, "checks": {"gpu_count": "reboot"}}}, None))
    assert not ladder_may_reboot(Config({}, None))


def test_check_follows_include_lines(tmp_path):
    node = installed(tmp_path)
    snippet = open(node.slurm_conf).read()
    with open(tmp_path / "slurmqual.conf", "w") as fh:
        fh.write(snippet)
    with open(node.slurm_conf, "w") as fh:
        fh.write("ClusterName=test\nInclude slurmqual.conf\n")
    proc = node.check("--no-hook-run")
    assert proc.returncode == 0, proc.stdout


def test_check_finds_a_hook_that_cannot_find_python(tmp_path):
    node = Node(tmp_path)
    node.write_config()
    gone = str(tmp_path / "old-venv" / "bin" / "python3")
    sq(*node.args("--python", gone), check=True)
    node.write_slurm_conf()
    proc = node.check()
    assert proc.returncode == 1
    assert f"PROBLEM  prolog hook python: {node.prefix}/libexec/prolog/slurmqual-prolog runs {gone}, which does not exist" \
        in proc.stdout
    # The real run, as slurmd would do it, shows the hook silently doing nothing.
    assert "PROBLEM  prolog run: the hook cannot find Python/slurmqual" in proc.stdout
    # Re-running install with the right python rewrites the wrappers.
    fixed = sq(*node.args(), check=True)
    assert "rewrite file 0755" in fixed.stdout
    assert node.check().returncode == 0


def test_check_finds_python_without_slurmqual(tmp_path):
    node = Node(tmp_path)
    node.write_config()
    bare = tmp_path / "bare"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", str(bare)], check=True)
    sq(*node.args("--python", str(bare / "bin" / "python3")), check=True)
    node.write_slurm_conf()
    proc = node.check()
    assert proc.returncode == 1
    assert "cannot import slurmqual: ModuleNotFoundError: No module named 'slurmqual'" in proc.stdout


def test_wrapper_ignores_pythonpath_and_runs_with_empty_environment(tmp_path):
    node = Node(tmp_path)
    node.write_config()
    sq(*node.args(), check=True)
    evil = tmp_path / "evil"
    (evil / "slurmqual").mkdir(parents=True)
    (evil / "slurmqual" / "__init__.py").write_text("raise SystemExit('hijacked')\n")
    wrapper = os.path.join(node.prefix, "libexec", "prolog", "slurmqual-prolog")
    proc = subprocess.run([wrapper], env={"SLURMD_NODENAME": "n1", "PYTHONPATH": str(evil), **isolated_records()}, cwd=str(evil),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "hijacked" not in proc.stderr
    assert os.path.exists(os.path.join(node.state, "nodes", "n1.json"))


def test_snippet_follows_prefix():
    out = sq("--snippet", "--prefix", "/srv/sq", check=True).stdout
    assert "Prolog=/srv/sq/libexec/prolog/slurmqual-prolog" in out
    assert "Prolog=/opt/slurmqual" not in out and "HealthCheckProgram=/srv/sq/libexec/healthcheck/" in out


def test_check_finds_scheduler_parameters_without_nohold_on_prolog_fail(tmp_path):
    node = installed(tmp_path)
    with open(node.slurm_conf, "a") as fh:  # a site's own line, later in slurm.conf, replaces the snippet's
        fh.write("SchedulerParameters=bf_continue,bf_window=4320\nPrologFlags=Alloc,Contain,DeferBatch\n")
    out = node.check("--no-hook-run").stdout
    assert ("PROBLEM  slurm.conf SchedulerParameters: SchedulerParameters=bf_continue,bf_window=4320 "
            "lacks nohold_on_prolog_fail") in out
    assert "ok       slurm.conf PrologFlags: Alloc,Contain,DeferBatch" in out


def test_versioned_prefixes_behind_a_symlink_upgrade_and_roll_back(tmp_path):
    """The upgrade the admin guide describes: each version in its own prefix,
    slurm.conf names the symlink, flipping the symlink switches (or rolls
    back) every hook at once; --check judges whatever the symlink points at."""
    node = Node(tmp_path)
    node.write_config()
    current = str(tmp_path / "slurmqual")
    v1, v2 = str(tmp_path / "slurmqual-1"), str(tmp_path / "slurmqual-2")
    sq("--prefix", v1, "--config", node.config, "--cache-dir", node.cache, check=True)
    sq("--prefix", v2, "--config", node.config, "--cache-dir", node.cache,
       "--python", str(tmp_path / "slurmqual-2" / "bin" / "python3"), check=True)  # a broken new version
    os.symlink("slurmqual-1", current)
    node.prefix = current
    node.write_slurm_conf()
    assert f"Prolog={current}/libexec/prolog/slurmqual-prolog" in open(node.slurm_conf).read()
    assert sq(*node.args(), check=True).stdout.strip().endswith("up to date")  # the symlinked prefix is fine
    assert node.check().returncode == 0

    def flip(target: str) -> None:
        os.symlink(target, current + ".new")
        os.replace(current + ".new", current)  # atomic: a hook starting now sees one version or the other

    flip("slurmqual-2")
    bad = node.check()
    assert bad.returncode == 1 and "PROBLEM  prolog run: the hook cannot find Python/slurmqual" in bad.stdout
    flip("slurmqual-1")
    assert node.check().returncode == 0


UNITS = "etc/systemd/system"
SERVICE, TIMER = "slurmqual-requalify-swapped.service", "slurmqual-requalify-swapped.timer"


def test_head_node_units_are_opt_in_written_with_this_venv_idempotent_and_dry_run(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    os.chmod(tmp_path, 0o755)
    sq("--root", str(root), check=True)
    assert not (root / UNITS).exists()   # a compute node's install writes no units
    dry = sq("--root", str(root), "--head-node", "--dry-run", check=True)
    assert f"would write file 0644 root:root: /etc/systemd/system/{SERVICE}" in dry.stdout
    assert f"would link -> /etc/systemd/system/{TIMER}: /etc/systemd/system/timers.target.wants/{TIMER}" in dry.stdout
    assert not (root / UNITS).exists()
    sq("--root", str(root), "--head-node", check=True)
    service = (root / UNITS / SERVICE).read_text()
    assert f"ExecStart={sys.executable} -I -m slurmqual requalify --swapped\n" in service
    assert service.startswith("# Written by `slurmqual install --head-node`")
    for name in (SERVICE, TIMER):
        st = (root / UNITS / name).stat()
        assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (0o644, 0, 0)
    assert "OnUnitInactiveSec=15min" in (root / UNITS / TIMER).read_text()
    assert os.readlink(root / UNITS / "timers.target.wants" / TIMER) == f"/etc/systemd/system/{TIMER}"
    before = tree_state(root)
    assert "nothing to do" in sq("--root", str(root), "--head-node", check=True).stdout
    assert tree_state(root) == before
    # A moved venv: the units follow the python install is run with.
    moved = sq("--root", str(root), "--head-node", "--python", "/opt/sq2/bin/python3", check=True).stdout
    assert f"rewrite file 0644 root:root (content changed): /etc/systemd/system/{SERVICE}" in moved
    assert "ExecStart=/opt/sq2/bin/python3 -I -m slurmqual requalify --swapped\n" in (root / UNITS / SERVICE).read_text()


def test_head_node_units_pass_systemd_analyze_verify(tmp_path):
    import shutil

    from slurmqual.nodeinstall.check import verify_units

    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed here: the units' syntax is not verified")
    node = Node(tmp_path, healthy_tree=False)
    node.write_config()
    root = tmp_path / "root"
    root.mkdir()
    sq("--root", str(root), "--config", node.config, "--head-node", check=True)
    units = [str(root / UNITS / n) for n in (SERVICE, TIMER)]
    assert f"--config {node.config}\n" in open(units[0]).read()
    good = verify_units(shutil.which("systemd-analyze"), units)   # what install --check runs on a head node
    assert good.ok and good.detail == "systemd-analyze verify: no complaints", good
    # ... and it does complain when ExecStart's python is gone (the verify is a real one).
    sq("--root", str(root), "--config", node.config, "--head-node", "--python", str(tmp_path / "gone" / "python3"),
       check=True)
    bad = verify_units(shutil.which("systemd-analyze"), units)
    assert not bad.ok and f"Command {tmp_path}/gone/python3 is not executable" in bad.detail, bad


def test_check_verifies_the_head_node_units_when_installed(tmp_path):
    node = installed(tmp_path)
    plain = node.check("--no-hook-run")
    assert plain.returncode == 0 and "head-node unit" not in plain.stdout and "requalify timer" not in plain.stdout
    # Never the machine's own /etc/systemd: a head node's tree, checked under --root, its venv inside it.
    root = tmp_path / "root"
    (root / "venv" / "bin").mkdir(parents=True)
    os.symlink(sys.executable, root / "venv" / "bin" / "python3")
    sq("--root", str(root), "--head-node", "--python", "/venv/bin/python3", check=True)
    (root / "etc" / "slurm").mkdir(parents=True)
    (root / "etc" / "slurm" / "slurm.conf").write_text("ClusterName=test\n" + sq("--snippet", check=True).stdout)

    def check_root():
        return sq("--check", "--root", str(root), "--no-hook-run", "--node", "n1", "--slurm-version", "24.11")

    good = check_root()
    assert good.returncode == 0, good.stdout
    assert f"ok       head-node unit: /etc/systemd/system/{SERVICE}" in good.stdout
    assert "ok       requalify timer python: /venv/bin/python3" in good.stdout
    assert f"ok       requalify timer: enabled (/etc/systemd/system/timers.target.wants/{TIMER})" in good.stdout
    assert "systemd-analyze verify skipped (" in good.stdout
    os.unlink(root / UNITS / "timers.target.wants" / TIMER)
    os.chmod(root / UNITS / SERVICE, 0o666)
    bad = check_root()
    assert bad.returncode == 1
    assert f"PROBLEM  requalify timer: {TIMER} is not enabled" in bad.stdout
    assert f"PROBLEM  head-node unit: {root}/{UNITS}/{SERVICE} is writable by group/others (mode 0666)" in bad.stdout
    assert "fix: slurmqual install --head-node" in bad.stdout
    sq("--root", str(root), "--head-node", "--python", "/gone/bin/python3", check=True)   # puts both right
    gone = check_root()
    assert gone.returncode == 1 and "requalify timer: enabled" in gone.stdout
    assert f"PROBLEM  requalify timer python: /etc/systemd/system/{SERVICE} runs /gone/bin/python3, " \
           "which does not exist: swapped nodes stay drained" in gone.stdout, gone.stdout
    assert "fix: reinstall slurmqual into that venv, or re-run `slurmqual install --head-node`" in gone.stdout
