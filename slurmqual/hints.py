"""Remediation cheat sheet: symptom -> cause -> what to do, per check.

HINTS holds the one-line hint printed with a failure; EXPLAIN the long form
shown by `slurmqual explain CHECK`.
"""

from __future__ import annotations

from .result import Status

HINTS: dict[str, str] = {
    "peermem": "modprobe nvidia-peermem; persist with 'nvidia-peermem' in /etc/modules-load.d/nvidia-peermem.conf",
    "nic_link": "check cable/transceiver and switch port; ibstat / ethtool <if>; reseat or replace, then requalify; "
                "a NIC on PCI without an RDMA device: modprobe mlx5_ib, dmesg | grep mlx5",
    "dcqcn": "mlxconfig -d <dev> set ROCE_CC_PRIO_MASK_P1=255 ROCE_CC_PRIO_MASK_P2=255, then mlxfwreset or reboot; "
             "runtime: echo 1 > /sys/class/net/<if>/ecn/roce_{rp,np}/enable/<prio>",
    "gpu_nic_affinity": "compare 'nvidia-smi topo -m' with the vendor layout; fix BIOS NUMA/ACS settings or riser cabling",
    "gpu_count": "GPU fell off the bus (Xid 79?) or was not enumerated: check dmesg, reseat/RMA, nvidia-smi -r or reboot",
    "pcie_link": "link trained below max (width/speed): reseat the card or riser, check BIOS PCIe gen setting, RMA if it recurs",
    "ib_counters": "errors on the link: clean/replace the cable or transceiver, check the switch port; perfquery -x to watch",
    "versions": "reimage or upgrade the node to the pinned driver/firmware/kernel (mlxfwmanager, driver package)",
}

ERROR_HINT = "slurmqual could not judge this check; see the message, fix the input or report a slurmqual bug"

EXPLAIN: dict[str, str] = {
    "peermem": """GPUDirect RDMA lets the NIC read and write GPU memory directly. Without the
nvidia_peermem module (legacy: nv_peer_mem) NCCL silently falls back to staging
through host memory: all_reduce bus bandwidth drops by half or more, nothing crashes.
Reads: /proc/modules. Sites that use dma-buf instead (node.gpudirect = "dmabuf")
get a check for the open GPU kernel module (>= 515) and Linux >= 5.12.
Fix: modprobe nvidia-peermem; echo nvidia-peermem > /etc/modules-load.d/nvidia-peermem.conf""",
    "nic_link": """Every fabric port (RDMA device in /sys/class/infiniband) must be ACTIVE / LinkUp at
the expected rate (fabric.rate_gbps, else the fastest port on the node), and on RoCE
its netdev (/sys/class/net/<if>/speed) must agree. fabric.nics sets the expected count;
when ports are missing, NIC PCI functions with no RDMA device are named (mlx5_ib not
loaded or the device failed to probe: dmesg | grep mlx5).
NCCL stripes traffic over all rails and runs at the pace of the slowest one: one port
at 200G instead of 400G halves the node. Fix: ibstat / ethtool, reseat or replace the
cable or transceiver, check the switch port, then `slurmqual requalify NODE`.""",
    "dcqcn": """On RoCE, DCQCN congestion control must be enabled for the traffic priorities:
/sys/class/net/<if>/ecn/roce_rp/enable/<prio> (reaction point) and roce_np
(notification point) read 1 for every priority in checks.dcqcn.priorities.
At standard level slurmqual also reads the firmware setting with
`mlxconfig -d <pci> query ROCE_CC_PRIO_MASK_P1 ROCE_CC_PRIO_MASK_P2` (expected 255).
A reimage that loses ROCE_CC_PRIO_MASK_P1=255 leaves a node that floods the fabric;
switches answer with PFC pauses and every other rank waits. InfiniBand: not applicable.
Fix: mlxconfig -d <pci> set ROCE_CC_PRIO_MASK_P1=255 ROCE_CC_PRIO_MASK_P2=255, then
mlxfwreset or reboot.""",
    "gpu_nic_affinity": """Each GPU needs a fabric NIC on its own NUMA node (checks.gpu_nic_affinity.
same_pcie_switch = true: under its own PCIe switch), or GPUDirect traffic crosses the
CPU interconnect. numa_node = -1 on a multi-socket node means the firmware did not
describe the topology. An explicit map (gpu_nic_map) pins GPU PCI address -> NIC.
Fix: compare `nvidia-smi topo -m` with the vendor layout; BIOS NUMA/SRAT and ACS
settings; riser and cable placement.""",
    "gpu_count": """The number of NVIDIA GPUs on PCI (class 0x0300/0x0302; NVSwitch 0x0680 excluded)
must equal node.gpus, and the driver (/proc/driver/nvidia/gpus) must see all of them.
Fix: dmesg for Xid 79 (fallen off the bus); nvidia-smi -r, reboot, reseat, RMA.""",
    "pcie_link": """GPU and NIC links must run at their maximum width (current_link_width vs
max_link_width); NICs also at their maximum speed. GPU link speed is not judged:
GPUs drop to 2.5 GT/s when idle to save power. A link trained at x8 halves host and
GPUDirect bandwidth. checks.pcie_link.on_degraded = "warn" reports without draining.
Fix: reseat the card or riser, check the BIOS PCIe generation, RMA if it recurs.""",
    "ib_counters": """Port error counters (/sys/class/infiniband/<dev>/ports/<n>/counters) must stay
within checks.ib_counters.limits: symbol_error, link_downed, port_rcv_errors, ...
They count since the driver loaded; rising values mark a dirty or failing cable.
Fix: clean or replace the cable/transceiver, check the switch port, watch with perfquery -x.""",
    "versions": """Records the GPU driver (/proc/driver/nvidia/version), NIC firmware
(/sys/class/infiniband/*/fw_ver) and kernel (/proc/sys/kernel/osrelease), and fails
when they differ from checks.versions pins or the node's NICs run mixed firmware.
`slurmqual inventory` shows the fleet and the nodes that differ from the majority.
Fix: reimage or upgrade to the pinned set (driver package, mlxfwmanager).""",
}


def hint_for(check: str, status: Status) -> str:
    if status is Status.ERROR:
        return ERROR_HINT
    return HINTS.get(check, "")
