"""The NVIDIA driver's /proc/driver/nvidia view."""

from __future__ import annotations

from ..records import dataclass

from ..fsroot import FsError, FsRoot

# Patterns for `re`, imported only by the probes that use them (a passing prolog does not: ~5 ms).
_VERSION = r"NVRM version:.*?Kernel Module(?: for \S+)?\s+([0-9]+(?:\.[0-9]+)+)"


@dataclass(frozen=True)
class Driver:
    version: str
    open_module: bool


def driver(fs: FsRoot) -> Driver:
    path = "/proc/driver/nvidia/version"
    text = fs.read(path)
    import re

    m = re.search(_VERSION, text)
    if not m:
        raise FsError(path, f"no driver version in {text.splitlines()[0][:80] if text else 'empty file'!r}")
    return Driver(m.group(1), "Open Kernel Module" in text)


def kernel_release(fs: FsRoot) -> str:
    return fs.read("/proc/sys/kernel/osrelease").strip()


NCCL_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/local/cuda/lib64",
             "/usr/local/lib")
_NCCL_SO = r"^libnccl\.so\.(\d+\.\d+\.\d+)$"


def host_nccl(fs: FsRoot) -> str | None:
    """NCCL installed on the host, from the versioned library file name
    (libnccl.so.2.21.5). None when absent: containers often bundle their own."""
    import re

    found = []
    for d in NCCL_DIRS:
        for name in fs.listdir(d):
            m = re.match(_NCCL_SO, name)
            if m:
                found.append(tuple(int(x) for x in m.group(1).split(".")))
    return ".".join(map(str, max(found))) if found else None
