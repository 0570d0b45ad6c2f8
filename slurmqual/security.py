"""Refuse root-owned work driven by files others can change. Hooks run as root;
a config, plugin dir or state dir writable by a user would let that user
switch checks off or run commands as root."""

from __future__ import annotations

import os
import stat


class UnsafePath(Exception):
    pass


def check_root_only(path: str, what: str) -> None:
    """As root: path and every parent directory must be owned by root and not
    group/world-writable (sticky /tmp-style parents are allowed). No-op otherwise."""
    if os.geteuid() != 0 or not path:
        return
    current = os.path.abspath(path)
    first = True
    while True:
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            if first:
                return  # nothing there yet (e.g. a state dir we will create)
            st = None
        if st is not None:
            sticky_dir = stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX
            if st.st_uid != 0:
                raise UnsafePath(f"{what} {current} is owned by uid {st.st_uid}, not root: refusing to use {path}")
            if st.st_mode & 0o022 and not (sticky_dir and not first):
                raise UnsafePath(f"{what} {current} is writable by group/others "
                                 f"(mode {stat.S_IMODE(st.st_mode):04o}): refusing to use {path}; chmod go-w")
        first = False
        parent = os.path.dirname(current)
        if parent == current:
            return
        current = parent
