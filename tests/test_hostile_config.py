"""Hostile configs, config caches, state and log directories: what root does
with files other users can change. Each case asserts the clean outcome: a
clear log line, no drain, nothing written outside the intended path."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hostile import as_user, open_tmp, other_user  # noqa: F401 - open_tmp is a fixture
from slurmqual import config as cfgmod
from slurmqual import hooklog, hooks, nodestate
from slurmqual.config import ConfigError, ConfigRefused, load
from slurmqual.nodetree import build
from slurmqual.security import UnsafePath, check_root_only

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="ownership rules apply when running as root")


@pytest.fixture(autouse=True)
def _fresh_logger(monkeypatch, tmp_path):
    import logging

    log = logging.getLogger("slurmqual")

    def clear():
        for h in list(log.handlers):
            log.removeHandler(h)
            h.close()
        log.propagate = True  # else pytest 9 hangs its capture handlers on it and setup() sees "already set up"

    clear()
    # No syslog here: what the hook logs goes to the file or stderr we read.
    monkeypatch.setattr(hooklog, "SYSLOG_SOCKET", str(tmp_path / "no-syslog"))
    monkeypatch.setenv("SLURMQUAL_CACHE_DIR", str(tmp_path / "cache"))
    yield
    clear()


def site(tmp_path, extra: str = "", state_dir: str | None = None, log_file: str | None = None):
    """A node tree, a stub scontrol recording every call, and a site config."""
    os.chmod(tmp_path, 0o755)
    root = build("h100-roce-healthy", str(tmp_path / "tree"))
    bindir = tmp_path / "bin"
    bindir.mkdir()
    calls = tmp_path / "calls.log"
    (bindir / "scontrol").write_text(f'#!/bin/sh\necho "$*" >> {calls}\n'
                                     'if [ "$1" = show ]; then echo "NodeName=n1 State=IDLE"; fi\n')
    (bindir / "scontrol").chmod(0o755)
    cfg_dir = tmp_path / "etc"
    cfg_dir.mkdir(mode=0o755)
    cfg = cfg_dir / "sq.toml"
    cfg.write_text(f'[node]\nroot = "{root}"\n[fabric]\nnics = 8\n[slurm]\nbin_dir = "{bindir}"\nretries = 1\n'
                   f'[hooks]\nsyslog = false\nlog_file = "{log_file or tmp_path / "log/sq.log"}"\n'
                   f'state_dir = "{state_dir or tmp_path / "state"}"\ndrain_on_internal_error = true\n{extra}')
    os.chmod(cfg, 0o644)
    return root, cfg, calls


def hook(monkeypatch, cfg, name="prolog"):
    monkeypatch.setenv("SLURMQUAL_CONFIG", str(cfg))
    return hooks.run(name, {"SLURMD_NODENAME": "n1"})


def calls(path):
    return path.read_text().splitlines() if path.exists() else []


# -- refused configs --------------------------------------------------------------------------------

@ROOT_ONLY
@pytest.mark.parametrize("how", ["world-writable", "group-writable", "other owner", "writable dir"])
def test_refused_config_is_not_used_at_all(tmp_path, monkeypatch, capfd, how):
    """Nothing from a refused file: not its log_file (no dir, no file created),
    not drain_on_internal_error (no drain), no state written; one clear line."""
    root, cfg, log = site(tmp_path)
    uid, gid = other_user()
    if how == "world-writable":
        os.chmod(cfg, 0o666)
    elif how == "group-writable":
        os.chmod(cfg, 0o664)
    elif how == "other owner":
        os.chown(cfg, uid, gid)
    else:
        os.chown(cfg.parent, uid, gid)
    assert hook(monkeypatch, cfg) == 0
    err = capfd.readouterr().err
    assert calls(log) == []
    assert not (tmp_path / "log").exists() and not (tmp_path / "state").exists()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert "refusing to use" in lines[0] and "no checks run" in lines[0]
    assert "internal error" not in err and "Traceback" not in err


@ROOT_ONLY
@pytest.mark.parametrize("how", ["refused", "invalid"])
def test_an_unusable_config_is_shown_in_the_default_log_status_and_install_check(tmp_path, monkeypatch, capfd, how):
    """slurmd keeps a hook's stderr only at debug2: on a node without syslog the
    line must also land where an admin looks (the default log file, `status`,
    `install --check`), until a hook runs with a usable config again."""
    from slurmqual import configproblem
    from slurmqual.commands import status
    from slurmqual.nodeinstall import check as install

    defaults = tmp_path / "var"
    (defaults / "state").mkdir(parents=True, mode=0o755)
    (defaults / "log").mkdir(mode=0o755)
    monkeypatch.setattr(configproblem, "RECORD_STATE_DIR", str(defaults / "state"))
    monkeypatch.setattr(configproblem, "RECORD_LOG_FILE", str(defaults / "log" / "slurmqual.log"))
    root, cfg, calls_log = site(tmp_path, state_dir=str(defaults / "state"))
    good = cfg.read_text()
    if how == "refused":
        os.chmod(cfg, 0o666)
        why = "writable by group/others (mode 0666)"
    else:
        cfg.write_text(good + "[hooks.bogus]\nx = 1\n")
        why = "bogus"
    assert hook(monkeypatch, cfg) == 0
    assert calls(calls_log) == [] and why in capfd.readouterr().err
    logged = (defaults / "log" / "slurmqual.log").read_text().splitlines()
    assert len(logged) == 1 and "ERROR hook prolog: no checks run: " in logged[0] and why in logged[0]

    def shown():
        names = {"n1", "n2"}
        state, _bad = nodestate.read_all(str(defaults / "state"), names)
        found = configproblem.current(configproblem.read_all([configproblem.RECORD_STATE_DIR], names),
                                      {n: st.time for n, st in state.items()})
        text = status.render([], status.summary([]), None, True, found)
        checked = install.run_check("/", str(tmp_path / "opt"), str(tmp_path / "no-slurm.conf"), "n1", False,
                                    config_path=str(cfg), cache_dir=str(tmp_path / "cache"))
        return text, [f.detail for f in checked if f.what == "hooks"]

    text, findings = shown()
    assert "CRITICAL: 1 node(s) run no checks: their hooks cannot use the site config" in text
    assert "  n1: prolog at " in text and why in text
    assert len(findings) == 1 and findings[0].startswith("no checks run: n1: prolog at ") and why in findings[0]
    # Fixed: the next hook judges the node, and the record is history.
    cfg.write_text(good)
    os.chmod(cfg, 0o644)
    assert hook(monkeypatch, cfg) == 0
    assert shown() == (text.splitlines()[0], [])


@ROOT_ONLY
def test_an_unusable_config_leaves_nothing_where_the_defaults_are_missing_or_unsafe(tmp_path, monkeypatch, capfd):
    from slurmqual import configproblem

    monkeypatch.setattr(configproblem, "RECORD_STATE_DIR", str(tmp_path / "absent"))
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    os.chmod(open_dir, 0o777)
    monkeypatch.setattr(configproblem, "RECORD_LOG_FILE", str(open_dir / "slurmqual.log"))
    assert configproblem.report("prolog", "n1", "config broken") == []
    assert "hook prolog: no checks run: config broken" in capfd.readouterr().err
    assert os.listdir(tmp_path / "open") == [] and not (tmp_path / "absent").exists()


@ROOT_ONLY
def test_root_symlink_to_root_only_config_is_judged_by_its_target(tmp_path, monkeypatch):
    root, cfg, log = site(tmp_path)
    link_dir = tmp_path / "etc-link"
    link_dir.mkdir(mode=0o755)
    link = link_dir / "config.toml"
    os.symlink(cfg, link)  # lrwxrwxrwx, as every symlink
    assert stat.S_IMODE(os.lstat(link).st_mode) == 0o777
    assert hook(monkeypatch, link) == 0
    state = json.loads((tmp_path / "state/nodes/n1.json").read_text())
    assert state["status"] == "pass"

    os.chmod(cfg, 0o666)  # the target is what counts
    with pytest.raises(ConfigRefused, match=r"sq.toml is writable by group/others \(mode 0666\)"):
        load(str(link))
    os.chmod(cfg, 0o644)
    uid, gid = other_user()
    os.chown(cfg.parent, uid, gid)  # a directory on the target's way
    with pytest.raises(ConfigRefused, match=f"etc is owned by uid {uid}"):
        load(str(link))
    os.chown(cfg.parent, 0, 0)
    os.unlink(link)
    os.symlink(cfg, link)
    os.lchown(link, uid, gid)  # a link someone else made
    with pytest.raises(ConfigRefused, match="is a symlink owned by uid"):
        load(str(link))


@ROOT_ONLY
def test_state_dir_under_a_symlinked_run_dir_is_accepted(tmp_path, monkeypatch):
    """`/var/run -> /run`: judged by /run (root, 0755), not by the link's 0777."""
    (tmp_path / "run").mkdir(mode=0o755)
    os.symlink("run", tmp_path / "varrun")
    root, cfg, log = site(tmp_path, state_dir=str(tmp_path / "varrun/slurmqual"))
    check_root_only(str(tmp_path / "varrun/slurmqual"), "state dir")
    assert hook(monkeypatch, cfg) == 0
    assert json.loads((tmp_path / "run/slurmqual/nodes/n1.json").read_text())["status"] == "pass"
    os.chmod(tmp_path / "run", 0o777)
    with pytest.raises(UnsafePath, match=r"run is writable by group/others \(mode 0777\)"):
        check_root_only(str(tmp_path / "varrun/slurmqual"), "state dir")


@ROOT_ONLY
def test_sticky_world_writable_parent_is_fine_but_not_as_the_file(tmp_path):
    d = tmp_path / "tmp"
    d.mkdir()
    os.chmod(d, 0o1777)
    (d / "f").write_text("")
    check_root_only(str(d / "f"), "x")
    with pytest.raises(UnsafePath, match="mode 1777"):
        check_root_only(str(d), "x")


def test_fifo_as_config_is_a_clear_error_not_a_hang(tmp_path):
    fifo = tmp_path / "sq.toml"
    os.mkfifo(fifo)
    env = dict(os.environ, SLURMQUAL_CONFIG=str(fifo), SLURMD_NODENAME="n1", SLURMQUAL_CACHE_DIR=str(tmp_path / "c"))
    start = time.monotonic()
    p = subprocess.run([sys.executable, "-I", "-m", "slurmqual", "hook", "prolog"], env=env, capture_output=True,
                       text=True, timeout=60)
    assert time.monotonic() - start < 30
    assert p.returncode == 0 and "is a FIFO, expected a file" in p.stderr and "Traceback" not in p.stderr
    with pytest.raises(ConfigError, match="is a FIFO"):
        load(str(fifo))


@pytest.mark.parametrize("special", ["/dev/zero", "/dev/null"])
def test_device_as_config_is_refused(special):
    # As root a 0666 device is refused for its mode before it is opened; else for what it is.
    with pytest.raises(ConfigError, match="character device|writable by group/others"):
        load(special)


def test_huge_or_binary_config_is_a_clear_error(tmp_path):
    big = tmp_path / "big.toml"
    big.write_bytes(b"#" * (cfgmod.MAX_CONFIG_BYTES + 1))
    with pytest.raises(ConfigError, match="larger than"):
        load(str(big))
    binary = tmp_path / "bin.toml"
    binary.write_bytes(b"[node]\ngpus = 8 # \xff\xfe\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load(str(binary))


# -- the config cache ------------------------------------------------------------------------------

def _cache_file(tmp_path) -> str:
    files = [f for f in os.listdir(tmp_path / "cache") if f.startswith("config-")]
    assert len(files) == 1
    return str(tmp_path / "cache" / files[0])


@pytest.mark.parametrize("poison", ["truncated", "list", "wrong-shape", "other-digest", "deep", "binary", "fifo",
                                    "symlink"])
def test_poisoned_cache_never_crashes_the_prolog(tmp_path, monkeypatch, poison):
    root, cfg, log = site(tmp_path)
    assert hook(monkeypatch, cfg) == 0  # writes the cache
    clean_run = json.loads((tmp_path / "state/nodes/n1.json").read_text())
    os.unlink(tmp_path / "state/nodes/n1.json")
    path = _cache_file(tmp_path)
    good = json.loads(open(path).read())
    os.unlink(path)
    if poison == "truncated":
        open(path, "w").write(json.dumps(good)[:200])
    elif poison == "list":
        open(path, "w").write("[1, 2, 3]")
    elif poison == "wrong-shape":
        open(path, "w").write(json.dumps({"digest": good["digest"], "config": {"hooks": 1}}))
    elif poison == "other-digest":
        bad = dict(good, digest="0" * 64)
        bad["config"]["checks"]["prolog"] = []
        open(path, "w").write(json.dumps(bad))
    elif poison == "deep":
        open(path, "w").write("[" * 200000 + "]" * 200000)
    elif poison == "binary":
        open(path, "wb").write(b"\xff\xfe\x00garbage")
    elif poison == "fifo":
        os.mkfifo(path)
    else:
        (tmp_path / "elsewhere.json").write_text(json.dumps(dict(good, config=dict(good["config"], checks=dict(
            good["config"]["checks"], prolog=[])))))
        os.symlink(tmp_path / "elsewhere.json", path)
    assert hook(monkeypatch, cfg) == 0
    state = json.loads((tmp_path / "state/nodes/n1.json").read_text())
    # revalidated: the site's prolog checks ran, as without a cache
    assert state["status"] == "pass" and [c["name"] for c in state["checks"]] == [c["name"] for c in clean_run["checks"]]
    assert len(clean_run["checks"]) >= 6
    assert calls(log) == []


@ROOT_ONLY
def test_cache_in_a_directory_others_can_write_is_never_used(open_tmp, monkeypatch):
    tmp_path = open_tmp
    monkeypatch.setenv("SLURMQUAL_CACHE_DIR", str(tmp_path / "cache"))
    uid, gid = other_user()
    cache = tmp_path / "cache"
    cache.mkdir()
    os.chown(cache, uid, gid)
    f = tmp_path / "site.toml"
    f.write_text("[node]\ngpus = 4\n")
    os.chmod(tmp_path, 0o755)
    assert load(str(f))["node"]["gpus"] == 4
    assert os.listdir(cache) == []  # root wrote nothing into the user's directory
    # What the user plants there is not read either.
    digest = load(str(f)).digest
    planted = {"digest": digest, "config": {k: {} for k in cfgmod.SECTIONS}}
    as_user(uid, gid, ["sh", "-c", f"cat > {cache}/config-{digest[:32]}.json"], input=json.dumps(planted))
    assert load(str(f))["node"]["gpus"] == 4


# -- state and log directories ---------------------------------------------------------------------

def test_umask_000_hook_creates_no_world_writable_dir_or_file(tmp_path):
    root, cfg, log = site(tmp_path)
    env = dict(os.environ, SLURMQUAL_CONFIG=str(cfg), SLURMD_NODENAME="n1", SLURMQUAL_CACHE_DIR=str(tmp_path / "cache"))
    p = subprocess.run(["sh", "-c", f"umask 000; exec {sys.executable} -I -m slurmqual hook prolog"], env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    made = [tmp_path / "state", tmp_path / "state/nodes", tmp_path / "state/nodes/n1.json", tmp_path / "cache"]
    made += [tmp_path / "cache" / f for f in os.listdir(tmp_path / "cache")]
    assert len(made) == 5
    for path in made:
        assert not os.stat(path).st_mode & 0o022, f"{path}: {stat.filemode(os.stat(path).st_mode)}"
    # and the next run (as root) accepts its own state dir
    p = subprocess.run([sys.executable, "-I", "-m", "slurmqual", "hook", "prolog"], env=env, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0 and "refusing" not in p.stderr


def test_umask_000_ensure_dir_gives_exact_modes(tmp_path):
    from slurmqual.atomic import ensure_dir

    old = os.umask(0)
    try:
        ensure_dir(str(tmp_path / "a/b/c"))
    finally:
        os.umask(old)
    for d in ("a", "a/b", "a/b/c"):
        assert stat.S_IMODE(os.stat(tmp_path / d).st_mode) == 0o755


@ROOT_ONLY
def test_symlink_planted_in_a_user_writable_log_dir_is_not_followed(open_tmp, monkeypatch, capfd):
    tmp_path = open_tmp
    uid, gid = other_user()
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    logdir = tmp_path / "log"
    logdir.mkdir()
    os.chown(logdir, uid, gid)
    as_user(uid, gid, ["ln", "-s", str(victim), str(logdir / "sq.log")])
    root, cfg, log = site(tmp_path)
    assert hook(monkeypatch, cfg, "epilog") == 0
    assert victim.read_text() == "precious\n"
    err = capfd.readouterr().err
    assert "not logging to the configured log_file" in err and f"log dir {logdir} is owned by uid {uid}" in err


@ROOT_ONLY
def test_symlink_as_log_file_in_a_root_dir_is_not_followed(tmp_path, monkeypatch, capfd):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    (tmp_path / "log").mkdir(mode=0o755)
    os.symlink(victim, tmp_path / "log/sq.log")
    root, cfg, log = site(tmp_path)
    assert hook(monkeypatch, cfg, "epilog") == 0
    assert victim.read_text() == "precious\n"
    assert "refusing to follow it" in capfd.readouterr().err


@ROOT_ONLY
def test_state_dir_owned_by_another_user_writes_nothing_and_drains_nothing(tmp_path, monkeypatch, capfd):
    uid, gid = other_user()
    state = tmp_path / "state"
    state.mkdir()
    os.chown(state, uid, gid)
    root, cfg, log = site(tmp_path)
    assert hook(monkeypatch, cfg) == 0
    assert os.listdir(state) == [] and calls(log) == []
    assert f"state dir {state} is owned by uid {uid}" in (tmp_path / "log/sq.log").read_text()


# -- text from the node in logs ---------------------------------------------------------------------

def test_node_text_cannot_forge_log_records(tmp_path):
    import logging

    handler_stream = open(tmp_path / "out.log", "w")
    handler = logging.StreamHandler(handler_stream)
    handler.setFormatter(hooklog.SafeFormatter("%(asctime)s slurmqual[1] %(levelname)s %(message)s"))
    log = logging.getLogger("slurmqual.test-forge")
    log.addHandler(handler)
    log.propagate = False
    fw = "28.39.1002\n2026-11-23 10:00:00,000 slurmqual[1] WARNING epilog n9: drained\r\x1b[2K\u2028\x85x"
    log.warning("epilog %s: versions fail: nic_fw %s", "n1", fw)
    try:
        raise ValueError(fw)
    except ValueError:
        log.exception("check raised")
    handler.close()
    lines = (tmp_path / "out.log").read_text().splitlines()
    records = [ln for ln in lines if not ln.startswith("  | ")]
    assert len(records) == 2 and all(" slurmqual[1] " in r for r in records), lines
    text = "\n".join(lines)
    assert "\x1b" not in text and "\r" not in text and "\u2028" not in text and "\x85" not in text
    assert "\\x1b[2K" in text and "\\u2028" in text


# -- limits that would fail (or pass) every node -------------------------------------------------

@pytest.mark.parametrize("toml,expect", [
    ("[fabric]\nrate_gbps = inf\n", "fabric.rate_gbps: Input should be a finite number"),
    ("[fabric]\nrate_gbps = nan\n", "fabric.rate_gbps: Input should be a finite number"),
    ("[fabric]\nrate_gbps = 400000\n", "fabric.rate_gbps: Input should be less than or equal to 3200"),
    ("[fabric]\nrate_gbps = -400\n", "fabric.rate_gbps: Input should be greater than 0"),
    ("[checks.ib_counters]\nlimits = {symbol_error = -1}\n", "limits must be >= 0"),
    ("[checks.ib_counters]\nlimits = {symbol_errors = 10}\n", "unknown counter ['symbol_errors']"),
    ("[burnin]\nthreshold = nan\n", "burnin.threshold: Input should be a finite number"),
    ("[hooks]\ndeadline_s = inf\n", "hooks.deadline_s: Input should be a finite number"),
])
def test_config_validate_rejects_limits_that_judge_every_node_the_same(tmp_path, toml, expect):
    f = tmp_path / "site.toml"
    f.write_text(toml)
    p = subprocess.run([sys.executable, "-I", "-m", "slurmqual", "config", "validate", str(f)], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 2 and expect in p.stderr, p.stderr
    assert "Traceback" not in p.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="a hook records a refused config only where root alone can write")
def test_a_hook_process_records_a_refused_config_where_its_environment_says(tmp_path):
    """A test suite (or packaging sandbox) that starts real hooks as root
    points the records away from the machine's own /var: the hook process
    writes there, and nothing under the real default state dir changes."""
    state, log = tmp_path / "state", tmp_path / "log"
    state.mkdir(mode=0o755)
    log.mkdir(mode=0o755)
    fifo = tmp_path / "sq.toml"
    os.mkfifo(fifo)
    real = Path("/var/lib/slurmqual/state/config-problems/n-isolated.json")
    env = dict(os.environ, SLURMQUAL_CONFIG=str(fifo), SLURMD_NODENAME="n-isolated",
               SLURMQUAL_CACHE_DIR=str(tmp_path / "c"), SLURMQUAL_PROBLEM_STATE_DIR=str(state),
               SLURMQUAL_PROBLEM_LOG_FILE=str(log / "slurmqual.log"))
    p = subprocess.run([sys.executable, "-I", "-m", "slurmqual", "hook", "prolog"], env=env, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    record = json.loads((state / "config-problems" / "n-isolated.json").read_text())
    assert record["node"] == "n-isolated" and "FIFO" in record["problem"]
    assert not real.exists()
