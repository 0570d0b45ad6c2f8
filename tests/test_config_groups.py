"""[[groups]]: per-node-group overrides of the site config (issue #12).

Validation (same models as the base, errors name the group), matching
(hostlist, partition, feature), merging (later groups win, one place:
Config.for_node), the node facts file the hooks read instead of asking
slurmctld, `config show --node` and a hook whose verdict a group changes."""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import replace

import pytest

from slurmqual import hooks, nodefacts
from slurmqual.slurm.schema import FormatError, groups_from_doc, groups_from_oneliner
from slurmqual.config import ConfigError, load
from slurmqual.nodetree import NodeSpec, build

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(REPO, "config", "slurmqual.toml")
REAL = os.path.join(REPO, "tests", "data", "real", "slurm")

GROUPS = """
[fabric]
nics = 8
[[groups]]
name = "4rail"
match = { hosts = "gpu[065-096]" }
fabric.nics = 4
checks.nvlink.links_per_gpu = 12
[[groups]]
name = "h200"
match = { partition = "h200" }
fabric.nics = 6
checks.prolog = ["gpu_count", "nic_link"]
[[groups]]
name = "nvswitch-h200"
match = { partition = "h200", feature = ["nvswitch", "sxm"] }
checks.fabric_manager.required = true
"""


def load_text(tmp_path, text: str, name: str = "site.toml"):
    f = tmp_path / name
    f.write_text(text)
    return load(str(f), use_cache=False)


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SLURMQUAL_CACHE_DIR", str(tmp_path / "cache"))


# -- validation -------------------------------------------------------------------------------

def test_groups_compile_to_validated_values(tmp_path):
    """Values are the models' (coerced, checked), so a hook applies them without pydantic."""
    c = load_text(tmp_path, GROUPS + "[[groups]]\nmatch = { hosts = 'x1' }\nfabric.rate_gbps = 200\n")
    names = [g["name"] for g in c.groups]
    assert names == ["4rail", "h200", "nvswitch-h200", "groups[3]"]
    assert c.groups[0]["set"] == [[["fabric", "nics"], 4], [["checks", "nvlink", "links_per_gpu"], 12]]
    assert c.groups[2]["match"] == {"partition": "h200", "feature": ["nvswitch", "sxm"]}
    rate = c.groups[3]["set"][0][1]
    assert rate == 200.0 and isinstance(rate, float)
    assert c["fabric"]["nics"] == 8  # the base is untouched


@pytest.mark.parametrize("group,expect", [
    ("match = { hosts = 'n1' }\nchecks.nvlink.bogus = 1", "groups[0] ('g'): checks.nvlink.bogus: unknown key"),
    ("match = { hosts = 'n1' }\nfabric.nics = -1",
     "groups[0] ('g'): fabric.nics: Input should be greater than or equal to 0 (got -1)"),
    ("match = { hosts = 'n1' }\nchecks.prolog = ['nope']", "groups[0] ('g'): checks.prolog: unknown check ['nope']"),
    ("match = { hosts = 'n1' }\nnode.root = '/x'", "groups[0] ('g'): node.root: cannot be set per group"),
    ("match = { hosts = 'n1' }\nhooks.deadline_s = 5", "groups[0] ('g'): hooks: unknown key"),
    ("match = { hosts = 'gpu[001-' }", "groups[0] ('g'): match.hosts: bad hostlist 'gpu[001-'"),
    ("match = {}", "groups[0] ('g'): match: match needs hosts, partition or feature"),
    ("match = { partition = 'a,b' }", "groups[0] ('g'): match.partition: one partition name"),
    ("match = { nodes = 'n1' }", "groups[0] ('g'): match.nodes: unknown key"),
    ("fabric.nics = 4", "groups[0] ('g'): match: Field required"),
])
def test_bad_group_is_a_config_error_naming_the_group(tmp_path, group, expect):
    with pytest.raises(ConfigError) as err:
        load_text(tmp_path, f"[[groups]]\nname = 'g'\n{group}\n")
    assert f"site.toml: {expect}" in str(err.value)


def test_group_checked_against_the_base_it_merges_over(tmp_path):
    """A group value is validated merged over the base file's section, so a
    setting valid alone but not with the base's others is caught too."""
    c = load_text(tmp_path, "[checks.ib_counters.limits]\nsymbol_error = 5\n"
                            "[[groups]]\nmatch = { hosts = 'n1' }\nchecks.ib_counters.limits.link_downed = 1\n")
    # a dict-valued setting is replaced whole: the base file's keys plus the group's
    assert c.groups[0]["set"] == [[["checks", "ib_counters", "limits"], {"symbol_error": 5, "link_downed": 1}]]


def test_example_groups_are_valid_when_uncommented(tmp_path):
    """The annotated example's [[groups]] block is kept commented out (its
    hostlists would match real nodes); uncommented, it must load."""
    text = open(EXAMPLE).read()
    block = text[text.index("# [[groups]]"):]
    lines = [re.sub(r"^# ?", "", ln) for ln in block.splitlines() if ln.startswith("#")]
    c = load_text(tmp_path, text + "\n" + "\n".join(lines) + "\n")
    assert [g["name"] for g in c.groups] == ["h100-4rail", "h200", "no-nvswitch"]
    node = c.for_node("gpu070", {"gpu"}, {"pcie-gpu"})
    assert node["fabric"]["nics"] == 4 and node.applied == ("h100-4rail", "no-nvswitch")
    assert "nvlink" not in node.checks_for("healthcheck")


# -- matching and merging ------------------------------------------------------------------------

def test_hostlist_match_and_base_for_other_nodes(tmp_path):
    c = load_text(tmp_path, GROUPS)
    assert c.for_node("gpu070")["fabric"]["nics"] == 4
    assert c.for_node("gpu070")["checks"]["nvlink"]["links_per_gpu"] == 12
    other = c.for_node("gpu001", set(), set())
    assert other["fabric"]["nics"] == 8 and other.applied == ()
    assert other["checks"]["nvlink"]["links_per_gpu"] is None


def test_later_groups_win_and_all_match_keys_must_hold(tmp_path):
    c = load_text(tmp_path, GROUPS)
    both = c.for_node("gpu070", {"h200", "all"}, {"nvswitch", "sxm"})
    assert both.applied == ("4rail", "h200", "nvswitch-h200")
    assert both["fabric"]["nics"] == 6                              # h200 comes after 4rail
    assert both["checks"]["nvlink"]["links_per_gpu"] == 12          # only 4rail sets it
    assert both.checks_for("prolog") == ["gpu_count", "nic_link"]
    assert both["checks"]["fabric_manager"]["required"] is True
    one_feature = c.for_node("gpu070", {"h200"}, {"nvswitch"})      # feature list: all of them
    assert one_feature.applied == ("4rail", "h200")
    assert one_feature["checks"]["fabric_manager"]["required"] == "auto"


def test_unknown_partition_or_feature_leaves_group_undecided(tmp_path):
    c = load_text(tmp_path, GROUPS)
    node = c.for_node("gpu070")  # no facts
    assert node.applied == ("4rail",) and node.undecided == ("h200", "nvswitch-h200")
    assert node["fabric"]["nics"] == 4


def test_merge_never_changes_the_base(tmp_path):
    c = load_text(tmp_path, GROUPS)
    before = json.dumps(c.data, sort_keys=True)
    c.for_node("gpu070", {"h200"}, {"nvswitch", "sxm"})
    assert json.dumps(c.data, sort_keys=True) == before


def test_cached_groups_apply_without_pydantic(tmp_path):
    """The prolog's path: groups come from the JSON cache and merge with no pydantic import."""
    f = tmp_path / "site.toml"
    f.write_text(GROUPS)
    load(str(f))  # fills the cache
    code = ("import sys; from slurmqual.config import load; c = load(%r).for_node('gpu070'); "
            "print(c['fabric']['nics'], 'pydantic' in sys.modules)" % str(f))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, SLURMQUAL_CACHE_DIR=str(tmp_path / "cache")))
    assert p.stdout.split() == ["4", "False"], p.stderr


def test_cache_with_bad_groups_is_revalidated(tmp_path):
    f = tmp_path / "site.toml"
    f.write_text(GROUPS)
    load(str(f))
    (cache,) = glob.glob(str(tmp_path / "cache" / "config-*.json"))
    doc = json.load(open(cache))
    doc["config"]["groups"][0]["set"] = [[["fabric", "nope", "x"], 1]]
    with open(cache, "w") as fh:
        json.dump(doc, fh)
    assert load(str(f)).for_node("gpu070")["fabric"]["nics"] == 4


# -- node facts: partitions and features from Slurm ---------------------------------------------

@pytest.mark.parametrize("version", ["22.05", "24.11", "26.05"])
def test_facts_from_real_scontrol_oneliner(version):
    text = open(os.path.join(REAL, version, "scontrol_show_node_oneliner.txt")).read()
    assert groups_from_oneliner(text, "n2") == (("main",), ())
    with pytest.raises(FormatError, match="no NodeName=gpu9 line"):
        groups_from_oneliner(text, "gpu9")


@pytest.mark.parametrize("doc", ["22.05/slurmrestd_v0.0.38_nodes.json", "24.11/slurmrestd_v0.0.41_nodes.json",
                                 "26.05/scontrol_show_nodes_json.json"])
def test_facts_from_real_node_json(doc):
    data = json.load(open(os.path.join(REAL, doc)))
    name = data["nodes"][0]["name"]
    assert groups_from_doc(data, name) == (("main",), ())
    with pytest.raises(FormatError, match="node gpu9 not in the node list"):
        groups_from_doc(data, "gpu9")


def stub_scontrol(tmp_path, features: str = "nvswitch,sxm", partitions: str = "h200,all", rc: int = 0):
    """scontrol printing one `show node --oneliner` line in the layout of the real
    ones in tests/data/real/slurm (a real sample has no features: none set there)."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    calls = tmp_path / "calls.log"
    line = (f"NodeName=n1 Arch=x86_64 CoresPerSocket=1 AvailableFeatures={features} ActiveFeatures={features} "
            f"Gres=(null) State=IDLE Weight=1 Partitions={partitions}  BootTime=2026-11-23T13:28:43")
    (bindir / "scontrol").write_text(f'#!/bin/sh\necho "$*" >> {calls}\n'
                                     f'if [ "$1" = show ]; then echo "{line}"; fi\nexit {rc}\n')
    (bindir / "scontrol").chmod(0o755)
    return bindir, calls


def calls_of(path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def facts_config(tmp_path, bindir, extra: str = ""):
    return load_text(tmp_path, GROUPS + f'[slurm]\nbin_dir = "{bindir}"\nretries = 1\n'
                                        f'[hooks]\nstate_dir = "{tmp_path}/state"\n{extra}')


def test_facts_fetched_once_then_read_from_the_state_dir(tmp_path):
    bindir, calls = stub_scontrol(tmp_path)
    c = facts_config(tmp_path, bindir)
    first = nodefacts.node_config(c, "n1", hook="prolog")
    assert first.applied == ("h200", "nvswitch-h200") and first["fabric"]["nics"] == 6
    assert calls_of(calls) == ["show node n1 --oneliner"]
    again = nodefacts.node_config(c, "n1", hook="prolog")
    assert again.applied == first.applied and len(calls_of(calls)) == 1
    saved = json.loads((tmp_path / "state/facts/n1.json").read_text())
    assert saved["partitions"] == ["h200", "all"] and saved["features"] == ["nvswitch", "sxm"]


def test_stale_facts_refreshed_by_healthcheck_never_by_prolog(tmp_path):
    bindir, calls = stub_scontrol(tmp_path)
    c = facts_config(tmp_path, bindir, "node_facts_max_age_s = 60\n")
    old = time.time() - 3600
    nodefacts.write(str(tmp_path / "state"), "n1", nodefacts.Facts(("gpu",), (), old, old))
    assert nodefacts.node_config(c, "n1", hook="prolog").applied == ()
    assert calls_of(calls) == []
    assert nodefacts.node_config(c, "n1", hook="healthcheck").applied == ("h200", "nvswitch-h200")
    assert calls_of(calls) == ["show node n1 --oneliner"]


def test_slurm_down_keeps_groups_undecided_and_waits_before_asking_again(tmp_path):
    bindir, calls = stub_scontrol(tmp_path, rc=1)
    c = facts_config(tmp_path, bindir)
    node = nodefacts.node_config(c, "n1", hook="prolog")
    assert node.undecided == ("h200", "nvswitch-h200") and node["fabric"]["nics"] == 8
    nodefacts.node_config(c, "n1", hook="healthcheck")
    assert len(calls_of(calls)) == 1  # within RETRY_S: no second ask
    assert "exit" in json.loads((tmp_path / "state/facts/n1.json").read_text())["error"]


def test_untrusted_state_dir_facts_are_not_read(tmp_path):
    bindir, calls = stub_scontrol(tmp_path)
    c = facts_config(tmp_path, bindir)
    node = nodefacts.node_config(c, "n1", hook="prolog", trusted=False)
    assert node.undecided == ("h200", "nvswitch-h200") and calls_of(calls) == []


# -- CLI: config show --node --------------------------------------------------------------------

def cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "slurmqual", *args], capture_output=True, text=True, timeout=60,
                          env=env)


def test_config_show_node_prints_merged_settings(tmp_path):
    f = tmp_path / "site.toml"
    f.write_text(GROUPS + f'[hooks]\nstate_dir = "{tmp_path}/state"\n')
    env = dict(os.environ, SLURMQUAL_CACHE_DIR=str(tmp_path / "cache"))
    p = cli("config", "show", "--config", str(f), "--node", "gpu070", "--partition", "h200", env=env)
    assert p.returncode == 0, p.stderr
    shown = json.loads(p.stdout)
    assert shown["fabric"]["nics"] == 6 and shown["checks"]["nvlink"]["links_per_gpu"] == 12
    assert shown["checks"]["prolog"] == ["gpu_count", "nic_link"]
    assert "gpu070: groups applied: 4rail, h200" in p.stderr
    base = json.loads(cli("config", "show", "--config", str(f), env=env).stdout)
    assert base["fabric"]["nics"] == 8 and [g["name"] for g in base["groups"]][:1] == ["4rail"]
    bad = cli("config", "show", "--config", str(f), "--partition", "h200", env=env)
    assert bad.returncode == 2 and "give --node" in bad.stderr


# -- a hook whose verdict a group changes -------------------------------------------------------

def hook_setup(tmp_path, group: str):
    """A healthy 4-rail node (4 GPUs, 4 NICs) under a fleet config expecting 8."""
    root = build(replace(NodeSpec(link_layer="Ethernet"), gpus=4, nics=4), str(tmp_path / "tree"))
    bindir, calls = stub_scontrol(tmp_path, features="rail4", partitions="small")
    cfg = tmp_path / "sq.toml"
    cfg.write_text(f'[node]\nroot = "{root}"\ngpus = 8\n[fabric]\nnics = 8\n'
                   f'[slurm]\nbin_dir = "{bindir}"\nretries = 1\n'
                   f'[hooks]\nsyslog = false\nlog_file = "{tmp_path}/sq.log"\nstate_dir = "{tmp_path}/state"\n'
                   f'{group}')
    os.chmod(tmp_path, 0o755)
    return cfg, calls


@pytest.fixture
def _fresh_logger():
    import logging

    log = logging.getLogger("slurmqual")
    for h in list(log.handlers):
        log.removeHandler(h)
        h.close()
    yield
    for h in list(log.handlers):
        log.removeHandler(h)
        h.close()


@pytest.mark.usefixtures("_fresh_logger")
@pytest.mark.parametrize("match,slurm_calls", [
    ("", None),                                    # no group: the fleet's 8 NICs fail the node
    ("match = { hosts = 'n[1-4]' }", []),          # hostlist: no Slurm call at all
    ("match = { feature = 'rail4' }", ["show node n1 --oneliner"]),   # feature: asked once
])
def test_prolog_verdict_follows_the_nodes_group(tmp_path, monkeypatch, match, slurm_calls):
    group = f"[[groups]]\nname = '4rail'\n{match}\nnode.gpus = 4\nfabric.nics = 4\n" if match else ""
    cfg, calls = hook_setup(tmp_path, group)
    monkeypatch.setenv("SLURMQUAL_CONFIG", str(cfg))
    rc = hooks.run("prolog", {"SLURMD_NODENAME": "n1"})
    state = json.loads((tmp_path / "state/nodes/n1.json").read_text())
    nic = {c["name"]: c for c in state["checks"]}["nic_link"]
    if not match:
        assert rc == 1 and nic["status"] == "fail"
        assert any(c.startswith("update nodename=n1 state=drain") for c in calls_of(calls))
        return
    assert rc == 0 and nic["status"] == "pass" and state["status"] == "pass", state
    assert calls_of(calls) == slurm_calls
    assert hooks.run("prolog", {"SLURMD_NODENAME": "n1"}) == 0
    assert calls_of(calls) == slurm_calls  # the second prolog reads the facts file


def test_check_command_applies_hostlist_group(tmp_path):
    cfg, _calls = hook_setup(tmp_path, "[[groups]]\nmatch = { hosts = 'n1' }\nnode.gpus = 4\nfabric.nics = 4\n")
    env = dict(os.environ, SLURMQUAL_CACHE_DIR=str(tmp_path / "cache"))
    ok = cli("check", "--config", str(cfg), "--node", "n1", "--json", env=env)
    other = cli("check", "--config", str(cfg), "--node", "n2", "--json", env=env)
    assert json.loads(ok.stdout)["status"] == "pass" and ok.returncode == 0, ok.stdout
    assert json.loads(other.stdout)["status"] == "fail" and other.returncode == 1


def test_check_command_takes_partition_and_feature_without_asking_slurm(tmp_path):
    """Judging a node tree offline (or a node Slurm does not know yet): the
    partitions and features are given, and Slurm is never asked."""
    cfg, calls = hook_setup(tmp_path, "[[groups]]\nmatch = { partition = 'small', feature = 'rail4' }\n"
                                      "node.gpus = 4\nfabric.nics = 4\n")
    env = dict(os.environ, SLURMQUAL_CACHE_DIR=str(tmp_path / "cache"))
    both = cli("check", "--config", str(cfg), "--node", "n7", "--json", "--partition", "small", "--feature", "rail4",
               env=env)
    one = cli("check", "--config", str(cfg), "--node", "n7", "--json", "--partition", "small", env=env)
    assert json.loads(both.stdout)["status"] == "pass" and both.returncode == 0, both.stdout + both.stderr
    assert json.loads(one.stdout)["status"] == "fail" and one.returncode == 1  # both match keys must hold
    assert calls_of(calls) == []


@pytest.mark.parametrize("kind", ["garbage", "fifo", "other-node"])
def test_bad_facts_file_means_asking_slurm_again(tmp_path, kind):
    """A facts file that is not ours (garbage, a FIFO that would block, another
    node's record) is ignored and replaced, never trusted or waited on."""
    bindir, calls = stub_scontrol(tmp_path)
    c = facts_config(tmp_path, bindir)
    path = tmp_path / "state/facts/n1.json"
    path.parent.mkdir(parents=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "garbage":
        path.write_text("{not json")
    else:
        path.write_text(json.dumps({"node": "n2", "time": time.time(), "tried": time.time(),
                                    "partitions": ["h200"], "features": ["nvswitch", "sxm"]}))
    assert nodefacts.read(str(tmp_path / "state"), "n1") is None
    node = nodefacts.node_config(c, "n1", hook="prolog")
    assert node.applied == ("h200", "nvswitch-h200") and calls_of(calls) == ["show node n1 --oneliner"]
