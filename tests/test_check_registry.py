"""Each check is declared once (SPEC in its module); everything else is derived
from it. These tests fail when a derived place drifts from the declarations."""

import os
import tomllib

import pytest

from slurmqual.checks import HOOKS, LEVELS, REGISTRY, default_checks, select
from slurmqual.config import load
from slurmqual.hints import EXPLAIN, HINTS

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHECKS_DIR = os.path.join(REPO, "slurmqual", "checks")
EXAMPLE = os.path.join(REPO, "config", "slurmqual.toml")


def test_every_check_module_declares_a_spec_and_is_registered():
    modules = sorted(f[:-3] for f in os.listdir(CHECKS_DIR) if f.endswith(".py") and not f.startswith("_"))
    assert modules == sorted(REGISTRY)
    for name, spec in REGISTRY.items():
        assert spec.name == name and spec.level in LEVELS
        assert spec.summary and spec.hint and len(spec.explain.splitlines()) >= 3, name


def test_config_schema_ids_and_sections_come_from_the_specs():
    from slurmqual.config_schema import CHECK_IDS, ChecksCfg

    assert CHECK_IDS == tuple(REGISTRY)
    sections = {n for n in ChecksCfg.model_fields if n not in ("prolog", "epilog", "healthcheck", "disabled")}
    assert sections == {s.name for s in REGISTRY.values() if s.settings is not None}


def test_hints_and_explain_come_from_the_specs():
    assert HINTS == {n: s.hint for n, s in REGISTRY.items()}
    assert EXPLAIN == {n: s.explain for n, s in REGISTRY.items()}


@pytest.mark.parametrize("name", sorted(n for n, s in REGISTRY.items() if s.settings is not None))
def test_explain_names_every_setting(name):
    model = REGISTRY[name].settings()
    for key in model.model_fields:
        assert key in REGISTRY[name].explain, f"{name}: explain text does not mention setting {key!r}"


def test_default_hook_lists_follow_levels():
    assert all(REGISTRY[n].level == "fast" for n in default_checks("prolog"))
    for hook in HOOKS:
        assert all(REGISTRY[n].level != "slow" for n in default_checks(hook)), hook
    assert [s.name for s in select(None, "fast")] == [n for n, s in REGISTRY.items() if s.level == "fast"]
    assert [s.name for s in select(None, "slow")] == list(REGISTRY)


def test_example_config_shows_every_check_setting_with_its_default():
    """config/slurmqual.toml documents each check's section: every key appears
    (set or commented out), and what it sets equals the default, so the example
    cannot drift from the code (the versions NCCL pin once did)."""
    text = open(EXAMPLE, encoding="utf-8").read()
    raw = tomllib.loads(text)
    effective = load(EXAMPLE, use_cache=False)
    for hook in HOOKS:
        assert raw["checks"][hook] == default_checks(hook), hook
    for name, spec in REGISTRY.items():
        if spec.settings is None:
            continue
        model = spec.settings()
        assert f"[checks.{name}" in text, name
        for key in model.model_fields:
            assert key in text.split(f"[checks.{name}", 1)[1], f"{name}.{key} missing from the example config"
        assert effective["checks"][name] == model().model_dump(), name
