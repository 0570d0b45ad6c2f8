"""One filesystem-root abstraction for every read of /sys, /proc and /etc.

`FsRoot("/")` is the live node; `FsRoot("/srv/trees/n1")` treats that directory
as `/`. Symlinks are resolved by hand so that relative links (as in real sysfs:
`/sys/class/infiniband/mlx5_0 -> ../../devices/pci0000:00/...`) and absolute
links both stay inside the root and never escape it through `..`.
"""

from __future__ import annotations

import os
import posixpath

_MAX_LINKS = 40


class FsError(Exception):
    """A read under the root failed; carries the node-relative path."""

    def __init__(self, path: str, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class FsRoot:
    """Read files and directories of a node, optionally under another root."""

    def __init__(self, root: str = "/"):
        self.root = os.path.abspath(root)

    def __repr__(self) -> str:
        return f"FsRoot({self.root!r})"

    # -- path resolution -------------------------------------------------
    def resolve(self, path: str) -> str:
        """Return the node-absolute path (e.g. `/sys/devices/...`) with every
        symlink followed, clamped at the root. Missing components are kept
        as they are, like `realpath -m`."""
        parts = [p for p in path.split("/") if p]
        done: list[str] = []
        links = 0
        while parts:
            name = parts.pop(0)
            if name in ("", "."):
                continue
            if name == "..":
                if done:
                    done.pop()
                continue
            host = self._host("/" + "/".join(done + [name]))
            try:
                target = os.readlink(host)
            except OSError:
                done.append(name)
                continue
            links += 1
            if links > _MAX_LINKS:
                raise FsError(path, "too many levels of symbolic links")
            if target.startswith("/"):
                done = []
            parts = [p for p in target.split("/") if p] + parts
        return "/" + "/".join(done)

    def _host(self, node_path: str) -> str:
        if self.root == "/":
            return node_path
        return self.root + node_path

    def host_path(self, path: str) -> str:
        """Path on this machine for a node path, symlinks resolved inside the root."""
        return self._host(self.resolve(path))

    # -- reads -----------------------------------------------------------
    def read(self, path: str) -> str:
        """Text content, stripped of the trailing newline. Raises FsError."""
        try:
            with open(self.host_path(path), "rb") as fh:
                data = fh.read(1 << 20)
        except FileNotFoundError:
            raise FsError(path, "missing") from None
        except PermissionError:
            raise FsError(path, "permission denied") from None
        except IsADirectoryError:
            raise FsError(path, "is a directory, expected a file") from None
        except OSError as exc:  # EIO/EINVAL from sysfs attributes of a sick device
            raise FsError(path, exc.strerror or str(exc)) from None
        return data.decode("utf-8", "replace").rstrip("\n")

    def read_or(self, path: str, default: str | None = None) -> str | None:
        try:
            return self.read(path)
        except FsError:
            return default

    def read_int(self, path: str, base: int = 0) -> int:
        text = self.read(path).strip()
        try:
            return int(text, base)
        except ValueError:
            raise FsError(path, f"expected an integer, found {text[:40]!r}") from None

    def listdir(self, path: str) -> list[str]:
        """Sorted entries of a directory; [] if it does not exist."""
        try:
            return sorted(os.listdir(self.host_path(path)))
        except FileNotFoundError:
            return []
        except NotADirectoryError:
            raise FsError(path, "not a directory") from None
        except PermissionError:
            raise FsError(path, "permission denied") from None

    def exists(self, path: str) -> bool:
        try:
            return os.path.exists(self.host_path(path))
        except FsError:
            return False

    def isdir(self, path: str) -> bool:
        try:
            return os.path.isdir(self.host_path(path))
        except FsError:
            return False

    def realpath(self, path: str) -> str:
        """Node-absolute canonical path (useful to find a device's PCI parent chain)."""
        return posixpath.normpath(self.resolve(path))
