import json

from slurmqual.inventory import build, judge, render


def _state(tmp_path, node, **versions):
    d = tmp_path / "nodes"
    d.mkdir(exist_ok=True)
    (d / f"{node}.json").write_text(json.dumps({"node": node, "time": 1.0, "hook": "healthcheck", "status": "pass",
                                                "checks": [], "versions": versions}))


def test_majority_and_outliers(tmp_path):
    for n in ("n1", "n2", "n3"):
        _state(tmp_path, n, driver="550.54.15", nic_fw="28.39.1002", kernel="6.1.0-18-amd64")
    _state(tmp_path, "n4", driver="535.161.08", nic_fw="28.39.1002", kernel="6.1.0-18-amd64")
    _state(tmp_path, "n5", driver="550.54.15", nic_fw="28.36.1010")
    (tmp_path / "nodes" / "junk.json").write_text("{oops")
    inv = build(str(tmp_path), nccl={"n1": "2.21.5", "n2": "2.21.5", "n3": "2.18.3"})
    assert inv.majority == {"driver": "550.54.15", "nic_fw": "28.39.1002", "kernel": "6.1.0-18-amd64", "nccl": "2.21.5"}
    assert inv.outliers == {"n4": {"driver": "535.161.08"}, "n5": {"nic_fw": "28.36.1010"}, "n3": {"nccl": "2.18.3"}}
    assert inv.unreadable == ["junk.json"]
    text = render(inv)
    assert "n4: driver=535.161.08 (majority 550.54.15)" in text and "unreadable state file junk.json" in text


def test_missing_field_is_not_an_outlier():
    majority, outliers = judge({"a": {"driver": "1"}, "b": {}, "c": {"driver": "1"}})
    assert majority["driver"] == "1" and majority["kernel"] is None and outliers == {}


def test_empty_state_dir(tmp_path):
    inv = build(str(tmp_path / "none"))
    assert inv.versions == {} and inv.outliers == {} and "all nodes match" in render(inv)
