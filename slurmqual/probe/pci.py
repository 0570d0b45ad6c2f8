"""PCI devices from /sys/bus/pci/devices: GPUs, NVSwitches, link state, NUMA, PCIe switch."""

from __future__ import annotations

from ..records import dataclass

from ..fsroot import FsError, FsRoot
from . import leading_number

NVIDIA = 0x10DE
MELLANOX = 0x15B3
_HEX = frozenset("0123456789abcdef")


def is_bdf(name: str) -> bool:
    """A PCI address as sysfs writes it, domain included: 0000:3b:00.1 (lower-case hex, function 0-7)."""
    return (len(name) == 12 and name[4] == ":" and name[7] == ":" and name[10] == "." and name[11] in "01234567"
            and all(c in _HEX for c in name[:4] + name[5:7] + name[8:10]))


@dataclass(frozen=True)
class PciDevice:
    bdf: str
    vendor: int
    cls: int
    path: str   # canonical node path under /sys/devices

    @property
    def is_gpu(self) -> bool:
        # 0x0300xx VGA controller, 0x0302xx 3D controller (H100/A100). NVSwitch is 0x0680xx.
        return self.vendor == NVIDIA and (self.cls >> 8) in (0x0300, 0x0302)

    @property
    def is_nvswitch(self) -> bool:
        return self.vendor == NVIDIA and (self.cls >> 8) == 0x0680

    @property
    def is_mellanox_nic(self) -> bool:
        # NVIDIA networking (Mellanox) Ethernet 0x0200xx or InfiniBand 0x0207xx function.
        return self.vendor == MELLANOX and (self.cls >> 8) in (0x0200, 0x0207)

    @property
    def upstream(self) -> list[str]:
        """PCI addresses between the host bridge and this device, nearest last."""
        return [p for p in self.path.split("/") if is_bdf(p)][:-1]

    @property
    def switch(self) -> str | None:
        """The PCIe switch upstream port this device hangs under, if any: the
        bridge two hops up (device <- downstream port <- upstream port)."""
        chain = self.upstream
        return chain[-2] if len(chain) >= 3 else None


def list_devices(fs: FsRoot) -> list[PciDevice]:
    out = []
    for bdf in fs.listdir("/sys/bus/pci/devices"):
        base = f"/sys/bus/pci/devices/{bdf}"
        vendor = fs.read_int(f"{base}/vendor", 16)
        cls = fs.read_int(f"{base}/class", 16)
        out.append(PciDevice(bdf, vendor, cls, fs.realpath(base)))
    return out


def gpus(fs: FsRoot) -> list[PciDevice]:
    """GPUs on PCI; if sysfs shows none (e.g. a container without /sys/bus/pci),
    fall back to the driver's /proc/driver/nvidia/gpus list."""
    found = [d for d in list_devices(fs) if d.is_gpu]
    if found:
        return found
    return [PciDevice(b, NVIDIA, 0x030200, f"/proc/driver/nvidia/gpus/{b}")
            for b in fs.listdir("/proc/driver/nvidia/gpus") if is_bdf(b)]


def numa_node(fs: FsRoot, bdf: str) -> int:
    return fs.read_int(f"/sys/bus/pci/devices/{bdf}/numa_node", 10)


def online_numa_nodes(fs: FsRoot) -> int:
    """Number of online NUMA nodes ("0-1" -> 2); 1 if unknown."""
    text = fs.read_or("/sys/devices/system/node/online", "0") or "0"
    count = 0
    for part in text.strip().split(","):
        if "-" in part:
            lo, hi = part.split("-", 1)
            count += int(hi) - int(lo) + 1
        elif part:
            count += 1
    return max(count, 1)


@dataclass(frozen=True)
class LinkState:
    width: int
    max_width: int
    speed: float      # GT/s
    max_speed: float


def _gts(fs: FsRoot, path: str) -> float:
    text = fs.read(path).strip()
    number = leading_number(text, "GT/s")
    if number is None:
        raise FsError(path, f"expected e.g. '32.0 GT/s PCIe', found {text[:40]!r}")
    return float(number)


def link_state(fs: FsRoot, bdf: str) -> LinkState:
    base = f"/sys/bus/pci/devices/{bdf}"
    return LinkState(
        fs.read_int(f"{base}/current_link_width", 10), fs.read_int(f"{base}/max_link_width", 10),
        _gts(fs, f"{base}/current_link_speed"), _gts(fs, f"{base}/max_link_speed"),
    )


AER_KINDS = ("fatal", "nonfatal", "correctable")


@dataclass(frozen=True)
class AerCounts:
    """One device's AER statistics since boot: kind -> {error name: count},
    plus the kernel's TOTAL_ERR_* line per kind."""

    counts: dict[str, dict[str, int]]
    totals: dict[str, int]

    def named(self, kind: str) -> str:
        """'CmpltTO 2, UnsupReq 1': the non-zero error names of one kind."""
        return ", ".join(f"{k} {v}" for k, v in self.counts[kind].items() if v)


# Older kernels (the statistics came with 4.19) print each error under the long
# name of the AER status bit ("Receiver Error 2", "Bad TLP 0"); newer ones print
# short names ("RxErr 2", "BadTLP 0"). Long names are read as the short ones, so
# counts and messages mean the same on every kernel (the kernel's ABI document,
# Documentation/ABI/testing/sysfs-bus-pci-devices-aer_stats, shows the long ones).
AER_LONG_NAMES = {
    "Receiver Error": "RxErr", "Bad TLP": "BadTLP", "Bad DLLP": "BadDLLP", "RELAY_NUM Rollover": "Rollover",
    "Replay Timer Timeout": "Timeout", "Advisory Non-Fatal": "NonFatalErr", "Corrected Internal Error": "CorrIntErr",
    "Header Log Overflow": "HeaderOF",
    "Data Link Protocol": "DLP", "Surprise Down Error": "SDES", "Poisoned TLP": "TLP", "Flow Control Protocol": "FCP",
    "Completion Timeout": "CmpltTO", "Completer Abort": "CmpltAbrt", "Unexpected Completion": "UnxCmplt",
    "Receiver Overflow": "RxOF", "Malformed TLP": "MalfTLP", "Unsupported Request": "UnsupReq",
    "ACS Violation": "ACSViol", "Uncorrectable Internal Error": "UncorrIntErr", "MC Blocked TLP": "BlockedTLP",
    "AtomicOp Egress Blocked": "AtomicOpBlocked", "TLP Prefix Blocked Error": "TLPBlockedErr",
}


def parse_aer(text: str, path: str) -> tuple[dict[str, int], int]:
    """An aer_dev_{fatal,nonfatal,correctable} file, as drivers/pci/pcie/aer.c
    writes it: one 'Name count' line per error bit, then 'TOTAL_ERR_<KIND> n'.
    The name is everything before the count (older kernels' names have spaces,
    read as the short names of AER_LONG_NAMES). The bit names grow with the
    kernel (6.x added TLPBlockedErr, ...), so any name is accepted; the total is
    required."""
    counts: dict[str, int] = {}
    total = None
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.rsplit(None, 1)
        if len(parts) != 2 or not parts[1].isdigit():
            raise FsError(path, f"expected 'Name count' lines, found {line[:60]!r}")
        name = " ".join(parts[0].split())
        if name.startswith("TOTAL_ERR_"):
            total = int(parts[1])
        else:
            counts[AER_LONG_NAMES.get(name, name)] = int(parts[1])
    if total is None:
        raise FsError(path, "no TOTAL_ERR_* line (truncated AER statistics)")
    return counts, total


def aer(fs: FsRoot, bdf: str) -> AerCounts | None:
    """AER statistics of one function; None when it has none (no AER
    capability, or AER handled by firmware: the files are then absent)."""
    base = f"/sys/bus/pci/devices/{bdf}"
    counts, totals = {}, {}
    for kind in AER_KINDS:
        path = f"{base}/aer_dev_{kind}"
        try:
            text = fs.read(path)
        except FsError as exc:
            if exc.reason == "missing":
                return None
            raise
        counts[kind], totals[kind] = parse_aer(text, path)
    return AerCounts(counts, totals)


def uptime_s(fs: FsRoot) -> float:
    """Seconds since boot, from /proc/uptime ('12345.67 98765.43')."""
    text = fs.read("/proc/uptime")
    try:
        return float(text.split()[0])
    except (IndexError, ValueError):
        raise FsError("/proc/uptime", f"expected '<seconds> <idle seconds>', found {text[:40]!r}") from None
