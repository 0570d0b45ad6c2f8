"""peermem: GPUDirect RDMA is possible (nvidia_peermem, or dma-buf where the site uses it)."""

from __future__ import annotations

from ..probe import nvidia
from ..result import CheckResult, Status
from . import CheckSpec

NAME = "peermem"

SPEC = CheckSpec(
    NAME, 'fast', rank=10,
    summary='GPUDirect RDMA peer memory (nvidia_peermem or dma-buf) is available',
    hint="modprobe nvidia-peermem; persist with 'nvidia-peermem' in /etc/modules-load.d/nvidia-peermem.conf",
    explain="""GPUDirect RDMA lets the NIC read and write GPU memory directly. Without the
nvidia_peermem module (legacy: nv_peer_mem) NCCL silently falls back to staging
through host memory: all_reduce bus bandwidth drops by half or more, nothing crashes.
Reads: /proc/modules. Sites that use dma-buf instead (node.gpudirect = "dmabuf")
get a check for the open GPU kernel module (>= 515) and Linux >= 5.12.
A node without RDMA devices (/sys/class/infiniband empty) and no fabric.nics
expected has no GPUDirect RDMA to judge: not applicable (nvidia_peermem cannot
load without the RDMA stack).
Fix: modprobe nvidia-peermem; echo nvidia-peermem > /etc/modules-load.d/nvidia-peermem.conf""",
)
PEERMEM_MODULES = ("nvidia_peermem", "nv_peer_mem")


def judge_peermem(loaded: set[str]) -> CheckResult:
    found = [m for m in PEERMEM_MODULES if m in loaded]
    if found:
        return CheckResult(NAME, Status.PASS, f"{found[0]} loaded: GPUDirect RDMA available")
    return CheckResult(NAME, Status.FAIL, "nvidia_peermem not loaded: GPUDirect RDMA off, NCCL traffic bounces via host memory",
                       ["nvidia_peermem"])


def judge_dmabuf(drv: nvidia.Driver, kernel: str) -> CheckResult:
    """dma-buf GPUDirect needs the open GPU kernel module (>= 515) and Linux >= 5.12."""
    problems = []
    if not drv.open_module:
        problems.append("proprietary nvidia module (dma-buf needs the open kernel module)")
    if int(drv.version.split(".")[0]) < 515:
        problems.append(f"driver {drv.version} < 515")
    try:
        major, minor = (int(x) for x in kernel.split(".")[:2])
    except ValueError:
        major, minor = 0, 0
    if (major, minor) < (5, 12):
        problems.append(f"kernel {kernel} < 5.12")
    if problems:
        return CheckResult(NAME, Status.FAIL, "dma-buf GPUDirect unavailable: " + "; ".join(problems), ["nvidia"])
    return CheckResult(NAME, Status.PASS, f"dma-buf GPUDirect available (open module {drv.version}, kernel {kernel})")


def run(ctx) -> CheckResult:
    if ctx.config["node"]["gpudirect"] == "dmabuf":
        return judge_dmabuf(nvidia.driver(ctx.fs), nvidia.kernel_release(ctx.fs))
    # A node without RDMA devices, where none are expected, has no GPUDirect RDMA
    # (nvidia_peermem needs ib_core to load). ctx.ports() is nic_link's listing
    # too (read once per run), so the prolog pays nothing for asking first.
    if not ctx.config["fabric"]["nics"] and not ctx.ports():
        return CheckResult(NAME, Status.NA, "no RDMA devices on this node (none expected): GPUDirect RDMA "
                           "not applicable")
    return judge_peermem(ctx.modules())
