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


def gpu_models(fs: FsRoot) -> dict[str, str]:
    """GPU PCI address -> model, from the driver's /proc/driver/nvidia/gpus/<bdf>/information
    ('Model: \t\t NVIDIA H100 80GB HBM3'); a GPU without that line is left out. No
    subprocess and no `re`: gpu_count reads it in the prolog when node.gpu_model is set."""
    out = {}
    for bdf in fs.listdir("/proc/driver/nvidia/gpus"):
        for line in (fs.read_or(f"/proc/driver/nvidia/gpus/{bdf}/information") or "").splitlines():
            key, sep, value = line.partition(":")
            if sep and key.strip() == "Model" and value.strip():
                out[bdf] = value.strip()
                break
    return out


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
