"""Where a real install keeps its data, and what a test run wrote there
(tests/conftest.py fails the run on any such file)."""

from __future__ import annotations

import os


def install_dirs(chroot_cache: str) -> list[str]:
    """The machine's /var/lib/slurmqual and /var/log/slurmqual, and the same
    inside each cached Debian chroot (their Slurm versions run our hooks)."""
    roots = ["/"]
    if os.path.isdir(chroot_cache):
        roots += [os.path.join(chroot_cache, d) for d in sorted(os.listdir(chroot_cache))]
    return [os.path.join(r, sub) for r in roots for sub in ("var/lib/slurmqual", "var/log/slurmqual")]


def written_since(start: float, dirs: list[str]) -> list[str]:
    """Files under dirs modified at or after start (what a run left there)."""
    out = []
    for d in dirs:
        for base, _subdirs, files in os.walk(d):
            for f in files:
                path = os.path.join(base, f)
                try:
                    if os.lstat(path).st_mtime >= start:
                        out.append(path)
                except OSError:
                    pass
    return sorted(out)
