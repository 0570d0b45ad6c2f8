"""What a slurmrestd offers, read from its own OpenAPI document, per
generation: the newest v0.0.N it offers that slurmqual knows; node updates
(drain/resume) where it has POST /node/{node_name} (v0.0.39+, 23.02+);
reservations where it has POST /reservation (25.05+). Only what the server
truly lacks answers "needs scontrol on this host"."""

from __future__ import annotations

import re

from ..adapter import SlurmError
from ..schema import FormatError
from ..schema.version import KNOWN_GENERATIONS
from .transport import RestTransport

_PATH = re.compile(r"^/slurm/v0\.0\.(\d+)(/.*?)/?$")
NEEDS_CLI = "needs scontrol on this host: slurmrestd {v} cannot {what}"


class RestCapabilities(RestTransport):
    """The transport plus the server's API generation and operations."""

    @property
    def spec(self) -> dict:
        if self._spec is None:
            spec = self._request("GET", "/openapi/v3")
            if not isinstance(spec, dict) or not isinstance(spec.get("paths"), dict):
                raise FormatError(f"slurmrestd {self._where()}: /openapi/v3 has no paths")
            self._spec = spec
        return self._spec

    def _ops(self) -> dict[int, set[tuple[str, str]]]:
        """generation -> {(method, path below /slurm/v0.0.N)} from the server's OpenAPI document."""
        ops: dict[int, set[tuple[str, str]]] = {}
        for path, item in self.spec["paths"].items():
            m = _PATH.match(path)
            if m and isinstance(item, dict):
                ops.setdefault(int(m.group(1)), set()).update(
                    (meth.upper(), m.group(2)) for meth in item if meth in ("get", "post", "delete"))
        return ops

    @property
    def generation(self) -> int:
        ops = self._ops()
        readable = [g for g, o in ops.items() if ("GET", "/nodes") in o and ("GET", "/jobs") in o]
        if not readable:
            raise SlurmError(f"slurmrestd {self._where()}: offers no slurm v0.0.x API with nodes and jobs")
        known = [g for g in readable if g in KNOWN_GENERATIONS]
        return max(known) if known else max(readable)   # an unknown one is decoded strictly

    @property
    def version(self) -> str:
        """The v0.0.N used (newest the server offers that slurmqual knows)."""
        if self._version is None:
            self._version = f"v0.0.{self.generation}"
        return self._version

    def can(self, method: str, path: str) -> bool:
        return (method, path) in self._ops().get(self.generation, set())

    def _needs_cli(self, what: str) -> SlurmError:
        return SlurmError(NEEDS_CLI.format(v=self.version, what=what))
