import json
import os

import pytest

from slurmqual import config as cfgmod
from slurmqual.config import ConfigError, load

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_example_config_is_valid_and_complete():
    from slurmqual.config_schema import SiteConfig

    c = load(os.path.join(REPO, "config", "slurmqual.toml"), use_cache=False)
    assert c["fabric"]["nics"] == 8 and c["checks"]["dcqcn"]["prio_mask"] == 255
    text = open(os.path.join(REPO, "config", "slurmqual.toml")).read()
    for section in SiteConfig.model_fields:
        assert f"[{section}]" in text, section
    from pydantic import BaseModel

    from slurmqual.config_schema import ChecksCfg

    for name, field in ChecksCfg.model_fields.items():  # every per-check subsection is shown too
        if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
            assert f"[checks.{name}" in text, name


@pytest.mark.parametrize("toml,expect", [
    ("[fabric]\nnics = 'eight'\n", "fabric.nics: Input should be a valid integer"),
    ("[fabric]\nspeed = 400\n", "fabric.speed: unknown key"),
    ("[checks]\nprolog = ['peermem', 'nope']\n", "checks.prolog: unknown check ['nope']"),
    ("[checks.dcqcn]\npriorities = [8]\n", "checks.dcqcn.priorities: priorities must be 0-7"),
    ("[burnin]\nthreshold = 1.5\n", "burnin.threshold: Input should be less than or equal to 1"),
    ("[slurm]\nadapter = 'rest'\n", "needs slurm.rest.url"),
    ("[fabric\n", "not valid TOML"),
])
def test_bad_config_names_file_key_and_expectation(tmp_path, toml, expect):
    f = tmp_path / "site.toml"
    f.write_text(toml)
    with pytest.raises(ConfigError) as err:
        load(str(f))
    assert str(f) in str(err.value) and expect in str(err.value)


def test_missing_explicit_config_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load(str(tmp_path / "none.toml"))


def test_cache_is_used_and_keyed_on_content(tmp_path, monkeypatch):
    f = tmp_path / "site.toml"
    f.write_text("[node]\ngpus = 4\n")
    first = load(str(f))
    cached = [p for p in os.listdir(cfgmod._cache_dir()) if p.startswith("config-")]
    assert len(cached) == 1 and first["node"]["gpus"] == 4
    with open(os.path.join(cfgmod._cache_dir(), cached[0])) as fh:
        assert json.load(fh)["config"]["node"]["gpus"] == 4
    f.write_text("[node]\ngpus = 2\n")  # new content -> new digest -> revalidated
    assert load(str(f))["node"]["gpus"] == 2
    f.write_text("[node]\ngpus = -1\n")
    with pytest.raises(ConfigError):
        load(str(f))
