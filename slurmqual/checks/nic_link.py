"""nic_link: every fabric port present, ACTIVE/LinkUp, at the expected rate.
NCCL runs at the pace of the slowest rail, so one port at 200G slows the job."""

from __future__ import annotations

from ..records import dataclass

from ..probe import rdma
from ..result import CheckResult, Status
from . import CheckSpec

NAME = "nic_link"

SPEC = CheckSpec(
    NAME, 'fast', rank=20,
    summary='every fabric port present, ACTIVE/LinkUp, at the expected rate',
    hint='check cable/transceiver and switch port; ibstat / ethtool <if>; reseat or replace, then requalify; a NIC on PCI without an RDMA device: modprobe mlx5_ib, dmesg | grep mlx5',
    explain="""Every fabric port (RDMA device in /sys/class/infiniband) must be ACTIVE / LinkUp at
the expected rate (fabric.rate_gbps, else the fastest port on the node), and on RoCE
its netdev (/sys/class/net/<if>/speed) must agree. fabric.nics sets the expected count;
when ports are missing, NIC PCI functions with no RDMA device are named (mlx5_ib not
loaded or the device failed to probe: dmesg | grep mlx5).
NCCL stripes traffic over all rails and runs at the pace of the slowest one: one port
at 200G instead of 400G halves the node. Fix: ibstat / ethtool, reseat or replace the
cable or transceiver, check the switch port, then `slurmqual requalify NODE`.""",
)


@dataclass
class PortView:
    name: str
    state: str
    phys_state: str
    rate: float
    link_layer: str
    netdev_speeds: dict[str, float | None]   # RoCE only


def judge(ports: list[PortView], expected_count: int | None, expected_rate: float | None,
          orphans: list[str] = ()) -> CheckResult:
    """orphans: PCI addresses of NIC functions that have no RDMA device (named
    when the count is short: mlx5_ib not loaded, or the device failed to probe)."""
    bad: list[str] = []
    devices: list[str] = []
    if expected_count is not None and len(ports) != expected_count:
        bad.append(f"{len(ports)} fabric ports, expected {expected_count}")
        if len(ports) < expected_count and orphans:
            bad.append(f"NIC functions without an RDMA device: {', '.join(orphans)}")
            devices.extend(orphans)
    if not ports:
        if expected_count:
            return CheckResult(NAME, Status.FAIL, "no fabric ports found in /sys/class/infiniband; "
                               + "; ".join(bad), devices)
        return CheckResult(NAME, Status.NA, "no RDMA devices on this node")
    want = expected_rate if expected_rate is not None else max(p.rate for p in ports)
    for p in ports:
        issues = []
        if p.state != "ACTIVE":
            issues.append(f"state {p.state}")
        if p.phys_state != "LinkUp":
            issues.append(f"phys_state {p.phys_state}")
        if p.rate != want:
            issues.append(f"{p.rate:g} Gb/s (expected {want:g})")
        for ifname, speed in p.netdev_speeds.items():
            if speed is None:
                issues.append(f"{ifname} link down")
            elif speed != want:
                issues.append(f"{ifname} at {speed:g} Gb/s (expected {want:g})")
        if issues:
            devices.append(p.name)
            bad.append(f"{p.name}: {', '.join(issues)}")
    if bad:
        return CheckResult(NAME, Status.FAIL, "; ".join(bad), devices)
    return CheckResult(NAME, Status.PASS, f"{len(ports)} ports ACTIVE at {want:g} Gb/s")


def observe(ctx) -> list[PortView]:
    fs, fabric = ctx.fs, ctx.config["fabric"]
    views = []
    for port in ctx.ports():
        layer = port.attr(fs, "link_layer")
        if fabric["link_layer"] != "auto" and layer.lower() != fabric["link_layer"]:
            continue
        speeds = {}
        if layer == "Ethernet" and fabric["check_netdev_speed"]:
            speeds = {nd: rdma.netdev_speed_gbps(fs, nd) for nd in rdma.netdevs(fs, port)}
        views.append(PortView(port.name, rdma.state_name(port.attr(fs, "state")),
                              rdma.state_name(port.attr(fs, "phys_state")), rdma.rate_gbps(fs, port), layer, speeds))
    return views


def orphan_functions(ctx) -> list[str]:
    """NIC PCI functions with no RDMA device under them (only looked up when
    the port count is short, so the healthy path reads nothing extra)."""
    fs = ctx.fs
    with_rdma = {p.pci for p in ctx.ports()}
    return [d.bdf for d in ctx.pci_devices()
            if d.is_mellanox_nic and d.bdf not in with_rdma and not fs.isdir(f"{d.path}/infiniband")]


def run(ctx) -> CheckResult:
    fabric = ctx.config["fabric"]
    if not ctx.fs.isdir("/sys/class/net"):  # every Linux has it (lo): no sysfs here, so no judgement
        return CheckResult(NAME, Status.ERROR, "no /sys/class/net under the node root: sysfs not available, "
                           "cannot judge the fabric ports")
    ports = observe(ctx)
    orphans: list[str] = []
    if fabric["nics"] is not None and len(ports) < fabric["nics"]:
        orphans = orphan_functions(ctx)
    return judge(ports, fabric["nics"], fabric["rate_gbps"], orphans)
