"""GPU health as nvidia-smi reports it: one record per GPU.

Why `nvidia-smi -q -x` and not NVML through nvidia-ml-py: nvidia-smi ships
with every driver, so compute nodes need no extra Python package pinned to
the driver; one subprocess per run returns every field the GPU checks read
(ECC, retired pages, row remapping, fabric state, clocks-event reasons,
temperatures); it reads the same NVML counters; and a hung driver hangs a
child we can kill on a hard timeout, not our own process inside an NVML call.
XML rather than the `-q` text because its tags are stable across driver
branches; the `-q` text parser exists for the dumps admins paste (and the
public ones our tests use) and fills the same record.

NVLink state is not in `-q -x`: `nvidia-smi nvlink -s` (text) is parsed
by `parse_nvlink_status`, the per-link error counters of `nvidia-smi nvlink -e`
by `parse_nvlink_errors`, the NV# peers of `nvidia-smi topo -m` by
`parse_topo_nvlink_peers`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field


class SmiError(Exception):
    """nvidia-smi output we cannot read; the message says what is wrong."""


@dataclass
class SmiGpu:
    index: int
    pci: str                                  # 0000:4b:00.0 (sysfs form)
    product: str | None = None
    serial: str | None = None
    uuid: str | None = None
    persistence: str | None = None            # Enabled / Disabled
    mig: str | None = None                    # Enabled / Disabled / None (N/A)
    ecc_mode: str | None = None
    unc_volatile: int | None = None           # uncorrectable ECC since the last reset
    unc_aggregate: int | None = None          # ... over the GPU's life
    retired_sbe: int | None = None
    retired_dbe: int | None = None
    retire_pending: bool | None = None
    remap_corr: int | None = None
    remap_unc: int | None = None
    remap_pending: bool | None = None
    remap_failure: bool | None = None
    temp_c: float | None = None
    slowdown_c: float | None = None
    shutdown_c: float | None = None
    clock_events: dict[str, bool] = field(default_factory=dict)   # reason -> active
    fabric_state: str | None = None           # Completed / In Progress / Not Started / None (N/A)
    fabric_status: str | None = None
    recovery_action: str | None = None        # driver 550+: None / Reset / Reboot / Drain P2P / Drain and Reset
    processes: list[tuple[int, str, str]] = field(default_factory=list)  # (pid, type C/G/C+G, name) using the GPU

    @property
    def label(self) -> str:
        """How failures name a GPU: index, PCI address, serial."""
        serial = f", serial {self.serial}" if self.serial and self.serial.strip("0") else ""
        return f"GPU {self.index} ({self.pci}{serial})"


@dataclass
class SmiReport:
    driver: str | None
    gpus: list[SmiGpu]


def bus_id(text: str) -> str:
    """'00000000:4B:00.0' -> '0000:4b:00.0' (nvidia-smi pads the domain to 8 digits)."""
    text = text.strip().lower()
    m = re.match(r"^([0-9a-f]+):([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])$", text)
    if not m:
        raise SmiError(f"not a PCI bus id: {text[:40]!r}")
    return f"{int(m.group(1), 16):04x}:{m.group(2)}:{m.group(3)}.{m.group(4)}"


def _num(text: str | None) -> float | None:
    """'27 C' -> 27.0; 'N/A', '[N/A]', '' or None -> None."""
    if text is None:
        return None
    m = re.match(r"^\s*(-?[0-9]+(?:\.[0-9]+)?)", text)
    return float(m.group(1)) if m else None


def _int(text: str | None) -> int | None:
    v = _num(text)
    return None if v is None else int(v)


def _yes(text: str | None) -> bool | None:
    if text is None:
        return None
    t = text.strip().lower()
    return True if t == "yes" else False if t == "no" else None


def _word(text: str | None) -> str | None:
    if text is None:
        return None
    t = text.strip()
    return None if t in ("", "N/A", "[N/A]", "Not Supported", "[Not Supported]") else t


# Clocks-event reasons that mean the hardware slowed the GPU (not idle or app clocks).
SLOWDOWN_REASONS = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown")


# -- XML (`nvidia-smi -q -x`) ------------------------------------------------

def parse_xml(text: str) -> SmiReport:
    """The whole `nvidia-smi -q -x` document. Python's expat never fetches the
    DTD the document names, and the document comes from a root-owned tool."""
    import xml.etree.ElementTree as ET

    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise SmiError(f"nvidia-smi -q -x: not XML ({exc})") from None
    if root.tag != "nvidia_smi_log":
        raise SmiError(f"nvidia-smi -q -x: root element <{root.tag}>, expected <nvidia_smi_log>")
    gpus = [_gpu_from_xml(i, g) for i, g in enumerate(root.findall("gpu"))]
    return SmiReport(_word(root.findtext("driver_version")), gpus)


def _gpu_from_xml(index: int, g) -> SmiGpu:
    pci = g.get("id") or g.findtext("pci/pci_bus_id")
    if not pci:
        raise SmiError(f"nvidia-smi -q -x: GPU #{index} has no PCI bus id")
    gpu = SmiGpu(index, bus_id(pci), _word(g.findtext("product_name")), _word(g.findtext("serial")),
                 _word(g.findtext("uuid")))
    gpu.persistence = _word(g.findtext("persistence_mode"))
    gpu.mig = _word(g.findtext("mig_mode/current_mig"))
    gpu.ecc_mode = _word(g.findtext("ecc_mode/current_ecc"))
    gpu.unc_volatile = _uncorrectable(g.find("ecc_errors/volatile"))
    gpu.unc_aggregate = _uncorrectable(g.find("ecc_errors/aggregate"))
    gpu.retired_sbe = _int(g.findtext("retired_pages/multiple_single_bit_retirement/retired_count"))
    gpu.retired_dbe = _int(g.findtext("retired_pages/double_bit_retirement/retired_count"))
    gpu.retire_pending = _yes(g.findtext("retired_pages/pending_retirement"))
    gpu.remap_corr = _int(g.findtext("remapped_rows/remapped_row_corr"))
    gpu.remap_unc = _int(g.findtext("remapped_rows/remapped_row_unc"))
    gpu.remap_pending = _yes(g.findtext("remapped_rows/remapped_row_pending"))
    gpu.remap_failure = _yes(g.findtext("remapped_rows/remapped_row_failure"))
    gpu.temp_c = _num(g.findtext("temperature/gpu_temp"))
    gpu.slowdown_c = _num(g.findtext("temperature/gpu_temp_slow_threshold"))
    gpu.shutdown_c = _num(g.findtext("temperature/gpu_temp_max_threshold"))
    # Renamed in driver 535: clocks_throttle_reasons -> clocks_event_reasons.
    reasons = g.find("clocks_event_reasons")
    if reasons is None:
        reasons = g.find("clocks_throttle_reasons")
    if reasons is not None:
        for child in reasons:
            name = re.sub(r"^clocks_(event|throttle)_reason_", "", child.tag)
            gpu.clock_events[name] = (child.text or "").strip() == "Active"
    gpu.fabric_state = _word(g.findtext("fabric/state"))
    gpu.fabric_status = _word(g.findtext("fabric/status"))
    gpu.recovery_action = _word(g.findtext("gpu_recovery_action"))
    for p in g.findall("processes/process_info"):
        pid = _int(p.findtext("pid"))
        if pid is not None:
            gpu.processes.append((pid, (p.findtext("type") or "").strip(), (p.findtext("process_name") or "").strip()))
    return gpu


def _uncorrectable(section) -> int | None:
    """Uncorrectable ECC count of a volatile/aggregate section: the sum of the
    *uncorrectable* tags (sram/dram; 580 splits sram into parity/secded) or,
    before Ampere, double_bit/total."""
    if section is None:
        return None
    values = [_int(c.text) for c in section if "uncorrectable" in c.tag]
    old = section.findtext("double_bit/total")
    if old is not None:
        values.append(_int(old))
    known = [v for v in values if v is not None]
    return sum(known) if known else None


# -- text (`nvidia-smi -q`) ----------------------------------------------------

_GPU_LINE = re.compile(r"^GPU ([0-9A-Fa-f]+:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$")
_KV = re.compile(r"^(\s*)(.*?)\s+:\s?(.*)$")

# (section path, key) -> field, for the sections the GPU checks read.
_TEXT_FIELDS = {
    ((), "Product Name"): "product", ((), "Serial Number"): "serial", ((), "GPU UUID"): "uuid",
    ((), "Persistence Mode"): "persistence", (("MIG Mode",), "Current"): "mig",
    (("ECC Mode",), "Current"): "ecc_mode",
    (("Retired Pages",), "Single Bit ECC"): "retired_sbe", (("Retired Pages",), "Double Bit ECC"): "retired_dbe",
    (("Retired Pages",), "Pending Page Retirement"): "retire_pending",
    (("Retired Pages",), "Pending Page Blacklist"): "retire_pending",
    (("Remapped Rows",), "Correctable Error"): "remap_corr", (("Remapped Rows",), "Uncorrectable Error"): "remap_unc",
    (("Remapped Rows",), "Pending"): "remap_pending",
    (("Remapped Rows",), "Remapping Failure Occurred"): "remap_failure",
    (("Temperature",), "GPU Current Temp"): "temp_c", (("Temperature",), "GPU Slowdown Temp"): "slowdown_c",
    (("Temperature",), "GPU Shutdown Temp"): "shutdown_c",
    (("Fabric",), "State"): "fabric_state", (("Fabric",), "Status"): "fabric_status",
    ((), "GPU Recovery Action"): "recovery_action",
}
_TEXT_REASONS = {"HW Slowdown": "hw_slowdown", "HW Thermal Slowdown": "hw_thermal_slowdown",
                 "HW Power Brake Slowdown": "hw_power_brake_slowdown", "SW Thermal Slowdown": "sw_thermal_slowdown",
                 "SW Power Cap": "sw_power_cap", "Idle": "gpu_idle"}


def parse_text(text: str) -> SmiReport:
    """`nvidia-smi -q` (or `-q -d SECTION`) text. Sections are indented by
    four spaces; a line without ' : ' opens a section. Only the fields listed
    above are read; an excerpt fills what it has."""
    driver = None
    gpus: list[SmiGpu] = []
    gpu: SmiGpu | None = None
    stack: list[tuple[int, str]] = []      # (indent, section name)
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line.strip() or line.strip() == "[...]" or line.startswith("="):
            continue
        m = _GPU_LINE.match(line)
        if m:
            gpu = SmiGpu(len(gpus), bus_id(m.group(1)))
            gpus.append(gpu)
            stack = []
            continue
        indent = len(line) - len(line.lstrip())
        kv = _KV.match(line)
        if gpu is None:
            if kv and kv.group(2).strip() == "Driver Version":
                driver = _word(kv.group(3))
            continue
        # Sections are 4 spaces deeper than the GPU line; values nested under a
        # value line (HW Slowdown > HW Thermal Slowdown) stay in its section.
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if not kv:
            stack.append((indent, line.strip()))
            continue
        key, value = kv.group(2).strip(), kv.group(3).strip()
        path = tuple(name for _, name in stack)
        if path and path[0] in ("Clocks Event Reasons", "Clocks Throttle Reasons") and key in _TEXT_REASONS:
            gpu.clock_events[_TEXT_REASONS[key]] = value == "Active"
            continue
        if path[:1] == ("ECC Errors",) and "Uncorrectable" in key and len(path) >= 2:
            attr = "unc_volatile" if path[1] == "Volatile" else "unc_aggregate" if path[1] == "Aggregate" else None
            if attr and _int(value) is not None:
                setattr(gpu, attr, (getattr(gpu, attr) or 0) + _int(value))
            continue
        name = _TEXT_FIELDS.get((path, key))
        if name is None:
            continue
        current = getattr(gpu, name)
        if isinstance(current, bool) or name in ("retire_pending", "remap_pending", "remap_failure"):
            setattr(gpu, name, _yes(value))
        elif name in ("retired_sbe", "retired_dbe", "remap_corr", "remap_unc"):
            setattr(gpu, name, _int(value))
        elif name in ("temp_c", "slowdown_c", "shutdown_c"):
            setattr(gpu, name, _num(value))
        else:
            setattr(gpu, name, _word(value))
    return SmiReport(driver, gpus)


# -- NVLink (`nvidia-smi nvlink -s`) -----------------------------------------

_NVL_GPU = re.compile(r"^GPU (\d+): (.*?)(?: \(UUID: (\S+)\))?\s*$")
_NVL_LINK = re.compile(r"^\s*Link (\d+): (.*)$")


@dataclass
class NvlinkGpu:
    index: int
    name: str
    uuid: str | None
    links: dict[int, float | None] = field(default_factory=dict)   # link -> GB/s, None: inactive
    all_inactive: bool = False


def parse_nvlink_status(text: str) -> list[NvlinkGpu]:
    """`nvidia-smi nvlink -s`: per GPU, 'Link N: 26.562 GB/s' or
    'Link N: <inactive>'; a GPU whose links are all down prints the NVML line
    'Unable to retrieve NVLink information as all links are inactive' instead."""
    out: list[NvlinkGpu] = []
    for line in text.splitlines():
        m = _NVL_GPU.match(line.strip())
        if m:
            out.append(NvlinkGpu(int(m.group(1)), m.group(2), m.group(3)))
            continue
        if not out:
            continue
        if "all links are inactive" in line.lower():      # 'inActive' in some drivers' NVML message
            out[-1].all_inactive = True
            continue
        m = _NVL_LINK.match(line)
        if m:
            out[-1].links[int(m.group(1))] = _num(m.group(2)) if "inactive" not in m.group(2) else None
    return out


# -- NVLink peers (`nvidia-smi topo -m`) ----------------------------------------

_TOPO_DEVICE = re.compile(r"^(GPU\d+|NIC\d+|mlx\S+)$")
# Driver 580 underlines the matrix header with terminal escapes even when
# stdout is a file or a pipe ('\x1b[4mGPU0\tCPU Affinity...\x1b[0m', seen on
# an H200 by the device check, tests/data/real/device): unstripped, the header
# is not found and every NV# cell is missed.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def parse_topo_nvlink_peers(text: str) -> dict[int, dict[int, int]]:
    """`nvidia-smi topo -m` (space- or tab-separated): GPU index -> {peer GPU
    index: NVLinks between them} from the 'NV#' cells; a GPU without an NVLink
    peer maps to {}. The device columns are the header's leading GPU/NIC names
    (the affinity columns after them are left alone). {} when there is no matrix."""
    columns: list[str] = []
    peers: dict[int, dict[int, int]] = {}
    for line in _ANSI.sub("", text).splitlines():
        tokens = line.split()
        if not tokens:
            continue
        if not columns and tokens[0] == "GPU0" and len(tokens) > 1 and not tokens[1].startswith(("X", "NV")):
            for t in tokens:
                if not _TOPO_DEVICE.match(t):
                    break
                columns.append(t)
            continue
        if not columns or not re.match(r"^GPU\d+$", tokens[0]):
            continue
        row = peers.setdefault(int(tokens[0][3:]), {})
        for name, cell in zip(columns, tokens[1:1 + len(columns)]):
            m = re.match(r"^NV(\d+)$", cell)
            if m and name.startswith("GPU"):
                row[int(name[3:])] = int(m.group(1))
    return peers


# -- NVLink error counters (`nvidia-smi nvlink -e`) -----------------------------

_NVL_COUNTER = re.compile(r"^\s*Link (\d+): ([A-Za-z][A-Za-z -]*?):\s*(\S+)\s*$")


@dataclass
class NvlinkErrors:
    index: int
    name: str
    uuid: str | None
    links: dict[int, dict[str, int]] = field(default_factory=dict)   # link -> counter -> value


def counter_key(label: str) -> str:
    """'Replay Errors' -> 'replay', 'CRC Errors' -> 'crc', 'Link recovery failed
    events' -> 'link_recovery_failed_events': the names checks.nvlink.error_limits uses."""
    key = re.sub(r"[^a-z0-9]+", "_", label.strip().lower()).strip("_")
    return key[:-7] if key.endswith("_errors") else key


def parse_nvlink_errors(text: str) -> list[NvlinkErrors]:
    """`nvidia-smi nvlink -e`: per GPU, 'Link N: <Counter name>: <count>' lines
    (R535/R550 on Hopper/Ampere: Replay Errors, Recovery Errors, CRC Errors;
    newer drivers print more names). Blank lines between links, the '[...]' of
    pasted excerpts and values that are not counts (N/A, BER floats, the
    'FEC Errors - N' histogram) are skipped; a GPU whose links are all down
    prints the NVML 'all links are inactive' line and has no links."""
    out: list[NvlinkErrors] = []
    for line in text.splitlines():
        m = _NVL_GPU.match(line.strip())
        if m:
            out.append(NvlinkErrors(int(m.group(1)), m.group(2), m.group(3)))
            continue
        if not out:
            continue
        m = _NVL_COUNTER.match(line)
        if not m or m.group(2).startswith("FEC Errors") or not m.group(3).isdigit():
            continue
        out[-1].links.setdefault(int(m.group(1)), {})[counter_key(m.group(2))] = int(m.group(3))
    return out


def query(ctx) -> SmiReport:
    """Run `nvidia-smi -q -x` within the context's command timeout."""
    out = ctx.run_command(["nvidia-smi", "-q", "-x"])
    ctx.memo["nvidia_smi_xml"] = out.stdout   # a failing GPU's section goes to the RMA evidence (rawevidence.py)
    return parse_xml(out.stdout)
