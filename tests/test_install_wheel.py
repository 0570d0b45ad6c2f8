"""The wheel is the whole product: built with `python -m build`, installed with
pip into a fresh venv with no checkout in reach, it carries the hooks, the
annotated config and the slurm.conf snippet, and leaves the report's plotting
stack to the [report] extra."""

from __future__ import annotations

import email.parser
import glob
import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEAVY = ("matplotlib", "numpy", "PIL", "fontTools")


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("dist")
    # Built from a copy: setuptools writes build/ and *.egg-info into the tree
    # it builds, so two builds of one checkout at once (this module's tests on
    # two xdist workers, or the device check's test beside them) collide.
    src = tmp_path_factory.mktemp("src") / "slurmqual"
    shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(".git", ".venv", "build", "*.egg-info", "__pycache__",
                                                             ".devcarry", ".gl", ".whl"))
    proc = subprocess.run([sys.executable, "-m", "build", "-o", str(out), str(src)], capture_output=True, text=True,
                          timeout=600)
    if proc.returncode != 0 and "Could not find a version that satisfies" in proc.stdout + proc.stderr:
        pytest.skip("python -m build needs setuptools from a package index, which is unreachable here")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return {"wheel": glob.glob(str(out / "*.whl"))[0], "sdist": glob.glob(str(out / "*.tar.gz"))[0]}


@pytest.fixture(scope="module")
def venv(dist, tmp_path_factory) -> str:
    """A fresh venv with the base wheel and its dependencies, made by pip."""
    path = tmp_path_factory.mktemp("venv")
    os.chmod(path.parent, 0o755)
    os.chmod(path, 0o755)
    subprocess.run(["/usr/bin/python3", "-m", "venv", str(path)], check=True, timeout=300)
    proc = subprocess.run([str(path / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                           dist["wheel"]], capture_output=True, text=True, timeout=600)
    if proc.returncode != 0 and ("No matching distribution" in proc.stderr or "NewConnectionError" in proc.stderr):
        pytest.skip(f"pip cannot reach a package index for the dependencies: {proc.stderr.strip()[-300:]}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    return str(path)


def test_wheel_carries_config_snippet_and_hook_entry_points(dist):
    with zipfile.ZipFile(dist["wheel"]) as whl:
        names = set(whl.namelist())
        for name, src in (("slurmqual/data/slurmqual.toml", "config/slurmqual.toml"),
                          ("slurmqual/data/slurm.conf.snippet", "config/slurm.conf.snippet")):
            assert name in names
            with open(os.path.join(REPO, src), "rb") as fh:
                assert whl.read(name) == fh.read(), f"{name} differs from {src}"
        info = [n for n in names if n.endswith(".dist-info/entry_points.txt")][0]
        entry_points = whl.read(info).decode()
        meta = whl.read([n for n in names if n.endswith(".dist-info/METADATA")][0]).decode()
    for hook in ("prolog", "epilog", "healthcheck"):
        assert f"slurmqual-{hook} = slurmqual.hookscripts:{hook}" in entry_points
    requires = email.parser.Parser().parsestr(meta).get_all("Requires-Dist")
    base = [r for r in requires if "extra ==" not in r]
    assert not [r for r in base if r.lower().startswith("matplotlib")], base
    assert any(r.startswith("matplotlib") and 'extra == "report"' in r for r in requires)
    assert {r.split(">")[0].split("=")[0].strip().lower() for r in base} >= {"pydantic", "tenacity", "requests"}


def test_sdist_is_the_whole_source_release(dist):
    with tarfile.open(dist["sdist"]) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
        member = tar.getmember(next(n for n in tar.getnames() if n.endswith("slurmqual/data/slurm.conf.snippet")))
        assert member.isfile()  # the git symlink became a file
    for path in ("config/slurmqual.toml", "config/slurm.conf.snippet", "prolog/slurmqual-prolog",
                 "epilog/slurmqual-epilog", "healthcheck/slurmqual-healthcheck", "pyproject.toml",
                 "slurmqual/commands/install.py"):
        assert path in names, path


def test_base_install_is_lean(venv):
    py = os.path.join(venv, "bin", "python")
    for mod in HEAVY:
        proc = subprocess.run([py, "-c", f"import {mod}"], capture_output=True, text=True)
        assert proc.returncode != 0, f"{mod} got installed with the base wheel"
    size = json.loads(subprocess.run([py, "-c", (
        "import importlib.metadata as md, json, os\n"
        "print(json.dumps({d.metadata['Name']: sum(os.lstat(f.locate()).st_size for f in (d.files or []) "
        "if os.path.lexists(f.locate())) for d in md.distributions()}))")], capture_output=True, text=True,
        check=True).stdout)
    ours = sum(v for k, v in size.items() if k.lower() not in ("pip", "setuptools", "wheel"))
    assert ours < 40e6, f"compute-node install is {ours / 1e6:.1f} MB: {size}"


def _node_config(tmp_path) -> tuple[str, str]:
    from slurmqual.nodetree import build

    os.chmod(tmp_path, 0o755)
    tree = build("h100-roce-healthy", str(tmp_path / "tree"))
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'[node]\nroot = "{tree}"\ngpus = 8\n[fabric]\nnics = 8\n[hooks]\nsyslog = false\n'
                   f'log_file = "{tmp_path}/log/slurmqual.log"\nstate_dir = "{tmp_path}/state"\n')
    return str(cfg), str(tmp_path / "cache")


@pytest.mark.skipif(os.geteuid() != 0, reason="install manages root-owned files: run as root")
@pytest.mark.usefixtures("real_logrotate")
def test_console_script_and_installed_wrappers_run_the_prolog_with_no_environment(venv, tmp_path):
    cfg, cache = _node_config(tmp_path)
    env = {"SLURMD_NODENAME": "n1", "SLURMQUAL_CONFIG": cfg, "SLURMQUAL_CACHE_DIR": cache}
    proc = subprocess.run([os.path.join(venv, "bin", "slurmqual-prolog")], env=env, cwd="/", capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    state = json.loads((tmp_path / "state" / "nodes" / "n1.json").read_text())
    assert state["hook"] == "prolog" and state["status"] == "pass"

    prefix = str(tmp_path / "opt")
    inst = subprocess.run([os.path.join(venv, "bin", "slurmqual"), "install", "--prefix", prefix, "--config", cfg,
                           "--cache-dir", cache], capture_output=True, text=True, timeout=120, cwd="/")
    assert inst.returncode == 0, inst.stderr
    wrapper = os.path.join(prefix, "libexec", "healthcheck", "slurmqual-healthcheck")
    assert f"PY={venv}/bin/python" in open(wrapper).read()  # the venv, not the checkout
    conf = tmp_path / "slurm.conf"
    snippet = subprocess.run([os.path.join(venv, "bin", "slurmqual"), "install", "--snippet", "--prefix", prefix],
                             capture_output=True, text=True, check=True).stdout
    conf.write_text("ClusterName=t\n" + snippet)
    check = subprocess.run([os.path.join(venv, "bin", "slurmqual"), "install", "--check", "--prefix", prefix,
                            "--config", cfg, "--cache-dir", cache, "--slurm-conf", str(conf), "--node", "n1"],
                           capture_output=True, text=True, timeout=300, cwd="/")
    assert check.returncode == 0, check.stdout + check.stderr
    assert "ok       prolog run: exit 0" in check.stdout


def test_report_without_the_extra_says_which_extra(venv, tmp_path):
    # A real analysis from our own code (checkout venv), rendered by the lean install.
    m = tmp_path / "m.jsonl"
    nodes = [f"n{i}" for i in range(1, 9)]
    with open(m, "w") as fh:
        for i in range(0, 8, 2):
            for a, b in ((nodes[i], nodes[i + 1]), (nodes[i], nodes[(i + 2) % 8])):
                fh.write(json.dumps({"nodes": [a, b], "busbw": 380.0, "size": 8589934592,
                                     "test": "all_reduce", "ok": True}) + "\n")
    analysis = subprocess.run([sys.executable, "-m", "slurmqual", "burnin", "analyze", "--measurements", str(m),
                               "--json", "--dry-run"], capture_output=True, text=True, timeout=120)
    assert analysis.returncode == 0, analysis.stderr
    (tmp_path / "analysis.json").write_text(analysis.stdout)
    proc = subprocess.run([os.path.join(venv, "bin", "slurmqual"), "burnin", "report", str(tmp_path / "analysis.json"),
                           "--html", str(tmp_path / "r.html")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "pip install 'slurmqual[report]'" in proc.stderr
    assert not (tmp_path / "r.html").exists()
