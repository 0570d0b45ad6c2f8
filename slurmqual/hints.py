"""Remediation cheat sheet: symptom -> cause -> what to do, per check.

HINTS holds the one-line hint printed with a failure; EXPLAIN the long form
shown by `slurmqual explain CHECK`.
"""

from __future__ import annotations

from .result import Status

HINTS: dict[str, str] = {
    "peermem": "modprobe nvidia-peermem; persist with 'nvidia-peermem' in /etc/modules-load.d/nvidia-peermem.conf",
    "nic_link": "check cable/transceiver and switch port; ibstat / ethtool <if>; reseat or replace, then requalify",
    "dcqcn": "mlxconfig -d <dev> set ROCE_CC_PRIO_MASK_P1=255 ROCE_CC_PRIO_MASK_P2=255, then mlxfwreset or reboot; "
             "runtime: echo 1 > /sys/class/net/<if>/ecn/roce_{rp,np}/enable/<prio>",
    "gpu_nic_affinity": "compare 'nvidia-smi topo -m' with the vendor layout; fix BIOS NUMA/ACS settings or riser cabling",
    "gpu_count": "GPU fell off the bus (Xid 79?) or was not enumerated: check dmesg, reseat/RMA, nvidia-smi -r or reboot",
    "pcie_link": "link trained below max (width/speed): reseat the card or riser, check BIOS PCIe gen setting, RMA if it recurs",
    "ib_counters": "errors on the link: clean/replace the cable or transceiver, check the switch port; perfquery -x to watch",
    "versions": "reimage or upgrade the node to the pinned driver/firmware/kernel (mlxfwmanager, driver package)",
}

ERROR_HINT = "slurmqual could not judge this check; see the message, fix the input or report a slurmqual bug"

EXPLAIN: dict[str, str] = {}


def hint_for(check: str, status: Status) -> str:
    if status is Status.ERROR:
        return ERROR_HINT
    return HINTS.get(check, "")
