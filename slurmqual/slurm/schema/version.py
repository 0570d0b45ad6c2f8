"""Which Slurm answered, and which data format generation that implies.

The generation is the OpenAPI/data_parser version ``v0.0.N``: 22.05 writes
v0.0.38 shapes (its ``--json`` goes through the openapi plugin), and each
release from 23.02 uses its newest data_parser for ``--json``. A JSON
document names its own plugin in ``meta``; the CLI's version comes from
``scontrol -V``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import FormatError

# Slurm release -> the data format its CLI --json writes (its newest data_parser).
CLI_GENERATION = {(22, 5): 38, (23, 2): 39, (23, 11): 40, (24, 5): 41, (24, 11): 42, (25, 5): 43, (25, 11): 44,
                  (26, 5): 45}
OLDEST, NEWEST = (22, 5), (26, 5)
KNOWN_GENERATIONS = range(36, 46)   # v0.0.36 .. v0.0.45
SUPPORTED = "Slurm 22.05 to 26.05 (data formats v0.0.36 to v0.0.45)"


@dataclass(frozen=True, order=True)
class SlurmVersion:
    major: int
    minor: int
    micro: int = 0

    def __str__(self) -> str:
        return f"{self.major}.{self.minor:02d}.{self.micro}"

    @property
    def release(self) -> tuple[int, int]:
        return (self.major, self.minor)

    @property
    def known(self) -> bool:
        return OLDEST <= self.release <= NEWEST

    def cli_generation(self) -> int:
        """data_parser generation this release's CLI --json writes."""
        gen = CLI_GENERATION.get(self.release)
        if gen is not None:
            return gen
        if self.release < OLDEST:
            raise FormatError(f"Slurm {self} is older than slurmqual supports ({SUPPORTED})")
        if self.release > NEWEST:
            return max(CLI_GENERATION.values()) + 1   # unknown; decoders stay strict and name the version
        raise FormatError(f"Slurm {self}: not a Slurm release slurmqual knows ({SUPPORTED})")


_VERSION = re.compile(r"\b(\d{2})\.(\d{1,2})(?:\.(\d+))?")


def parse_version(text: str) -> SlurmVersion:
    """`scontrol -V` ("slurm 22.05.8", "slurm-wlm 24.11.5", "slurm 26.05.0-0rc1") -> version."""
    m = _VERSION.search(text or "")
    if not m:
        raise FormatError(f"scontrol -V: no Slurm version in {text[:80]!r}")
    return SlurmVersion(int(m.group(1)), int(m.group(2)), int(m.group(3) or 0))


_PLUGIN = re.compile(r"v0\.0\.(\d+)")


def doc_version(doc, source: str) -> tuple[SlurmVersion | None, int | None]:
    """(Slurm version, data generation N of v0.0.N) from a JSON document's
    ``meta``: 22.05-23.02 write ``meta.Slurm`` and ``meta.plugin.type``
    (openapi/v0.0.N); 23.11+ write ``meta.slurm`` (numbers as strings) and
    ``meta.plugin.data_parser`` (data_parser/v0.0.N). Missing parts are None."""
    if not isinstance(doc, dict):
        raise FormatError(f"{source}: expected a JSON object, got {type(doc).__name__}")
    meta = doc.get("meta")
    if not isinstance(meta, dict):
        return None, None
    version = None
    slurm = meta.get("slurm") or meta.get("Slurm")
    if isinstance(slurm, dict):
        ver = slurm.get("version")
        try:
            if isinstance(ver, dict) and "major" in ver:
                version = SlurmVersion(int(ver["major"]), int(ver.get("minor", 0)), int(ver.get("micro", 0) or 0))
            elif isinstance(slurm.get("release"), str):
                version = parse_version(slurm["release"])
        except (TypeError, ValueError, FormatError):
            version = None
    generation = None
    plugin = meta.get("plugin")
    if isinstance(plugin, dict):
        for key in ("data_parser", "type"):
            m = _PLUGIN.search(str(plugin.get(key) or ""))
            if m:
                generation = int(m.group(1))
                break
    return version, generation


def generation_of(doc, source: str, version: SlurmVersion | None = None) -> tuple[str, int]:
    """(who, N): the document's own data generation, else the one the given
    CLI version writes. `who` names the Slurm for error messages."""
    doc_ver, gen = doc_version(doc, source)
    ver = doc_ver or version
    if gen is None:
        if ver is None:
            raise FormatError(f"{source}: no meta.plugin and no Slurm version known; cannot tell the format")
        gen = ver.cli_generation()
    who = f"Slurm {ver}" if ver else "this Slurm"
    who += f" (data format v0.0.{gen})"
    return who, gen


def check_known(who: str, gen: int, source: str, problem: str) -> FormatError:
    """The error for a shape we cannot read, saying whether the version is
    newer than we know."""
    newer = "" if gen in KNOWN_GENERATIONS else f"; it is newer than slurmqual knows ({SUPPORTED})"
    return FormatError(f"{source} from {who}: {problem}{newer}")
