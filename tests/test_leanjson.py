"""leanjson (the prolog's JSON without `import json`) against the stdlib json:
the same objects and text on the files the hooks and the config cache really
write, and the same results or the same errors on hostile input."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from slurmqual import hooks, leanjson
from slurmqual.config import load
from slurmqual.fsroot import load_json_text
from slurmqual.nodetree import build

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def outcome(fn, arg):
    """A result, or the error's type and message, to compare two implementations."""
    try:
        return ("ok", fn(arg))
    except (ValueError, TypeError, RecursionError) as exc:
        return (type(exc).__name__, str(exc))


def same(a, b) -> bool:
    """Equal outcomes, NaN included (nan != nan): compare what json.dumps prints."""
    return a == b or (a[0] == b[0] == "ok" and json.dumps(a[1]) == json.dumps(b[1]))


@pytest.fixture
def written_files(tmp_path, monkeypatch):
    """The config cache and node state files of real prolog and healthcheck runs
    (a passing node, a failing one), and the shipped example config's cache."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("SLURMQUAL_CACHE_DIR", str(cache))
    for node, example in (("n1", "h100-roce-healthy"), ("n2", "nic-down")):
        root = build(example, str(tmp_path / node))
        cfg = tmp_path / f"{node}.toml"
        cfg.write_text(f'[node]\nroot = "{root}"\n[fabric]\nnics = 8\n[slurm]\nbin_dir = "{tmp_path}/no-slurm"\n'
                       f'[hooks]\nsyslog = false\nlog_file = "{tmp_path}/log/sq.log"\n'
                       f'state_dir = "{tmp_path}/state"\n')
        monkeypatch.setenv("SLURMQUAL_CONFIG", str(cfg))
        for hook in ("prolog", "healthcheck"):
            hooks.run(hook, {"SLURMD_NODENAME": node, "SLURM_JOB_ID": "42"})
    load(os.path.join(REPO, "slurmqual", "data", "slurmqual.toml"))
    files = sorted(str(p) for p in [*cache.iterdir(), *(tmp_path / "state" / "nodes").glob("*.json")])
    assert len([f for f in files if "/cache/" in f]) == 3 and len([f for f in files if "/nodes/" in f]) == 2, files
    return files


def test_real_files_read_and_write_as_with_json(written_files):
    for path in written_files:
        text = open(path, encoding="utf-8").read()
        doc = leanjson.loads(text)
        assert doc == json.loads(text), path
        assert leanjson.dumps(doc) == json.dumps(doc) == text, path  # both files are written by leanjson.dumps
        assert load_json_text(text.encode()) == doc


HOSTILE_TEXT = [
    "", " ", "\n\t {} \r\n", "{}", "[]", "null", "true", "1", "-0", "-0.0", "1e400", "-1e400", "1E-400",
    "123456789012345678901234567890", "1" * 5000, "0.1" + "1" * 5000,  # past int's 4300-digit limit; a long float
    "NaN", "Infinity", "-Infinity", "[NaN, Infinity, -Infinity]", "nan", "inf", "01", "1.", ".5", "+1",
    '"\\ud800"', '"\\udc00\\ud800"', '"\\u00e9\\n\\t\\"\\\\"', '"a\x01b"', '"\\x41"', '"\\u12"', '"unterminated',
    '{"a": 1, "a": 2}', '{"a" 1}', '{"a": 1,}', "[1, 2,]", "[1 2]", "{1: 2}", "{'a': 1}", "[1] [2]", "[1] x",
    "\ufeff{}", "\x00", "[" * 100 + "]" * 100, "[" * 100000, '{"a":' * 100000, "[" * 100000 + "]" * 100000,
    '{"digest": "x", "config": {"node": {"root": "/"}}}', "é", '"é"', "[1]\u00a0",
]


@pytest.mark.parametrize("text", HOSTILE_TEXT, ids=range(len(HOSTILE_TEXT)))
def test_hostile_text_reads_as_with_json(text):
    assert same(outcome(leanjson.loads, text), outcome(json.loads, text))


@pytest.mark.parametrize("raw", [b"\xff{}", b'{"a": "\xc3"}', b"\xed\xa0\x80", b"[" * 100000])
def test_invalid_utf8_and_deep_nesting_are_a_clear_error(raw):
    with pytest.raises(ValueError):
        load_json_text(raw)


def _circular():
    d: dict = {}
    d["self"] = d
    return d


HOSTILE_OBJECTS = [
    {"a": [1, 2.5, None, True, False, "é", "\ud800", "\x00", {"b": {}}]}, float("nan"), float("inf"),
    [float("-inf"), -0.0, 1e-320, 10**30], {1: "int key", 2.5: "float key", None: "none", True: "bool"},
    {(1, 2): "tuple key"}, {"set": {1}}, {"bytes": b"x"}, _circular(), [[[]]], "plain string", "é\ud800",
    list(range(3)), (1, 2), 10**5000, [[]] * 3,
]


@pytest.mark.parametrize("obj", HOSTILE_OBJECTS, ids=range(len(HOSTILE_OBJECTS)))
def test_hostile_objects_write_as_with_json(obj):
    assert outcome(leanjson.dumps, obj) == outcome(json.dumps, obj)


def test_a_failure_is_the_stdlib_decode_error():
    with pytest.raises(json.JSONDecodeError) as info:
        leanjson.loads('{"a": 1} trailing')
    assert (info.value.msg, info.value.pos) == ("Extra data", 9)


def test_without_the_accelerator_it_is_the_stdlib():
    """Other Pythons (no `_json`): loads and dumps are json's own."""
    code = ("import sys; sys.modules['_json'] = None; import json; from slurmqual import leanjson; "
            "print(leanjson.loads is json.loads, leanjson.dumps is json.dumps, leanjson.loads('[1]'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.split() == ["True", "True", "[1]"]
