"""Shared fixtures. Real tool outputs live in ../shared/samples (not copied here)."""

from __future__ import annotations

import os
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent
SAMPLES = pathlib.Path(os.environ.get("SLURMQUAL_SAMPLES", REPO.parent / "shared" / "samples"))


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Never read or write the real config cache from tests."""
    monkeypatch.setenv("SLURMQUAL_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))


@pytest.fixture
def samples() -> pathlib.Path:
    """Directory of real tool outputs; skip clearly when it is absent."""
    if not SAMPLES.is_dir():
        pytest.skip(f"real tool samples not found at {SAMPLES} (set SLURMQUAL_SAMPLES or check out shared/ beside the repo)")
    return SAMPLES
