"""Write files so that readers never see half a file and a planted symlink is
never followed: temp file created O_EXCL|O_NOFOLLOW in the target's directory,
fsync, then rename over the target."""

from __future__ import annotations

import os


def write_text(path: str, text: str, mode: int = 0o644, *, durable: bool = True) -> None:
    """durable=False skips the fsync: for a file that is rewritten often and
    whose loss in a crash costs nothing (a reader then finds the old file, or
    on some filesystems an empty one, and must treat that as unreadable)."""
    directory = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{os.urandom(6).hex()}.tmp")  # not secrets: ~3 ms of imports
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            if durable:
                os.fsync(fh.fileno())
        os.replace(tmp, path)  # rename replaces a symlink itself, never writes through it
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def ensure_dir(path: str, mode: int = 0o755) -> None:
    """Create a directory tree with `mode` whatever the caller's umask (a hook
    run under `umask 000` must not leave a 0777 state dir that every later run
    refuses); refuse when the final component is a symlink."""
    path = os.path.abspath(path)
    missing = []
    cur = path
    while not os.path.lexists(cur):
        missing.append(cur)
        parent = os.path.dirname(cur)
        if parent == cur:
            break
        cur = parent
    for d in reversed(missing):
        try:
            os.mkdir(d, mode)
        except FileExistsError:
            continue  # created concurrently: judged below like any existing dir
        os.chmod(d, mode)  # mkdir applied the umask; we want exactly `mode`
    if os.path.islink(path):
        raise OSError(f"{path}: is a symlink, refusing to use it")
    if not os.path.isdir(path):
        raise OSError(f"{path}: not a directory")
