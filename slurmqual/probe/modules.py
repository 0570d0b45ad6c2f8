"""Loaded kernel modules from /proc/modules."""

from __future__ import annotations

from ..fsroot import FsError, FsRoot


def loaded(fs: FsRoot) -> set[str]:
    """Module names; a line that is not `name size refs deps state addr` is an error."""
    text = fs.read("/proc/modules")
    names = set()
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split()
        if len(fields) < 6 or not fields[1].isdigit():
            raise FsError("/proc/modules", f"line {n} is not in /proc/modules format: {line[:60]!r}")
        names.add(fields[0])
    return names
