"""One filesystem-root abstraction for every read of /sys, /proc and /etc.

`FsRoot("/")` is the live node; `FsRoot("/srv/trees/n1")` treats that directory
as `/`. Symlinks are resolved by hand so that relative links (as in real sysfs:
`/sys/class/infiniband/mlx5_0 -> ../../devices/pci0000:00/...`) and absolute
links both stay inside the root and never escape it through `..`.
"""

from __future__ import annotations

import errno
import os
import posixpath
import stat

_MAX_LINKS = 40
MAX_NODE_FILE = 1 << 20  # no sysfs/procfs attribute we read comes near this


class NotRegularFile(OSError):
    """A FIFO, device, socket or directory where a file was expected, or a
    file over the size limit: reading it could block forever or never end."""


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return "not a regular file"


def open_regular_fd(path: str, *, nofollow: bool = False) -> int:
    """A descriptor on a regular file, refusing anything else before reading a byte.

    Opened O_NONBLOCK so that a FIFO planted where a file is expected cannot
    block the open (nor the hook's deadline), then fstat-checked on the open
    descriptor (no race with a swap after a stat), then set back to blocking.
    `nofollow` refuses a symlink as the last component (files root reads from
    directories others could write)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY | (os.O_NOFOLLOW if nofollow else 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if nofollow and exc.errno == errno.ELOOP:
            raise NotRegularFile(errno.ELOOP, "is a symlink, refusing to follow it", path) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(errno.EINVAL, f"is {_kind(st.st_mode)}, expected a file", path)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(path: str, limit: int, *, nofollow: bool = False) -> bytes:
    """Bytes of a regular file (open_regular_fd), at most `limit`: a larger
    file is an error, never silently truncated."""
    fd = open_regular_fd(path, nofollow=nofollow)
    try:
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 16, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise NotRegularFile(errno.EFBIG, f"larger than {limit} bytes", path)
        return b"".join(chunks)
    finally:
        os.close(fd)


def load_json_text(text: str | bytes):
    """json.loads that turns every way hostile JSON can fail into ValueError:
    non-UTF-8 bytes and nesting deep enough to hit the interpreter's recursion
    limit (the decoder raises RecursionError, which callers do not expect).
    Through leanjson: the prolog reads the config cache with it."""
    from .leanjson import loads

    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        return loads(text)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


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
        self._links: dict[str, str | None] = {}
        self._dirs: dict[str, str] = {}
        self._via_link: dict[str, str] = {}

    def __repr__(self) -> str:
        return f"FsRoot({self.root!r})"

    # -- path resolution -------------------------------------------------
    def resolve(self, path: str) -> str:
        """Return the node-absolute path (e.g. `/sys/devices/...`) with every
        symlink followed, clamped at the root. Missing components are kept
        as they are, like `realpath -m`. A directory's resolution is
        remembered for this FsRoot's life, so sibling files cost one lookup."""
        node = self._in_parent(path)
        if node is None:
            return self._resolve(path)
        if self._readlink(self._host(node)) is None:
            return node
        # A symlink (/sys/bus/pci/devices/<bdf>, /sys/class/net/<if>): its
        # resolution is remembered like the readlink it comes from, so reading
        # a device's files and asking for its realpath walk it once.
        resolved = self._via_link.get(node)
        if resolved is None:
            resolved = self._via_link[node] = self._resolve(node)
        return resolved

    def _in_parent(self, path: str) -> str | None:
        """path with its directory resolved (remembered) and its last component
        as it is; None when that component is '', '.' or '..'. A directory
        resolves through its own parent's remembered resolution, so a deep
        sysfs path costs one new lookup, not one per component."""
        parent, _, name = path.rstrip("/").rpartition("/")
        if name in ("", ".", ".."):
            return None
        base = self._dirs.get(parent)
        if base is None:
            base = self.resolve(parent) if parent else "/"
            self._dirs[parent] = base
        return base.rstrip("/") + "/" + name

    def _resolve(self, path: str) -> str:
        todo = [p for p in reversed(path.split("/")) if p]   # next component last
        done = ""                                            # node path resolved so far ("" is /)
        links = 0
        while todo:
            name = todo.pop()
            if name == ".":
                continue
            if name == "..":
                done = done[:done.rfind("/")]
                continue
            candidate = done + "/" + name
            target = self._readlink(self._host(candidate))
            if target is None:
                done = candidate
                continue
            links += 1
            if links > _MAX_LINKS:
                raise FsError(path, "too many levels of symbolic links")
            if target.startswith("/"):
                done = ""
            todo += [p for p in reversed(target.split("/")) if p]
        return done or "/"

    def _readlink(self, host: str) -> str | None:
        """readlink, remembered for the life of this FsRoot (one check run):
        sysfs paths share long prefixes, and every component of every read
        used to cost a readlink syscall."""
        try:
            return self._links[host]
        except KeyError:
            pass
        try:
            target: str | None = os.readlink(host)
        except OSError:
            target = None
        self._links[host] = target
        return target

    def _host(self, node_path: str) -> str:
        if self.root == "/":
            return node_path
        return self.root + node_path

    def host_path(self, path: str) -> str:
        """Path on this machine for a node path, symlinks resolved inside the root.
        On the live node (root /) nothing can escape: the kernel resolves."""
        if self.root == "/":
            return path
        return self._host(self.resolve(path))

    # -- reads -----------------------------------------------------------
    def _read_bytes(self, path: str) -> bytes:
        if self.root == "/":
            return read_regular(path, MAX_NODE_FILE)
        node = self._in_parent(path)
        if node is not None:
            # Most attributes are plain files: open without following a last
            # symlink, and only resolve it by hand (inside the root) when it is one.
            try:
                return read_regular(self._host(node), MAX_NODE_FILE, nofollow=True)
            except NotRegularFile as exc:
                if exc.errno != errno.ELOOP:
                    raise
        return read_regular(self._host(self.resolve(path)), MAX_NODE_FILE)

    def read(self, path: str) -> str:
        """Text content, stripped of the trailing newline. Raises FsError."""
        try:
            data = self._read_bytes(path)
        except FileNotFoundError:
            raise FsError(path, "missing") from None
        except PermissionError:
            raise FsError(path, "permission denied") from None
        except NotRegularFile as exc:  # a FIFO would block, /dev/zero never ends
            raise FsError(path, exc.strerror) from None
        except OSError as exc:  # EIO/EINVAL from sysfs attributes of a sick device
            raise FsError(path, exc.strerror or str(exc)) from None
        try:
            return data.decode("utf-8").rstrip("\n")
        except UnicodeDecodeError as exc:
            raise FsError(path, f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})") from None

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
