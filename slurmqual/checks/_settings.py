"""The base of every config model: a check's `[checks.<id>]` settings
(SPEC.settings) and the site schema's sections (config_schema.py). Imports
pydantic: only when a config is validated."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    # inf/nan are valid TOML floats; as a limit they make every node fail (or pass).
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
