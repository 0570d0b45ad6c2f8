"""Build node trees laid out like a real GPU node's /sys and /proc.

Used for the bundled examples (`slurmqual examples create`), for tests, and
for the local demo cluster. Layout follows the kernel (Documentation/ABI
sysfs-class-infiniband, sysfs-bus-pci): devices live under /sys/devices/
pci0000:XX/..., and /sys/class/infiniband, /sys/class/net and
/sys/bus/pci/devices hold *relative* symlinks to them, as on a real node.

Topology of the H100 HGX node modelled here: two sockets; each GPU shares a
PCIe switch with one ConnectX-7 NIC; GPUs/NICs 0-3 on NUMA 0, 4-7 on NUMA 1;
four NVSwitch functions; one onboard (non-RDMA) Ethernet port for management.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field, replace

HOST_BRIDGES = [0x15, 0x26, 0x37, 0x48, 0x97, 0xA8, 0xB9, 0xCA, 0x0B, 0x1B, 0x2B, 0x3B, 0x8B, 0x9B, 0xAB, 0xBB]
IB_RATE_NAMES = {100: "4X EDR", 200: "4X HDR", 400: "4X NDR", 800: "4X XDR", 50: "2X HDR", 25: "1X EDR", 40: "4X QDR"}
DEFAULT_MODULES = [
    ("nvidia_peermem", 16384, 0, "-"),
    ("nvidia_uvm", 4648960, 0, "-"),
    ("nvidia_drm", 98304, 0, "-"),
    ("nvidia_modeset", 1355776, 1, "nvidia_drm,"),
    ("nvidia", 56426496, 3, "nvidia_peermem,nvidia_uvm,nvidia_modeset,"),
    ("mlx5_ib", 442368, 0, "-"),
    ("ib_uverbs", 184320, 2, "nvidia_peermem,mlx5_ib,"),
    ("ib_core", 454656, 3, "mlx5_ib,ib_uverbs,nvidia_peermem,"),
    ("mlx5_core", 2330624, 1, "mlx5_ib,"),
]
BRIDGE_UNUSED_LINKS = (4, 5, 10, 11, 16, 17)   # H100 PCIe with 3 NVLink bridges (real output)
COUNTERS = ("symbol_error", "link_downed", "port_rcv_errors", "link_error_recovery",
            "local_link_integrity_errors", "excessive_buffer_overrun_errors", "port_xmit_discards",
            "port_rcv_data", "port_xmit_data")
# AER statistics as drivers/pci/pcie/aer.c (Linux 6.1) names and prints them:
# "%s %llu\n" per error bit, then "TOTAL_ERR_<KIND> %llu\n".
AER_UNCORRECTABLE = ("Undefined", "DLP", "SDES", "TLP", "FCP", "CmpltTO", "CmpltAbrt", "UnxCmplt", "RxOF",
                     "MalfTLP", "ECRC", "UnsupReq", "ACSViol", "UncorrIntErr", "BlockedTLP", "AtomicOpBlocked",
                     "TLPBlockedErr", "PoisonTLPBlocked")
AER_CORRECTABLE = ("RxErr", "BadTLP", "BadDLLP", "Rollover", "Timeout", "NonFatalErr", "CorrIntErr", "HeaderOF")


@dataclass
class NodeSpec:
    """Everything a test may want to vary. Indexes are GPU/NIC ordinals 0..n-1."""

    gpus: int = 8
    nics: int = 8
    link_layer: str = "Ethernet"              # or "InfiniBand"
    rate_gbps: int = 400
    nvswitches: int = 4
    onboard_eth: bool = True
    sockets: int = 2
    modules: list[str] = field(default_factory=lambda: [m[0] for m in DEFAULT_MODULES])
    driver: str = "550.54.15"
    open_kernel_module: bool = False
    kernel: str = "6.1.0-18-amd64"
    nccl: str | None = "2.21.5"   # host libnccl2 (libnccl.so.X.Y.Z); None: not installed
    fw_ver: str = "28.39.1002"
    nic_rate: dict[int, int] = field(default_factory=dict)            # idx -> Gb/s
    nic_state: dict[int, tuple[str, str]] = field(default_factory=dict)  # idx -> (state, phys_state)
    nic_netdev_speed: dict[int, int] = field(default_factory=dict)    # idx -> Mb/s
    nic_fw: dict[int, str] = field(default_factory=dict)
    missing_nics: set[int] = field(default_factory=set)
    no_rdma_nics: set[int] = field(default_factory=set)               # on PCI, no RDMA device (mlx5_ib failed)
    missing_gpus: set[int] = field(default_factory=set)               # not on PCI at all
    gpu_numa: dict[int, int] = field(default_factory=dict)
    nic_numa: dict[int, int] = field(default_factory=dict)
    dcqcn_off: dict[int, list[int]] = field(default_factory=dict)     # idx -> priorities with rp/np = 0
    gpu_link: dict[int, tuple[int, str]] = field(default_factory=dict)  # idx -> (width, speed)
    nic_link: dict[int, tuple[int, str]] = field(default_factory=dict)
    counters: dict[tuple[int, str], int] = field(default_factory=dict)
    # PCIe AER: (device, index, kind) -> {error name: count}; device "gpu", "nic" or
    # "gpu_bridge" (the switch downstream port above GPU i); kind fatal/nonfatal/correctable.
    aer: dict[tuple[str, int, str], dict[str, int]] = field(default_factory=dict)
    uptime_s: float = 86400.0
    # GPU tools' recorded outputs (nvidia-smi -q -x, nvidia-smi nvlink -s), per
    # GPU index overrides of what they report: e.g. {2: {"remap_pending": "Yes"}}
    # (keys: persistence, mig, volatile_dram_unc, remap_pending, remap_failure,
    # retired_dbe, pending_retirement, temp, hw_slowdown, fabric_state,
    # fabric_status, recovery_action).
    gpu_report: dict[int, dict[str, str]] = field(default_factory=dict)
    nvlink_down: dict[int, list[int]] = field(default_factory=dict)   # GPU index -> inactive links
    # H100 PCIe boards joined in pairs (GPU 0-1, 2-3, ...) by NVLink bridges, as a real
    # HPE DL380a pair reports them (tests/data/real/nvidia/SOURCES.tsv): 18 links listed,
    # 4, 5, 10, 11, 16, 17 '<inactive>'; `nvidia-smi topo -m` shows NV12 between the pair.
    nvlink_bridged: bool = False
    fabric_manager: bool = True           # nv-fabricmanager process running
    record_gpu_tools: bool = True
    # Kernel log (/dev/kmsg records): (seconds after boot, message) added after the boot records.
    kmsg: list[tuple[float, str]] = field(default_factory=list)
    boot_id: str = "5b1c2e4f-8a7d-4c3e-9f10-2d6b8e1a7c55"
    dcgm_fail: dict[int, str] = field(default_factory=dict)   # GPU index -> DCGM memory test warning
    # `nvidia-smi nvlink -e`: (GPU index, link) -> {"replay"|"recovery"|"crc": count}
    nvlink_errors: dict[tuple[int, int], dict[str, int]] = field(default_factory=dict)
    # RoCE NICs' `ethtool -S` flow-control counters (PFC on priority 3), idx -> {name: count},
    # e.g. {2: {"tx_pause_storm_error_events": 1}}; and `mlnx_qos -i` trust, idx -> "pcp".
    pause_counters: dict[int, dict[str, int]] = field(default_factory=dict)
    qos_trust: dict[int, str] = field(default_factory=dict)

    @property
    def gpu_product(self) -> str:
        return "NVIDIA H100 PCIe" if self.nvlink_bridged else "NVIDIA H100 80GB HBM3"

    def nvlink_unused(self) -> set[int]:
        """Links nvidia-smi lists that the GPU's NVLink wiring does not use."""
        return set(BRIDGE_UNUSED_LINKS) if self.nvlink_bridged else set()

    def numa_of(self, i: int, kind: str) -> int:
        override = (self.gpu_numa if kind == "gpu" else self.nic_numa).get(i)
        if override is not None:
            return override
        per = max(1, max(self.gpus, self.nics) // max(1, self.sockets))
        return min(i // per, self.sockets - 1) if self.sockets > 1 else 0


def _healthy(link_layer: str) -> NodeSpec:
    return NodeSpec(link_layer=link_layer)


def _roce(**kw) -> NodeSpec:
    return replace(NodeSpec(link_layer="Ethernet"), **kw)


# Named examples shipped with slurmqual: one healthy node per fabric, one per failure.
EXAMPLES: dict[str, tuple[str, NodeSpec]] = {
    "h100-roce-healthy": ("healthy 8x H100 + 8x ConnectX-7 400G RoCE node", _healthy("Ethernet")),
    "h100-ib-healthy": ("healthy 8x H100 + 8x ConnectX-7 NDR InfiniBand node", _healthy("InfiniBand")),
    "no-peermem": ("nvidia_peermem not loaded: GPUDirect RDMA off",
                   _roce(modules=[m[0] for m in DEFAULT_MODULES if m[0] != "nvidia_peermem"])),
    "nic-down": ("mlx5_3 port down (cable pulled)", _roce(nic_state={3: ("1: DOWN", "3: Disabled")}, nic_netdev_speed={3: -1})),
    "nic-slow": ("mlx5_5 trained at 200G instead of 400G", _roce(nic_rate={5: 200}, nic_netdev_speed={5: 200000})),
    "nic-missing": ("only 7 of 8 fabric NICs present", _roce(missing_nics={7})),
    "dcqcn-off": ("DCQCN disabled on mlx5_2 (ROCE_CC_PRIO_MASK lost after reimage)",
                  _roce(dcqcn_off={2: list(range(8))})),
    "numa-misaligned": ("GPU 0's NUMA node has no fabric NIC (NICs 0-3 moved to socket 1)",
                        _roce(nic_numa={0: 1, 1: 1, 2: 1, 3: 1})),
    "gpu-missing": ("GPU 6 fell off the bus", _roce(missing_gpus={6})),
    "pcie-degraded": ("GPU 2 trained at x8, mlx5_4 at 16 GT/s", _roce(gpu_link={2: (8, "32.0 GT/s PCIe")},
                                                                     nic_link={4: (16, "16.0 GT/s PCIe")})),
    "ib-counters-high": ("InfiniBand link with symbol errors and link downs",
                         replace(NodeSpec(link_layer="InfiniBand"), counters={(1, "symbol_error"): 5021, (1, "link_downed"): 3})),
    "pcie-aer-nonfatal": ("GPU 3 logged non-fatal PCIe completion timeouts (AER)",
                          _roce(aer={("gpu", 3, "nonfatal"): {"CmpltTO": 2}})),
    "gpu-remap-pending": ("GPU 2 has a row remap pending after an uncorrectable ECC error (Xid 63)",
                          _roce(gpu_report={2: {"remap_pending": "Yes", "remap_unc": "1", "volatile_dram_unc": "1"}})),
    "gpu-remap-failed": ("GPU 5 ran out of spare rows: row remapping failure", _roce(gpu_report={5: {"remap_failure": "Yes"}})),
    "gpu-mig-on": ("GPU 1 left in MIG mode, persistence mode off", _roce(gpu_report={1: {"mig": "Enabled"},
                                                                                      4: {"persistence": "Disabled"}})),
    "nvlink-down": ("GPU 6 has NVLinks 3 and 11 inactive", _roce(nvlink_down={6: [3, 11]})),
    "nvlink-errors": ("GPU 3 link 7: NVLink replay and CRC errors (bad lane on the baseboard)",
                      _roce(nvlink_errors={(3, 7): {"replay": 412, "crc": 2301}})),
    "roce-pfc-storm": ("mlx5_2 (ens3np0): PFC storm prevention fired (tx_pause_storm_error_events)",
                       _roce(pause_counters={2: {"tx_pause_storm_warning_events": 4, "tx_pause_storm_error_events": 2}})),
    "roce-trust-pcp": ("mlx5_4 (ens5np0) left at priority trust pcp after a reimage (fabric expects dscp)",
                       _roce(qos_trust={4: "pcp"})),
    "dcgm-memory-fail": ("DCGM level-2 memory test fails on GPU 4",
                         _roce(dcgm_fail={4: "Error using CUDA API cudaMemcpy Check DCGM and system logs for errors. "
                                             "Reset GPU. Restart DCGM. Rerun diagnostics."})),
    "xid-79": ("kernel log: GPU 0000:3a:00 fell off the bus (Xid 79) 10 minutes ago",
               _roce(kmsg=[(85800.0, "NVRM: GPU at PCI:0000:3a:00: GPU-5a3d2c02-1b7e-4f0a-9c1d-0c2e8f1a0002"),
                           (85800.1, "NVRM: Xid (PCI:0000:3a:00): 79, pid=0, GPU has fallen off the bus.")])),
    "h100-pcie-bridged-healthy": ("healthy 8x H100 PCIe in 4 NVLink-bridged pairs (12 of the 18 listed links in use)",
                                 _roce(nvswitches=0, nvlink_bridged=True)),
    "fabric-manager-down": ("nvidia-fabricmanager stopped; GPUs stuck in fabric state In Progress",
                            _roce(fabric_manager=False,
                                  gpu_report={i: {"fabric_state": "In Progress", "fabric_status": "N/A"}
                                              for i in range(8)})),
}


def _write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text if text.endswith("\n") else text + "\n")


def _link(link_path: str, target_abs: str) -> None:
    """Create a *relative* symlink like sysfs does."""
    os.makedirs(os.path.dirname(link_path), exist_ok=True)
    rel = os.path.relpath(target_abs, os.path.dirname(link_path))
    if os.path.lexists(link_path):
        os.unlink(link_path)
    os.symlink(rel, link_path)


def _aer_text(kind: str, errors: dict[str, int]) -> str:
    names = AER_CORRECTABLE if kind == "correctable" else AER_UNCORRECTABLE
    lines = [f"{n} {errors.get(n, 0)}" for n in names]
    total = {"fatal": "FATAL", "nonfatal": "NONFATAL", "correctable": "COR"}[kind]
    lines.append(f"TOTAL_ERR_{total} {sum(errors.values())}")
    return "\n".join(lines)


def _pci_device(root: str, devpath: str, bdf: str, vendor: str, device: str, cls: str, numa: int,
                link: tuple[int, str] = (16, "32.0 GT/s PCIe"), max_link: tuple[int, str] = (16, "32.0 GT/s PCIe"),
                aer: dict[str, dict[str, int]] | None = None) -> str:
    d = root + devpath
    for kind in ("fatal", "nonfatal", "correctable"):
        _write(f"{d}/aer_dev_{kind}", _aer_text(kind, (aer or {}).get(kind, {})))
    for name, value in (("vendor", vendor), ("device", device), ("class", cls), ("numa_node", str(numa)),
                        ("current_link_width", str(link[0])), ("current_link_speed", link[1]),
                        ("max_link_width", str(max_link[0])), ("max_link_speed", max_link[1]),
                        ("subsystem_vendor", vendor), ("local_cpulist", "0-55" if numa == 0 else "56-111")):
        _write(f"{d}/{name}", value)
    _link(f"{root}/sys/bus/pci/devices/{bdf}", d)
    return d


def _aer_of(spec: NodeSpec, device: str, i: int) -> dict[str, dict[str, int]]:
    return {kind: errs for (dev, idx, kind), errs in spec.aer.items() if dev == device and idx == i}


def _bridge_chain(root: str, hb: int, numa: int) -> tuple[str, str]:
    """Root port -> switch upstream port; returns (switch upstream devpath, its secondary bus hex)."""
    rp = f"/sys/devices/pci0000:{hb:02x}/0000:{hb:02x}:01.0"
    _pci_device(root, rp, f"0000:{hb:02x}:01.0", "0x8086", "0x352a", "0x060400", numa)
    up = f"{rp}/0000:{hb + 1:02x}:00.0"
    _pci_device(root, up, f"0000:{hb + 1:02x}:00.0", "0x1000", "0xc030", "0x060400", numa)  # Broadcom PEX switch
    return up, f"{hb + 2:02x}"


def build_spec(spec: NodeSpec, dest: str) -> str:
    """Write the tree for `spec` under `dest` (which is treated as `/`)."""
    root = os.path.abspath(dest)
    os.makedirs(root, exist_ok=True)
    nodes = ",".join(str(i) for i in range(spec.sockets))
    _write(f"{root}/sys/devices/system/node/online", f"0-{spec.sockets - 1}" if spec.sockets > 1 else "0")
    _write(f"{root}/sys/devices/system/node/possible", f"0-{spec.sockets - 1}" if spec.sockets > 1 else "0")
    for n in nodes.split(","):
        os.makedirs(f"{root}/sys/devices/system/node/node{n}", exist_ok=True)
    os.makedirs(f"{root}/sys/class/infiniband", exist_ok=True)
    os.makedirs(f"{root}/sys/class/net", exist_ok=True)
    # The board's identity as the kernel shows it (hwid.py reads these).
    for name, value in (("board_serial", "OM23BS012345"), ("chassis_serial", "C8150LK23A0042"),
                        ("product_serial", "S411A23B0042")):
        _write(f"{root}/sys/class/dmi/id/{name}", value)

    gpu_infos = []
    for i in range(max(spec.gpus, spec.nics)):
        hb = HOST_BRIDGES[i]
        numa_g = spec.numa_of(i, "gpu")
        up, sec = _bridge_chain(root, hb, numa_g)
        gpu_bus, nic_bus = hb + 3, hb + 4
        if i < spec.gpus and i not in spec.missing_gpus:
            dsp = f"{up}/0000:{sec}:00.0"
            _pci_device(root, dsp, f"0000:{sec}:00.0", "0x1000", "0xc030", "0x060400", numa_g,
                        aer=_aer_of(spec, "gpu_bridge", i))
            bdf = f"0000:{gpu_bus:02x}:00.0"
            width, speed = spec.gpu_link.get(i, (16, "32.0 GT/s PCIe"))
            _pci_device(root, f"{dsp}/{bdf}", bdf, "0x10de", "0x2330", "0x030200", numa_g, (width, speed),
                        aer=_aer_of(spec, "gpu", i))
            gpu_infos.append(bdf)
        if i < spec.nics and i not in spec.missing_nics:
            numa_n = spec.numa_of(i, "nic")
            dsp = f"{up}/0000:{sec}:01.0"
            _pci_device(root, dsp, f"0000:{sec}:01.0", "0x1000", "0xc030", "0x060400", numa_n)
            bdf = f"0000:{nic_bus:02x}:00.0"
            cls = "0x020700" if spec.link_layer == "InfiniBand" else "0x020000"
            width, speed = spec.nic_link.get(i, (16, "32.0 GT/s PCIe"))
            nic = _pci_device(root, f"{dsp}/{bdf}", bdf, "0x15b3", "0x1021", cls, numa_n, (width, speed),
                              aer=_aer_of(spec, "nic", i))
            if i in spec.no_rdma_nics:
                _netdev(root, nic, f"ens{i + 1}np0", spec.rate_gbps * 1000, ecn=spec.link_layer == "Ethernet")
            else:
                _rdma_device(root, spec, i, nic, bdf)

    for s in range(spec.nvswitches):
        hb = 0x60 + s
        rp = f"/sys/devices/pci0000:{hb:02x}/0000:{hb:02x}:01.0"
        _pci_device(root, rp, f"0000:{hb:02x}:01.0", "0x8086", "0x352a", "0x060400", 0 if s < 2 else 1)
        bdf = f"0000:{hb + 1:02x}:00.0"
        _pci_device(root, f"{rp}/{bdf}", bdf, "0x10de", "0x22a3", "0x068000", 0 if s < 2 else 1)

    if spec.onboard_eth:
        rp = "/sys/devices/pci0000:00/0000:00:1c.0"
        _pci_device(root, rp, "0000:00:1c.0", "0x8086", "0x1bb8", "0x060400", 0)
        nic = _pci_device(root, f"{rp}/0000:03:00.0", "0000:03:00.0", "0x14e4", "0x165f", "0x020000", 0,
                          (1, "5.0 GT/s PCIe"), (1, "5.0 GT/s PCIe"))
        _netdev(root, nic, "eno1", 1000, ecn=False)

    _write_proc(root, spec, gpu_infos)
    return root


def _netdev(root: str, pcidev: str, name: str, speed_mbps: int, ecn: bool, off_prios: list[int] = ()) -> None:
    d = f"{pcidev}/net/{name}"
    os.makedirs(d, exist_ok=True)
    if not os.path.lexists(f"{d}/device"):
        os.symlink("../../../" + os.path.basename(pcidev), f"{d}/device")
    _write(f"{d}/speed", str(speed_mbps))
    _write(f"{d}/operstate", "up" if speed_mbps > 0 else "down")
    _write(f"{d}/mtu", "9000" if ecn else "1500")
    if ecn:
        for kind in ("roce_rp", "roce_np"):
            for p in range(8):
                _write(f"{d}/ecn/{kind}/enable/{p}", "0" if p in off_prios else "1")
        _write(f"{d}/ecn/roce_np/cnp_dscp", "48")
    _link(f"{root}/sys/class/net/{name}", d)


def _rdma_device(root: str, spec: NodeSpec, i: int, pcidev: str, bdf: str) -> None:
    name = f"mlx5_{i}"
    d = f"{pcidev}/infiniband/{name}"
    _write(f"{d}/fw_ver", spec.nic_fw.get(i, spec.fw_ver))
    _write(f"{d}/hca_type", "MT4129")
    _write(f"{d}/node_type", "1: CA")
    _write(f"{d}/node_desc", f"node {name}")
    _write(f"{d}/node_guid", f"b83f:d203:00{i:02x}:4c1e")
    os.symlink(f"../../../{bdf}", f"{d}/device")  # exactly as sysfs writes it
    rate = spec.nic_rate.get(i, spec.rate_gbps)
    state, phys = spec.nic_state.get(i, ("4: ACTIVE", "5: LinkUp"))
    p = f"{d}/ports/1"
    _write(f"{p}/state", state)
    _write(f"{p}/phys_state", phys)
    _write(f"{p}/rate", f"{rate} Gb/sec ({IB_RATE_NAMES.get(rate, '4X')})")
    _write(f"{p}/link_layer", spec.link_layer)
    _write(f"{p}/lid", "0x0" if spec.link_layer == "Ethernet" else f"0x{0x10 + i:x}")
    for c in COUNTERS:
        _write(f"{p}/counters/{c}", str(spec.counters.get((i, c), 0)))
    _link(f"{root}/sys/class/infiniband/{name}", d)
    if spec.link_layer == "Ethernet":
        netdev = f"ens{i + 1}np0"
        speed = spec.nic_netdev_speed.get(i, rate * 1000)
        _netdev(root, pcidev, netdev, speed, ecn=True, off_prios=spec.dcqcn_off.get(i, []))
        _write(f"{p}/gid_attrs/ndevs/0", netdev)
        record_output(root, ["ethtool", "-S", netdev], ethtool_stats(spec.pause_counters.get(i, {})))
        record_output(root, ["mlnx_qos", "-i", netdev], mlnx_qos(spec.qos_trust.get(i, "dscp")))
    else:
        _netdev(root, pcidev, f"ibp{int(bdf[5:7], 16)}s0", rate * 1000, ecn=False)


def _write_proc(root: str, spec: NodeSpec, gpu_bdfs: list[str]) -> None:
    sizes = {m[0]: m for m in DEFAULT_MODULES}
    lines = []
    for n, name in enumerate(spec.modules):
        _name, size, refs, deps = sizes.get(name, (name, 16384, 0, "-"))
        taint = " (POE)" if name.startswith("nvidia") else ""
        lines.append(f"{name} {size} {refs} {deps} Live 0x0000000000000000{taint}")
    _write(f"{root}/proc/modules", "\n".join(lines))
    # The two real first-line formats (proprietary / open GPU kernel module).
    if spec.open_kernel_module:
        nvrm = (f"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {spec.driver}  Release Build  "
                f"(dvs-builder@U16-I3-B03-4-3)  Tue Mar  5 22:23:56 UTC 2024")
    else:
        nvrm = f"NVRM version: NVIDIA UNIX x86_64 Kernel Module  {spec.driver}  Tue Mar  5 22:23:56 UTC 2024"
    _write(f"{root}/proc/driver/nvidia/version", f"{nvrm}\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14)")
    for n, bdf in enumerate(gpu_bdfs):
        _write(f"{root}/proc/driver/nvidia/gpus/{bdf}/information",
               f"Model: \t\t {spec.gpu_product}\nIRQ:   \t\t {300 + n}\n"
               f"GPU UUID: \t GPU-5a3d2c{n:02d}-1b7e-4f0a-9c1d-0c2e8f1a{n:04d}\nVideo BIOS: \t 96.00.99.00.01\n"
               f"Bus Type: \t PCIe\nDMA Size: \t 52 bits\nDMA Mask: \t 0xfffffffffffff\n"
               f"Bus Location: \t {bdf}\nDevice Minor: \t {n}\nGPU Excluded:\t No")
    _write(f"{root}/proc/sys/kernel/osrelease", spec.kernel)
    _write(f"{root}/proc/uptime", f"{spec.uptime_s:.2f} {spec.uptime_s * 100:.2f}")
    _write(f"{root}/proc/1/comm", "systemd")
    _write(f"{root}/proc/sys/kernel/random/boot_id", spec.boot_id)
    _write_kmsg(root, spec)
    if spec.fabric_manager and spec.nvswitches:
        _write(f"{root}/proc/4242/comm", "nv-fabricmanage")   # comm is cut at 15 characters
    if spec.record_gpu_tools and gpu_bdfs:
        record_output(root, ["nvidia-smi", "-q", "-x"], smi_xml(spec, gpu_bdfs))
        record_output(root, ["nvidia-smi", "nvlink", "-s"], nvlink_status(spec, len(gpu_bdfs)))
        record_output(root, ["nvidia-smi", "nvlink", "-e"], nvlink_errors(spec, len(gpu_bdfs)))
        record_output(root, ["nvidia-smi", "topo", "-m"], topo_matrix(spec, len(gpu_bdfs)))
        record_output(root, ["dcgmi", "diag", "-r", "2", "-j"], dcgm_diag(spec, len(gpu_bdfs)),
                      rc=226 if spec.dcgm_fail else 0)
    if spec.nccl:  # as Debian/Ubuntu's libnccl2 installs it: real file plus soname links
        libdir = f"{root}/usr/lib/x86_64-linux-gnu"
        _write(f"{libdir}/libnccl.so.{spec.nccl}", "ELF")
        os.symlink(f"libnccl.so.{spec.nccl}", f"{libdir}/libnccl.so.{spec.nccl.split('.')[0]}")


RECORDED_DIR = "/var/lib/slurmqual-recorded"

BOOT_RECORDS = [
    (0.0, 5, "Linux version {kernel} (debian-kernel@lists.debian.org) (gcc-12 (Debian 12.2.0-14) 12.2.0) #1 SMP "
              "PREEMPT_DYNAMIC Debian 6.1.76-1 (2024-02-01)"),
    (18.204113, 6, "nvidia-nvlink: Nvlink Core is being initialized, major device number 236"),
    (18.771405, 5, "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  {driver}  Tue Mar  5 22:23:56 UTC 2024"),
    (24.112907, 6, "mlx5_core 0000:19:00.0 mlx5_0: Port: 1 Link ACTIVE"),
]


def _write_kmsg(root: str, spec: NodeSpec) -> None:
    """/dev/kmsg as `cat /dev/kmsg` prints it: 'prio,seq,usec,flags;message'."""
    lines = []
    records = [(t, p, m.format(kernel=spec.kernel, driver=spec.driver)) for t, p, m in BOOT_RECORDS]
    records += [(t, 4, m) for t, m in spec.kmsg]
    for seq, (t, prio, msg) in enumerate(sorted(records, key=lambda r: r[0])):
        lines.append(f"{prio},{seq},{int(t * 1e6)},-;{msg}")
    _write(f"{root}/dev/kmsg", "\n".join(lines))


def add_kmsg(root: str, message: str, seconds_after_boot: float, prio: int = 4) -> None:
    """Append one kernel log record (the next sequence number) to a tree's /dev/kmsg."""
    path = f"{root}/dev/kmsg"
    with open(path, encoding="utf-8") as fh:
        lines = [ln for ln in fh.read().splitlines() if ln]
    seq = int(lines[-1].split(",")[1]) + 1 if lines else 0
    lines.append(f"{prio},{seq},{int(seconds_after_boot * 1e6)},-;{message.replace(chr(10), chr(92) + 'x0a')}")
    _replace(path, "\n".join(lines) + "\n")


def record_output(root: str, argv: list[str], stdout: str, rc: int = 0) -> None:
    """Record what a tool prints on this node; at standard level a check run on
    the tree reads it instead of running the tool (checks.recorded_output)."""
    name = "_".join(a.replace("/", "%") for a in argv)
    _write(f"{root}{RECORDED_DIR}/{name}.out", stdout)
    rc_file = f"{root}{RECORDED_DIR}/{name}.rc"
    if rc:
        _write(rc_file, str(rc))
    elif os.path.exists(rc_file):
        os.unlink(rc_file)


def record_mlxconfig(root: str, stdout: str, rc: int = 0, hang: bool = False) -> str:
    """What `mlxconfig ... query ROCE_CC_PRIO_MASK_P1 ROCE_CC_PRIO_MASK_P2`
    prints on the tree's node, recorded for every RDMA device (`hang`: the
    tool hangs there). Returns the root."""
    import glob

    for dev in sorted(glob.glob(f"{root}/sys/class/infiniband/*/device")):
        argv = ["mlxconfig", "-d", os.path.basename(os.path.realpath(dev)), "query",
                "ROCE_CC_PRIO_MASK_P1", "ROCE_CC_PRIO_MASK_P2"]
        record_output(root, argv, stdout, rc)
        hang_file = f"{root}{RECORDED_DIR}/{'_'.join(a.replace('/', '%') for a in argv)}.hang"
        if hang:
            _write(hang_file, "")
        elif os.path.exists(hang_file):
            os.unlink(hang_file)
    return root


def _gpu_xml(spec: NodeSpec, n: int, bdf: str) -> str:
    """One <gpu> element with the tags and nesting of a real driver 550
    `nvidia-smi -q -x` (sections the checks read, plus identity)."""
    r = {"persistence": "Enabled", "mig": "Disabled", "volatile_dram_unc": "0", "remap_corr": "0", "remap_unc": "0",
         "remap_pending": "No", "remap_failure": "No", "temp": "34 C", "hw_slowdown": "Not Active",
         "fabric_state": "Completed" if spec.nvswitches else "N/A",
         "fabric_status": "Success" if spec.nvswitches else "N/A", "recovery_action": "None"}
    r.update(spec.gpu_report.get(n, {}))
    domain, rest = bdf.split(":", 1)
    busid = f"0000{domain}:{rest}".upper()
    i = "\t\t"
    return "\n".join([
        f'\t<gpu id="{busid}">',
        f"{i}<product_name>{spec.gpu_product}</product_name>",
        f"{i}<product_brand>NVIDIA</product_brand>",
        f"{i}<product_architecture>Hopper</product_architecture>",
        f"{i}<persistence_mode>{r['persistence']}</persistence_mode>",
        f"{i}<mig_mode>\n{i}\t<current_mig>{r['mig']}</current_mig>\n{i}\t<pending_mig>{r['mig']}</pending_mig>\n{i}</mig_mode>",
        f"{i}<serial>16523230{n:05d}</serial>",
        f"{i}<uuid>GPU-5a3d2c{n:02d}-1b7e-4f0a-9c1d-0c2e8f1a{n:04d}</uuid>",
        f"{i}<minor_number>{n}</minor_number>",
        f"{i}<gpu_recovery_action>{r['recovery_action']}</gpu_recovery_action>",
        f"{i}<pci>\n{i}\t<pci_bus_id>{busid}</pci_bus_id>\n{i}</pci>",
        f"{i}<clocks_event_reasons>",
        f"{i}\t<clocks_event_reason_gpu_idle>Active</clocks_event_reason_gpu_idle>",
        f"{i}\t<clocks_event_reason_sw_power_cap>Not Active</clocks_event_reason_sw_power_cap>",
        f"{i}\t<clocks_event_reason_hw_slowdown>{r['hw_slowdown']}</clocks_event_reason_hw_slowdown>",
        f"{i}\t<clocks_event_reason_hw_thermal_slowdown>Not Active</clocks_event_reason_hw_thermal_slowdown>",
        f"{i}\t<clocks_event_reason_hw_power_brake_slowdown>Not Active</clocks_event_reason_hw_power_brake_slowdown>",
        f"{i}\t<clocks_event_reason_sw_thermal_slowdown>Not Active</clocks_event_reason_sw_thermal_slowdown>",
        f"{i}</clocks_event_reasons>",
        f"{i}<ecc_mode>\n{i}\t<current_ecc>Enabled</current_ecc>\n{i}\t<pending_ecc>Enabled</pending_ecc>\n{i}</ecc_mode>",
        f"{i}<ecc_errors>",
        f"{i}\t<volatile>\n{i}\t\t<sram_correctable>0</sram_correctable>\n{i}\t\t<sram_uncorrectable>0</sram_uncorrectable>",
        f"{i}\t\t<dram_correctable>0</dram_correctable>\n{i}\t\t<dram_uncorrectable>{r['volatile_dram_unc']}</dram_uncorrectable>",
        f"{i}\t</volatile>",
        f"{i}\t<aggregate>\n{i}\t\t<sram_correctable>0</sram_correctable>\n{i}\t\t<sram_uncorrectable>0</sram_uncorrectable>",
        f"{i}\t\t<dram_correctable>0</dram_correctable>\n{i}\t\t<dram_uncorrectable>{r['volatile_dram_unc']}</dram_uncorrectable>",
        f"{i}\t</aggregate>",
        f"{i}</ecc_errors>",
        f"{i}<retired_pages>",
        f"{i}\t<multiple_single_bit_retirement>\n{i}\t\t<retired_count>N/A</retired_count>\n{i}\t</multiple_single_bit_retirement>",
        f"{i}\t<double_bit_retirement>\n{i}\t\t<retired_count>N/A</retired_count>\n{i}\t</double_bit_retirement>",
        f"{i}\t<pending_blacklist>N/A</pending_blacklist>\n{i}\t<pending_retirement>N/A</pending_retirement>",
        f"{i}</retired_pages>",
        f"{i}<remapped_rows>",
        f"{i}\t<remapped_row_corr>{r['remap_corr']}</remapped_row_corr>",
        f"{i}\t<remapped_row_unc>{r['remap_unc']}</remapped_row_unc>",
        f"{i}\t<remapped_row_pending>{r['remap_pending']}</remapped_row_pending>",
        f"{i}\t<remapped_row_failure>{r['remap_failure']}</remapped_row_failure>",
        f"{i}</remapped_rows>",
        f"{i}<temperature>",
        f"{i}\t<gpu_temp>{r['temp']}</gpu_temp>",
        f"{i}\t<gpu_temp_max_threshold>92 C</gpu_temp_max_threshold>",
        f"{i}\t<gpu_temp_slow_threshold>89 C</gpu_temp_slow_threshold>",
        f"{i}</temperature>",
        f"{i}<fabric>\n{i}\t<state>{r['fabric_state']}</state>\n{i}\t<status>{r['fabric_status']}</status>\n{i}</fabric>",
        "\t</gpu>",
    ])


def smi_xml(spec: NodeSpec, gpu_bdfs: list[str]) -> str:
    head = ['<?xml version="1.0" ?>', '<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">', "<nvidia_smi_log>",
            "\t<timestamp>Tue Mar  5 22:30:00 2024</timestamp>", f"\t<driver_version>{spec.driver}</driver_version>",
            "\t<cuda_version>12.4</cuda_version>", f"\t<attached_gpus>{len(gpu_bdfs)}</attached_gpus>"]
    gpus = [_gpu_xml(spec, n, bdf) for n, bdf in enumerate(gpu_bdfs)]
    return "\n".join(head + gpus + ["</nvidia_smi_log>"])


def dcgm_diag(spec: NodeSpec, n_gpus: int) -> str:
    """`dcgmi diag -r 2 -j` in DCGM 3.x's layout (categories > tests > per-GPU results)."""
    import json

    def per_gpu(name: str) -> dict:
        results = []
        for g in range(n_gpus):
            r = {"gpu_ids": str(g), "status": "PASS"}
            if name == "Memory" and g in spec.dcgm_fail:
                r = {"gpu_ids": str(g), "status": "FAIL", "warnings": [{"warning": spec.dcgm_fail[g], "error_id": 9,
                                                                        "error_category": 4, "error_severity": 2}]}
            results.append(r)
        return {"name": name, "results": results}

    deployment = [{"name": n, "results": [{"gpu_ids": ",".join(map(str, range(n_gpus))), "status": "PASS"}]}
                  for n in ("Denylist", "NVML Library", "CUDA Main Library", "Permissions and OS-related Blocks",
                            "Persistence Mode", "Environmental Variables", "Page Retirement/Row Remap",
                            "Graphics Processes", "Inforom")]
    doc = {"DCGM GPU Diagnostic": {"test_categories": [
        {"category": "Deployment", "tests": deployment},
        {"category": "Integration", "tests": [per_gpu("PCIe")]},
        {"category": "Hardware", "tests": [per_gpu("GPU Memory"), per_gpu("Memory")]},
    ], "version": "3.3.5"}}
    return json.dumps(doc, indent="\t")


def _nvlink_report(spec: NodeSpec, n_gpus: int, links_of) -> str:
    """nvidia-smi's per-GPU NVLink layout: a GPU line, then `links_of(n, down)`'s
    lines, or NVML's message when every link of the GPU is inactive."""
    lines = []
    for n in range(n_gpus):
        lines.append(f"GPU {n}: {spec.gpu_product} (UUID: GPU-5a3d2c{n:02d}-1b7e-4f0a-9c1d-0c2e8f1a{n:04d})")
        down = spec.nvlink_down.get(n, [])
        if len(set(down) | spec.nvlink_unused()) >= 18:
            lines.append("NVML: Unable to retrieve NVLink information as all links are inactive")
            continue
        lines += links_of(n, down)
    return "\n".join(lines)


def nvlink_status(spec: NodeSpec, n_gpus: int) -> str:
    """`nvidia-smi nvlink -s` as driver 5xx prints it on an H100 SXM (18 links)
    or a bridged H100 PCIe (18 listed, the unused ones '<inactive>')."""
    unused = spec.nvlink_unused()
    return _nvlink_report(spec, n_gpus, lambda n, down: [
        f"\t Link {link}: " + ("<inactive>" if link in down or link in unused else "26.562 GB/s")
        for link in range(18)])


def topo_matrix(spec: NodeSpec, n_gpus: int) -> str:
    """`nvidia-smi topo -m` (GPU part, space-separated, driver 555 layout): NV18
    to every peer through NVSwitches, NV12 between bridged pairs, else NODE
    within a socket and SYS across."""
    head = "        " + "".join(f"GPU{j:<5}" for j in range(n_gpus)) + "CPU Affinity    NUMA Affinity   GPU NUMA ID"
    rows = [head]
    for a in range(n_gpus):
        cells = []
        for b in range(n_gpus):
            if a == b:
                cells.append(" X  ")
            elif spec.nvlink_bridged and a // 2 == b // 2:
                cells.append("NV12")
            elif spec.nvswitches and not spec.nvlink_bridged:
                cells.append("NV18")                  # every peer through the NVSwitches
            else:
                cells.append("NODE" if spec.numa_of(a, "gpu") == spec.numa_of(b, "gpu") else "SYS")
        numa = spec.numa_of(a, "gpu")
        rows.append(f"GPU{a:<5}" + "".join(f"{c:<8}" for c in cells) + f"{'0-55' if numa == 0 else '56-111':<16}"
                    f"{numa:<16}N/A")
    return "\n".join(rows + ["", "Legend:", "", "  X    = Self", "  NV#  = Connection traversing a bonded set of # NVLinks"])


def nvlink_errors(spec: NodeSpec, n_gpus: int) -> str:
    """`nvidia-smi nvlink -e` as driver 5xx prints it on an H100 SXM: three
    counters per link, a blank line between links (real output: SOURCES.tsv)."""
    def links_of(n: int, down: list[int]) -> list[str]:
        out = []
        links = [link for link in range(18) if link not in down and link not in spec.nvlink_unused()]
        for k, link in enumerate(links):
            errs = spec.nvlink_errors.get((n, link), {})
            for label, key in (("Replay Errors", "replay"), ("Recovery Errors", "recovery"), ("CRC Errors", "crc")):
                out.append(f"\t Link {link}: {label}: {errs.get(key, 0)}")
            if k < len(links) - 1:
                out.append("")
        return out

    return _nvlink_report(spec, n_gpus, links_of)


def ethtool_stats(overrides: dict[str, int]) -> str:
    """`ethtool -S <netdev>` of a ConnectX-7 (mlx5_core) with PFC on priority 3:
    the physical-port and per-priority groups in en_stats.c's order (the
    per-channel counters are left out); overrides replace counter values."""
    values: dict[str, int] = {"rx_packets": 7210394411, "rx_bytes": 29981772301448, "tx_packets": 7198023551,
                              "tx_bytes": 29930018440212, "rx_out_of_buffer": 0, "rx_discards_phy": 0,
                              "tx_discards_phy": 0, "rx_pcs_symbol_err_phy": 0, "rx_corrected_bits_phy": 0,
                              "link_down_events_phy": 0, "rx_pause_ctrl_phy": 0, "tx_pause_ctrl_phy": 0}
    for p in range(8):
        traffic = 7190000000 if p == 3 else 0
        values |= {f"rx_prio{p}_bytes": traffic * 4096, f"rx_prio{p}_packets": traffic, f"rx_prio{p}_discards": 0,
                   f"tx_prio{p}_bytes": traffic * 4096, f"tx_prio{p}_packets": traffic}
    values |= {"rx_prio3_pause": 0, "rx_prio3_pause_duration": 0, "tx_prio3_pause": 0, "tx_prio3_pause_duration": 0,
               "rx_prio3_pause_transition": 0, "tx_pause_storm_warning_events": 0, "tx_pause_storm_error_events": 0,
               "module_unplug": 0, "module_bus_stuck": 0, "module_high_temp": 0, "module_bad_shorted": 0}
    values |= overrides
    return "NIC statistics:\n" + "\n".join(f"     {k}: {v}" for k, v in values.items())


def mlnx_qos(trust: str) -> str:
    """`mlnx_qos -i <netdev>` (mlnx-tools) with OS-controlled DCBX and PFC on
    priority 3, as the real outputs in ../shared/samples/mlx show it."""
    lines = ["DCBX mode: OS controlled", f"Priority trust state: {trust}"]
    if trust == "dscp":
        lines.append("dscp2prio mapping:")
        for p in range(8):
            lines.append(f"        prio:{p} dscp:" + "".join(f"{d:02d}," for d in range(p * 8 + 7, p * 8 - 1, -1)))
    lines += ["Receive buffer size (bytes): 130944,130944,0,0,0,0,0,0,", "Cable len: 7", "PFC configuration:",
              "        priority    0   1   2   3   4   5   6   7",
              "        enabled     0   0   0   1   0   0   0   0   ",
              "        buffer      0   0   0   1   0   0   0   0   "]
    for tc, prio in enumerate((1, 0, 2, 3, 4, 5, 6, 7)):
        lines += [f"tc: {tc} ratelimit: unlimited, tsa: vendor", f"         priority:  {prio}"]
    return "\n".join(lines)


def build(name_or_spec: str | NodeSpec, dest: str) -> str:
    """Materialise a named example (see EXAMPLES) or a NodeSpec under dest."""
    if isinstance(name_or_spec, str):
        if name_or_spec not in EXAMPLES:
            raise KeyError(f"unknown example {name_or_spec!r}; known: {', '.join(EXAMPLES)}")
        spec = EXAMPLES[name_or_spec][1]
    else:
        spec = name_or_spec
    if os.path.exists(dest):
        shutil.rmtree(dest)
    return build_spec(spec, dest)


# -- break / repair an existing tree (integration tests, demo) --------------

def _modules(root: str) -> list[str]:
    with open(f"{root}/proc/modules", encoding="utf-8") as fh:
        return fh.read().splitlines()


def remove_module(root: str, module: str) -> None:
    """Unload a module from the tree's /proc/modules (atomic rename)."""
    lines = [ln for ln in _modules(root) if ln.split(" ", 1)[0] != module]
    _replace(f"{root}/proc/modules", "\n".join(lines) + "\n")


def add_module(root: str, module: str) -> None:
    lines = _modules(root)
    if not any(ln.split(" ", 1)[0] == module for ln in lines):
        lines.insert(0, f"{module} 16384 0 - Live 0x0000000000000000 (POE)")
    _replace(f"{root}/proc/modules", "\n".join(lines) + "\n")


def set_port_attr(root: str, nic: int, attr: str, value: str) -> None:
    """E.g. set_port_attr(root, 3, "state", "1: DOWN")."""
    _replace(f"{root}/sys/class/infiniband/mlx5_{nic}/ports/1/{attr}", value + "\n")


def set_dcqcn(root: str, nic: int, enabled: bool, priorities=range(8)) -> None:
    """Switch DCQCN rp/np on or off for RoCE NIC `nic` (its netdev ens<nic+1>np0)."""
    for kind in ("roce_rp", "roce_np"):
        for p in priorities:
            _replace(f"{root}/sys/class/net/ens{nic + 1}np0/ecn/{kind}/enable/{p}", "1\n" if enabled else "0\n")


def set_pci_attr(root: str, bdf: str, attr: str, value: str) -> None:
    """E.g. set_pci_attr(root, "0000:18:00.0", "current_link_width", "8")."""
    _replace(f"{root}/sys/bus/pci/devices/{bdf}/{attr}", value + "\n")


def _replace(path: str, text: str) -> None:
    real = os.path.realpath(path)
    tmp = f"{real}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, real)


def set_aer(root: str, bdf: str, kind: str, errors: dict[str, int]) -> None:
    """Rewrite one AER statistics file, e.g. set_aer(root, bdf, "nonfatal", {"CmpltTO": 2})."""
    _replace(f"{root}/sys/bus/pci/devices/{bdf}/aer_dev_{kind}", _aer_text(kind, errors) + "\n")


def set_nvlink_errors(root: str, errors: dict[tuple[int, int], dict[str, int]], n_gpus: int = 8) -> None:
    """Re-record `nvidia-smi nvlink -e` with these counters, e.g.
    set_nvlink_errors(root, {(3, 7): {"replay": 5}}) (the counters never go down
    on a real node until a reset)."""
    _record_atomic(root, ["nvidia-smi", "nvlink", "-e"], nvlink_errors(NodeSpec(nvlink_errors=errors), n_gpus))


def set_pause_counters(root: str, nic: int, counters: dict[str, int]) -> None:
    """Re-record `ethtool -S ens<nic+1>np0` with these flow-control counter values."""
    _record_atomic(root, ["ethtool", "-S", f"ens{nic + 1}np0"], ethtool_stats(counters))


def set_qos_trust(root: str, nic: int, trust: str) -> None:
    """Re-record `mlnx_qos -i ens<nic+1>np0` with this priority trust ("dscp", "pcp")."""
    _record_atomic(root, ["mlnx_qos", "-i", f"ens{nic + 1}np0"], mlnx_qos(trust))


def set_dcgm_fail(root: str, failures: dict[int, str], n_gpus: int = 8) -> None:
    """Re-record `dcgmi diag -r 2 -j` with these GPUs failing the memory test
    (GPU index -> DCGM's warning); {} records a passing run."""
    _record_atomic(root, ["dcgmi", "diag", "-r", "2", "-j"], dcgm_diag(NodeSpec(dcgm_fail=failures), n_gpus),
                   rc=226 if failures else 0)


def _record_atomic(root: str, argv: list[str], stdout: str, rc: int = 0) -> None:
    """Replace a recorded output in one rename, so a hook reading it meanwhile
    (the health check of a running test cluster) never sees half a file."""
    name = "_".join(a.replace("/", "%") for a in argv)
    rc_file = f"{root}{RECORDED_DIR}/{name}.rc"
    if rc:
        _replace(rc_file, str(rc))
    elif os.path.exists(rc_file):
        os.unlink(rc_file)
    _replace(f"{root}{RECORDED_DIR}/{name}.out", stdout if stdout.endswith("\n") else stdout + "\n")


def set_gpu_serial(root: str, index: int, serial: str, uuid: str | None = None) -> None:
    """Re-record `nvidia-smi -q -x` with GPU `index` carrying another serial
    (and UUID): what a GPU swap looks like to the hooks (hwid.py)."""
    import re

    path = f"{root}{RECORDED_DIR}/nvidia-smi_-q_-x.out"
    with open(path, encoding="utf-8") as fh:
        parts = re.split(r"(?=<gpu id=)", fh.read())
    block = parts[index + 1]
    block = re.sub(r"<serial>[^<]*</serial>", f"<serial>{serial}</serial>", block, count=1)
    if uuid:
        block = re.sub(r"<uuid>[^<]*</uuid>", f"<uuid>{uuid}</uuid>", block, count=1)
    parts[index + 1] = block
    _record_atomic(root, ["nvidia-smi", "-q", "-x"], "".join(parts))


def reboot(root: str) -> str:
    """What a reboot changes in a tree: a new boot id and a kernel log that
    holds only this boot's records (no Xid of the last boot). Returns the new boot id."""
    import uuid

    boot = str(uuid.uuid4())
    _replace(f"{root}/proc/sys/kernel/random/boot_id", boot)
    heads = tuple(m.split("{", 1)[0] for _t, _p, m in BOOT_RECORDS)
    with open(f"{root}/dev/kmsg", encoding="utf-8") as fh:
        kept = [ln for ln in fh.read().splitlines() if ln and ln.split(";", 1)[-1].startswith(heads)]
    _replace(f"{root}/dev/kmsg", "\n".join(f"{ln.split(',', 2)[0]},{seq},{ln.split(',', 2)[2]}"
                                          for seq, ln in enumerate(kept)) + "\n")
    return boot
