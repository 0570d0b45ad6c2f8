"""The NVIDIA driver's /proc/driver/nvidia view."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..fsroot import FsError, FsRoot

_VERSION = re.compile(r"NVRM version:.*?Kernel Module(?: for \S+)?\s+([0-9]+(?:\.[0-9]+)+)")


@dataclass(frozen=True)
class Driver:
    version: str
    open_module: bool


def driver(fs: FsRoot) -> Driver:
    path = "/proc/driver/nvidia/version"
    text = fs.read(path)
    m = _VERSION.search(text)
    if not m:
        raise FsError(path, f"no driver version in {text.splitlines()[0][:80] if text else 'empty file'!r}")
    return Driver(m.group(1), "Open Kernel Module" in text)


def kernel_release(fs: FsRoot) -> str:
    return fs.read("/proc/sys/kernel/osrelease").strip()
