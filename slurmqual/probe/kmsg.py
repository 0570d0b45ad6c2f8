"""Kernel log records: /dev/kmsg read without blocking, `journalctl -k` as fallback.

/dev/kmsg gives one record per read(): 'prio,seq,usec,flags;message' with
continuation lines (' KEY=value') and newlines inside the message escaped as
\\x0a. Sequence numbers only grow within a boot, so a saved (boot id, seq)
cursor lets a check count every record once. On a node tree /dev/kmsg is a
regular file with one record per line, as `cat /dev/kmsg` would print it.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass

from ..fsroot import FsError, FsRoot


@dataclass(frozen=True)
class Record:
    seq: int             # kmsg sequence number; journal: position in this read
    time: float          # wall clock (epoch seconds)
    message: str


class KmsgUnavailable(Exception):
    """/dev/kmsg cannot be read here (container, permissions): use the journal."""


_HEADER = re.compile(r"^(\d+),(\d+),(\d+),[^;]*;(.*)$")
MAX_RECORDS = 200_000    # the ring buffer holds far fewer; a bound against a runaway file


def parse_record(line: str, boot_time: float) -> Record | None:
    m = _HEADER.match(line)
    if not m:
        return None
    message = m.group(4).replace("\\x0a", "\n").replace("\\x5c", "\\")
    return Record(int(m.group(2)), boot_time + int(m.group(3)) / 1e6, message)


def boot_time(fs: FsRoot, now: float) -> float:
    """Wall-clock time of boot: now minus /proc/uptime."""
    text = fs.read("/proc/uptime")
    try:
        return now - float(text.split()[0])
    except (IndexError, ValueError):
        raise FsError("/proc/uptime", f"expected '<seconds> <idle>', found {text[:40]!r}") from None


def boot_id(fs: FsRoot) -> str:
    return (fs.read_or("/proc/sys/kernel/random/boot_id") or "").strip()


def read_kmsg(fs: FsRoot, after_seq: int, now: float) -> list[Record]:
    """Records with seq > after_seq. Never blocks: the device is opened
    O_NONBLOCK and read until EAGAIN; an overwritten record (EPIPE) is skipped."""
    path = fs.host_path("/dev/kmsg")
    try:
        st = os.stat(path)
    except OSError as exc:
        raise KmsgUnavailable(f"/dev/kmsg: {exc.strerror}") from None
    start = boot_time(fs, now)
    out: list[Record] = []
    if stat.S_ISCHR(st.st_mode):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError as exc:
            raise KmsgUnavailable(f"/dev/kmsg: {exc.strerror}") from None
        try:
            for _ in range(MAX_RECORDS):
                try:
                    chunk = os.read(fd, 8192)
                except BlockingIOError:
                    break
                except BrokenPipeError:
                    continue        # the record was overwritten while we read: next one
                if not chunk:
                    break
                rec = parse_record(chunk.decode("utf-8", "replace").split("\n", 1)[0], start)
                if rec and rec.seq > after_seq:
                    out.append(rec)
        finally:
            os.close(fd)
        return out
    if not stat.S_ISREG(st.st_mode):
        raise KmsgUnavailable("/dev/kmsg: neither a character device nor a recorded file")
    for line in fs.read("/dev/kmsg").splitlines()[:MAX_RECORDS]:
        if line.startswith(" "):
            continue                # continuation line (SUBSYSTEM=, DEVICE=)
        rec = parse_record(line, start)
        if rec and rec.seq > after_seq:
            out.append(rec)
    return out


def parse_journal_json(text: str) -> tuple[list[Record], str | None]:
    """`journalctl -k -o json` lines -> records and the last cursor. MESSAGE may
    be a string or, for non-UTF-8 text, a list of byte values."""
    import json

    out, cursor = [], None
    for n, line in enumerate(text.splitlines()):
        try:
            entry = json.loads(line)
            msg = entry["MESSAGE"]
            if isinstance(msg, list):
                msg = bytes(msg).decode("utf-8", "replace")
            out.append(Record(n, int(entry["__REALTIME_TIMESTAMP"]) / 1e6, str(msg)))
            cursor = entry.get("__CURSOR", cursor)
        except (ValueError, KeyError, TypeError):
            continue
    return out, cursor
