"""gpu_nic_affinity: every GPU has a fabric NIC on its own NUMA node (and, where
asked, under its PCIe switch); otherwise GPU traffic crosses the CPU interconnect."""

from __future__ import annotations

from ..records import dataclass

from ..probe import pci
from ..result import CheckResult, Status
from . import CheckSpec

NAME = "gpu_nic_affinity"


def settings():
    from ._settings import Strict

    class AffinityCfg(Strict):
        same_pcie_switch: bool = False
        # Explicit GPU -> NIC pinning, GPU PCI address -> RDMA device name.
        gpu_nic_map: dict[str, str] = {}

    return AffinityCfg


SPEC = CheckSpec(
    NAME, 'fast', rank=40, settings=settings,
    summary='every GPU has a fabric NIC on its own NUMA node / PCIe switch',
    hint="compare 'nvidia-smi topo -m' with the vendor layout; fix BIOS NUMA/ACS settings or riser cabling",
    explain="""Each GPU needs a fabric NIC on its own NUMA node (checks.gpu_nic_affinity.
same_pcie_switch = true: under its own PCIe switch), or GPUDirect traffic crosses the
CPU interconnect. numa_node = -1 on a multi-socket node means the firmware did not
describe the topology. An explicit map (gpu_nic_map) pins GPU PCI address -> NIC.
Fix: compare `nvidia-smi topo -m` with the vendor layout; BIOS NUMA/SRAT and ACS
settings; riser and cable placement.""",
)


@dataclass(frozen=True)
class Dev:
    name: str          # GPU PCI address or RDMA device name
    numa: int
    switch: str | None


def judge(gpus: list[Dev], nics: list[Dev], multi_socket: bool, same_switch: bool,
          pinned: dict[str, str]) -> CheckResult:
    if not gpus or not nics:
        return CheckResult(NAME, Status.NA, f"{len(gpus)} GPUs, {len(nics)} fabric NICs: nothing to align")
    by_name = {n.name: n for n in nics}
    bad, devices = [], []
    if multi_socket:
        for n in nics:
            if n.numa < 0:
                bad.append(f"NIC {n.name}: numa_node -1 on a multi-socket node (BIOS/ACPI SRAT)")
                devices.append(n.name)
    for g in gpus:
        if multi_socket and g.numa < 0:
            bad.append(f"GPU {g.name}: numa_node -1 on a multi-socket node (BIOS/ACPI SRAT)")
            devices.append(g.name)
            continue
        if g.name in pinned:
            n = by_name.get(pinned[g.name])
            if n is None:
                bad.append(f"GPU {g.name}: pinned NIC {pinned[g.name]} not present")
            elif multi_socket and n.numa != g.numa:
                bad.append(f"GPU {g.name}: pinned NIC {n.name} on NUMA {n.numa}, GPU on NUMA {g.numa}")
            elif same_switch and n.switch != g.switch:
                bad.append(f"GPU {g.name}: pinned NIC {n.name} not under its PCIe switch")
            else:
                continue
            devices.append(g.name)
            continue
        local = [n for n in nics if not multi_socket or n.numa == g.numa]
        if same_switch:
            local = [n for n in local if g.switch is not None and n.switch == g.switch]
        if not local:
            where = f"PCIe switch {g.switch}" if same_switch else f"NUMA {g.numa}"
            bad.append(f"GPU {g.name}: no fabric NIC on {where}")
            devices.append(g.name)
    if bad:
        return CheckResult(NAME, Status.FAIL, "; ".join(bad), devices)
    scope = "PCIe switch" if same_switch else "NUMA node"
    return CheckResult(NAME, Status.PASS, f"all {len(gpus)} GPUs have a fabric NIC on their {scope}")


def run(ctx) -> CheckResult:
    fs, cfg = ctx.fs, ctx.config["checks"]["gpu_nic_affinity"]
    gpu_devs = ctx.gpus()
    ports = ctx.ports()
    gpus = [Dev(g.bdf, pci.numa_node(fs, g.bdf), g.switch) for g in gpu_devs]
    pcimap = {d.bdf: d for d in ctx.pci_devices()}
    nics, seen = [], set()
    for p in ports:
        if p.device in seen or p.pci is None:
            continue
        seen.add(p.device)
        dev = pcimap.get(p.pci)
        nics.append(Dev(p.device, pci.numa_node(fs, p.pci), dev.switch if dev else None))
    multi = pci.online_numa_nodes(fs) > 1
    return judge(gpus, nics, multi, cfg["same_pcie_switch"], cfg["gpu_nic_map"])
