"""`slurmqual config init`: a starting site config read from the node itself.

Like LBNL NHC's nhc-genconf: a new site runs it once per kind of node and
gets a config that passes there, each value annotated with where it was read.
It reads through the same probes and check readers the checks use (so what it
writes is what they will compare against), writes nothing it could not read
(each skipped key says why), and where the node disagrees with itself (one
NIC at 200G among 400G ones, one GPU with MIG on) writes what most parts show
and says which part this node will fail on.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from dataclasses import dataclass, field

from .checks import Context
from .command import CommandError
from .fsroot import FsError, FsRoot
from .probe import nvidia, pci, rdma

# Where init may write in a [[groups]] entry: what a group can override.
GROUP_SECTIONS = ("node", "fabric", "checks")


@dataclass
class Setting:
    path: tuple[str, ...]          # ("checks", "dcqcn", "priorities")
    value: object
    source: str                    # where it was read, for the TOML comment
    item_sources: dict | None = None  # a table's entries: key -> where that one was read


@dataclass
class Reading:
    """What init read from one node: the settings, what it could not read, and
    where the node disagrees with itself (it will fail its own config there)."""
    settings: list[Setting] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    outliers: list[str] = field(default_factory=list)
    seen: list[Setting] = field(default_factory=list)  # read, not written (a commented line in the file)
    doubts: list[str] = field(default_factory=list)    # written as read, but unusual for such a node

    def set(self, path: str, value: object, source: str, item_sources: dict | None = None) -> None:
        self.settings.append(Setting(tuple(path.split(".")), value, source, item_sources))

    def value(self, path: str, default: object = None) -> object:
        for s in self.settings:
            if s.path == tuple(path.split(".")):
                return s.value
        return default


def _majority(values: dict[str, object]) -> tuple[object, dict[str, object]]:
    """The value most parts show (ties: the first seen) and the parts that differ."""
    counts = Counter(json.dumps(v, sort_keys=True) for v in values.values())
    top = json.loads(counts.most_common(1)[0][0])
    return top, {k: v for k, v in values.items() if v != top}


def _defaults():
    from .config import Config, validate

    return Config(validate({}, "<defaults>"), None)


def read_node(root: str = "/", command_timeout: float = 10.0) -> Reading:
    """Read the node under root (its tools at standard level; a node tree's
    recorded outputs) into settings."""
    ctx = Context(FsRoot(root), _defaults(), level="standard", command_timeout=command_timeout)
    out = Reading()
    for step in (_gpus, _fabric, _affinity, _roce, _fabric_manager, _versions, _gpu_tools):
        try:
            step(ctx, out)
        except FsError as exc:
            out.skipped.append(f"{step.__name__.lstrip('_')}: cannot read {exc.path}: {exc.reason}")
        except Exception as exc:  # noqa: BLE001 - a reader's bug costs its keys, not the whole file
            out.skipped.append(f"{step.__name__.lstrip('_')}: internal error {type(exc).__name__}: {exc} "
                               "(a slurmqual bug: please report)")
    return out


# -- GPUs ---------------------------------------------------------------------

def _gpus(ctx: Context, out: Reading) -> None:
    fs = ctx.fs
    if not fs.isdir("/sys/bus/pci/devices") and not fs.isdir("/proc/driver/nvidia/gpus"):
        out.skipped.append("node.gpus: neither /sys/bus/pci/devices nor /proc/driver/nvidia/gpus under the root")
        return
    on_pci = [d.bdf for d in ctx.pci_devices() if d.is_gpu]
    where = "/sys/bus/pci/devices (vendor 0x10de, class 0x03xx)"
    if not on_pci and fs.isdir("/proc/driver/nvidia/gpus"):
        on_pci, where = fs.listdir("/proc/driver/nvidia/gpus"), "/proc/driver/nvidia/gpus"
    if len(on_pci) > 64:
        out.skipped.append(f"node.gpus: {len(on_pci)} GPUs in {where}, more than slurmqual's limit of 64")
        return
    out.set("node.gpus", len(on_pci), f"{len(on_pci)} NVIDIA GPUs in {where}")
    if not on_pci:
        return
    out.set("burnin.gpus_per_node", len(on_pci), "the GPUs counted for node.gpus")
    models = nvidia.gpu_models(fs)
    if not models:
        out.skipped.append("node.gpu_model: no 'Model:' line in /proc/driver/nvidia/gpus/*/information "
                           "(driver not loaded?)")
        return
    top, other = _majority(models)
    if not 0 < len(top) <= 96 or not top.isprintable():
        out.skipped.append(f"node.gpu_model: the driver's model name {top[:100]!r} is not a plain name")
        return
    out.set("node.gpu_model", top, f"/proc/driver/nvidia/gpus/*/information, {len(models) - len(other)} of "
                                   f"{len(on_pci)} GPUs")
    for bdf, model in other.items():
        out.outliers.append(f"GPU {bdf} is a {model}, the others {top}: gpu_count fails here")


# -- fabric ports -------------------------------------------------------------

def _fabric(ctx: Context, out: Reading) -> None:
    fs = ctx.fs
    ports = ctx.ports()
    orphans = [d.bdf for d in ctx.pci_devices() if d.is_mellanox_nic and not fs.isdir(f"{d.path}/infiniband")
               and d.bdf not in {p.pci for p in ports}]
    if not ports:
        if orphans:
            out.skipped.append(f"fabric.nics: NVIDIA/Mellanox NIC functions on PCI ({', '.join(orphans)}) but no "
                               "RDMA device in /sys/class/infiniband: load mlx5_ib and run init again")
            return
        out.set("fabric.nics", 0, "no RDMA devices in /sys/class/infiniband (no fabric NICs, or no RDMA stack)")
        out.skipped.append("fabric.rate_gbps, fabric.link_layer: no RDMA ports to read")
        return
    layers = {p.name: p.attr(fs, "link_layer") for p in ports}
    layer, odd = _majority(layers)
    why = {p.device: f"link layer {odd[p.name]}, the others {layer}" for p in ports if p.name in odd}
    for p in ports:   # mlx5 gives every RoCE port it runs DCQCN on an ecn/ directory; a VF or a
        if layers[p.name] == "Ethernet" and p.device not in why:   # management port without one is no rail
            ifs = rdma.netdevs(fs, p)
            if ifs and not any(fs.isdir(f"/sys/class/net/{i}/ecn") for i in ifs):
                why[p.device] = f"RoCE without /sys/class/net/{ifs[0]}/ecn (no DCQCN: a VF or management port)"
    if why:
        out.set("fabric.ignore", sorted(why), "not fabric rails: " + "; ".join(f"{d}: {w}" for d, w in sorted(why.items())))
        out.doubts.append(f"fabric.ignore = {sorted(why)}: " + "; ".join(f"{d}: {w}" for d, w in sorted(why.items()))
                          + " (take a device out of the list if it is a rail)")
        ports = [p for p in ports if p.device not in why]
    if not ports:
        out.set("fabric.nics", 0, "no fabric RDMA ports in /sys/class/infiniband besides fabric.ignore")
        out.skipped.append("fabric.rate_gbps, fabric.link_layer: no fabric ports to read")
        return
    layer = layers[ports[0].name]
    out.set("fabric.link_layer", {"InfiniBand": "infiniband", "Ethernet": "ethernet"}.get(layer, "auto"),
            f"/sys/class/infiniband/*/ports/*/link_layer: {layer}" + (" (RoCE)" if layer == "Ethernet" else ""))
    out.set("fabric.nics", len(ports), f"{len(ports)} {layer} ports in /sys/class/infiniband: "
                                       f"{', '.join(p.name for p in ports)}")
    for p in ports:
        state, phys = rdma.state_name(p.attr(fs, "state")), rdma.state_name(p.attr(fs, "phys_state"))
        if state != "ACTIVE" or phys != "LinkUp":
            out.outliers.append(f"{p.name} is {state}/{phys}: nic_link fails here")
    up = {p.name for p in ports if rdma.state_name(p.attr(fs, "state")) == "ACTIVE"}
    rates = {}
    for p in ports:
        if p.name in up or not up:
            try:
                rates[p.name] = rdma.rate_gbps(fs, p)
            except FsError as exc:
                out.outliers.append(f"{p.name}: cannot read {exc.path}: {exc.reason}: nic_link cannot judge it")
    if not rates:
        out.skipped.append("fabric.rate_gbps: no port rate readable")
        return
    rate, slow = _majority(rates)
    out.set("fabric.rate_gbps", rate, f"/sys/class/infiniband/*/ports/*/rate of {len(rates) - len(slow)} of "
                                      f"{len(ports)} ports" + ("" if len(up) == len(ports) else " (the ACTIVE ones)"))
    for name, r in slow.items():
        out.outliers.append(f"{name} at {r:g} Gb/s, the others {rate:g}: nic_link fails here")
    mods = ctx.modules()
    if "nvidia_peermem" in mods or "nv_peer_mem" in mods:
        out.set("node.gpudirect", "peermem", "nvidia_peermem loaded (/proc/modules)")
    else:
        _dmabuf_or_skip(ctx, out)


def _dmabuf_or_skip(ctx: Context, out: Reading) -> None:
    from .checks.peermem import judge_dmabuf
    from .result import Status

    try:
        drv, kernel = nvidia.driver(ctx.fs), nvidia.kernel_release(ctx.fs)
    except FsError:
        drv = None
    if drv is not None and judge_dmabuf(drv, kernel).status is Status.PASS:
        out.set("node.gpudirect", "dmabuf", f"nvidia_peermem not loaded; open kernel module {drv.version} and "
                                            f"Linux {kernel} support dma-buf")
    else:
        out.outliers.append("nvidia_peermem not loaded and no dma-buf support: GPUDirect RDMA is off, "
                            "peermem fails here (modprobe nvidia-peermem)")


def _affinity(ctx: Context, out: Reading) -> None:
    """The NIC each GPU sits by: under its PCIe switch where there is one (pinned
    in gpu_nic_map), else on its NUMA node."""
    fs = ctx.fs
    ignore = out.value("fabric.ignore", [])
    gpus = [d for d in ctx.gpus() if d.path.startswith("/sys/")]
    pcimap = {d.bdf: d for d in ctx.pci_devices()}
    nics: dict[str, object] = {}
    for p in ctx.ports():
        if p.device not in ignore and p.pci in pcimap and p.device not in nics:
            nics[p.device] = pcimap[p.pci]
    if not gpus or not nics:
        out.skipped.append("checks.gpu_nic_affinity: no GPU or no fabric NIC on PCI to align")
        return
    numa = {d.bdf: pci.numa_node(fs, d.bdf) for d in [*gpus, *nics.values()]}
    pinned, no_switch = {}, []
    for g in gpus:
        local = sorted(n for n, d in nics.items() if g.switch is not None and d.switch == g.switch)
        if local:
            pinned[g.bdf] = local[0]
        else:
            no_switch.append(g.bdf)
        if pci.online_numa_nodes(fs) > 1 and not any(numa[d.bdf] == numa[g.bdf] for d in nics.values()):
            out.outliers.append(f"GPU {g.bdf} (NUMA {numa[g.bdf]}) has no fabric NIC on its NUMA node: "
                                "gpu_nic_affinity fails here")
    if pinned:
        out.set("checks.gpu_nic_affinity.gpu_nic_map", pinned,
                "GPU PCI address -> the NIC under its PCIe switch (/sys/devices PCI paths)",
                {b: f"NUMA {numa[b]}, PCIe switch {pcimap[b].switch}" for b in pinned})
    out.set("checks.gpu_nic_affinity.same_pcie_switch", not no_switch,
            "every GPU has a fabric NIC under its PCIe switch" if not no_switch else
            f"GPUs without a NIC under their PCIe switch: {', '.join(no_switch)} (judged by NUMA node)")


# -- RoCE: DCQCN, trust --------------------------------------------------------

def _roce(ctx: Context, out: Reading) -> None:
    fs = ctx.fs
    ports = [p for p in ctx.ports() if p.device not in out.value("fabric.ignore", [])
             and p.attr(fs, "link_layer") == "Ethernet"]
    if not ports:
        out.skipped.append("checks.dcqcn, checks.roce_qos: no RoCE ports (InfiniBand or none): not applicable")
        return
    try:
        labelled = rdma.roce_netdevs(fs, ports)
    except rdma.NoNetdev as exc:
        out.skipped.append(f"checks.dcqcn: {exc}")
        return
    enabled = {}
    for label, _port, ifname in labelled:
        on = []
        for prio in range(8):
            flags = [fs.read_or(f"/sys/class/net/{ifname}/ecn/{kind}/enable/{prio}") for kind in ("roce_rp", "roce_np")]
            if all(f is not None and f.strip() == "1" for f in flags):
                on.append(prio)
        enabled[label] = on
    prios, odd = _majority(enabled)
    if prios:
        out.set("checks.dcqcn.priorities", prios, f"/sys/class/net/<if>/ecn/roce_rp,roce_np/enable/<prio> = 1 on "
                                                  f"{len(enabled) - len(odd)} of {len(enabled)} RoCE netdevs")
    else:
        out.skipped.append("checks.dcqcn.priorities: DCQCN off on every priority of most RoCE netdevs; left at "
                           "the default (all 8): enable it (slurmqual explain dcqcn)")
    for label, on in odd.items():
        out.outliers.append(f"{label}: DCQCN on prio {','.join(map(str, on)) or 'none'}: dcqcn fails here")
    _mlxconfig(ctx, ports, out)
    _trust(ctx, labelled, out)


def _mlxconfig(ctx: Context, ports, out: Reading) -> None:
    from .checks.dcqcn import parse_mlxconfig

    masks = {}
    for bdf in sorted({p.pci for p in ports if p.pci}):
        try:
            text = ctx.run_command(["mlxconfig", "-d", bdf, "query", "ROCE_CC_PRIO_MASK_P1", "ROCE_CC_PRIO_MASK_P2"])
        except CommandError as exc:
            out.skipped.append(f"checks.dcqcn.prio_mask: {exc}")
            return
        value = parse_mlxconfig(text.stdout).get("ROCE_CC_PRIO_MASK_P1")
        if value is None:
            out.skipped.append(f"checks.dcqcn.prio_mask: mlxconfig -d {bdf}: no ROCE_CC_PRIO_MASK_P1 in its output")
            return
        masks[bdf] = value
    mask, odd = _majority(masks)
    out.set("checks.dcqcn.prio_mask", mask, f"mlxconfig -d <pci> query ROCE_CC_PRIO_MASK_P1 on {len(masks)} functions")
    for bdf, v in odd.items():
        out.outliers.append(f"{bdf} firmware ROCE_CC_PRIO_MASK_P1={v}: dcqcn fails here at standard level")


def _trust(ctx: Context, labelled, out: Reading) -> None:
    from .probe.netqos import QosError, parse_trust

    trusts = {}
    for label, _port, ifname in labelled:
        try:
            trusts[label] = parse_trust(ctx.run_command(["mlnx_qos", "-i", ifname]).stdout)
        except (CommandError, QosError) as exc:
            out.skipped.append(f"checks.roce_qos.trust: {exc}")
            return
    trust, odd = _majority(trusts)
    if trust not in ("dscp", "pcp"):
        out.skipped.append(f"checks.roce_qos.trust: mlnx_qos reports trust {trust!r} (slurmqual knows dscp, pcp)")
        return
    out.set("checks.roce_qos.trust", trust, f"mlnx_qos -i <if>: 'Priority trust state' on {len(trusts)} netdevs")
    for label, t in odd.items():
        out.outliers.append(f"{label}: priority trust {t}: roce_qos fails here")


# -- fabric manager, versions ---------------------------------------------------

def _fabric_manager(ctx: Context, out: Reading) -> None:
    from .checks.fabric_manager import fm_running

    nvswitches = sum(1 for d in ctx.pci_devices() if d.is_nvswitch)
    if not nvswitches:
        out.set("checks.fabric_manager.required", False, "no NVSwitch (class 0x0680) on PCI")
        return
    out.set("checks.fabric_manager.required", True, f"{nvswitches} NVSwitch functions on PCI")
    if not fm_running(ctx.fs, ["nv-fabricmanage"]):
        out.outliers.append("no nv-fabricmanager process (/proc/*/comm): fabric_manager fails here")


def _versions(ctx: Context, out: Reading) -> None:
    fs = ctx.fs
    try:
        drv = nvidia.driver(fs)
        out.set("checks.versions.driver", drv.version, "/proc/driver/nvidia/version")
    except FsError as exc:
        out.skipped.append(f"checks.versions.driver: {exc.path}: {exc.reason}")
    fws = {p.device: fs.read(f"/sys/class/infiniband/{p.device}/fw_ver").strip() for p in ctx.ports()
           if p.device not in out.value("fabric.ignore", [])}
    if fws:
        fw, odd = _majority(fws)
        out.set("checks.versions.nic_fw", fw, f"/sys/class/infiniband/*/fw_ver, {len(fws) - len(odd)} of {len(fws)} NICs")
        for dev, v in odd.items():
            out.outliers.append(f"{dev} runs firmware {v}, the others {fw}: versions fails here")
    else:
        out.skipped.append("checks.versions.nic_fw: no RDMA devices")
    nccl = nvidia.host_nccl(fs)
    if nccl:
        out.set("checks.versions.nccl", nccl, "libnccl.so.X.Y.Z in the system library directories")
    else:
        out.skipped.append("checks.versions.nccl: no host libnccl.so.X.Y.Z (jobs bring their own: not pinned)")
    out.seen.append(Setting(("checks", "versions", "kernel"), nvidia.kernel_release(fs),
                            "/proc/sys/kernel/osrelease; not pinned (kernel updates are routine): uncomment to pin"))


# -- what nvidia-smi says -------------------------------------------------------

def _gpu_tools(ctx: Context, out: Reading) -> None:
    from .probe.nvsmi import SmiError, parse_nvlink_status

    if not ctx.gpus():
        out.skipped.append("checks.gpu_state, checks.gpu_memory, checks.nvlink: no GPUs")
        return
    try:
        rep = ctx.nvidia_smi()
    except (CommandError, SmiError) as exc:
        out.skipped.append(f"checks.gpu_state, checks.gpu_memory: nvidia-smi -q -x: {exc}")
        rep = None
    if rep is not None and rep.gpus:
        _smi_setting(out, "checks.gpu_state.mig", {g.label: g.mig for g in rep.gpus},
                     {"Enabled": "on", "Disabled": "off"}, "MIG mode", "gpu_state")
        _smi_setting(out, "checks.gpu_state.persistence_mode", {g.label: g.persistence for g in rep.gpus},
                     {"Enabled": True, "Disabled": False}, "persistence mode", "gpu_state")
        _smi_setting(out, "checks.gpu_memory.require_ecc", {g.label: g.ecc_mode for g in rep.gpus},
                     {"Enabled": True, "Disabled": False}, "ECC mode", "gpu_memory")
    try:
        text = ctx.run_command(["nvidia-smi", "nvlink", "-s"]).stdout
    except CommandError as exc:
        out.skipped.append(f"checks.nvlink.links_per_gpu: {exc}")
        return
    links = parse_nvlink_status(text)
    counts = {f"GPU {g.index}": sum(1 for v in g.links.values() if v) for g in links}
    if not counts and not text.strip():
        out.set("checks.nvlink.links_per_gpu", 0, "nvidia-smi nvlink -s printed nothing: no NVLink")
        return
    if not counts:
        out.skipped.append(f"checks.nvlink.links_per_gpu: nvidia-smi nvlink -s printed no GPU line: "
                           f"{text.strip()[:80]!r}")
        return
    n, odd = _majority(counts)
    from .checks.nvlink import sxm_links

    sxm = {g.name: sxm_links(g.name) for g in links if sxm_links(g.name)}
    if n == 0 and sxm:
        out.doubts.append(f"checks.nvlink.links_per_gpu = 0: every NVLink reads inactive, yet "
                          f"{', '.join(f'{k} has {v}' for k, v in sxm.items())}; right for a GPU passed through "
                          "alone (a VM slice), a fault on an HGX board (fabric manager, baseboard): then fix it "
                          "and run init again")
    out.set("checks.nvlink.links_per_gpu", n, f"active links in nvidia-smi nvlink -s, {len(counts) - len(odd)} of "
                                              f"{len(counts)} GPUs")
    for gpu, k in odd.items():
        out.outliers.append(f"{gpu} has {k} active NVLinks, the others {n}: nvlink fails here")


def _smi_setting(out: Reading, path: str, seen: dict[str, str | None], values: dict, what: str, check: str) -> None:
    known = {k: values[v] for k, v in seen.items() if v in values}
    if not known:
        out.skipped.append(f"{path}: nvidia-smi -q -x reports no {what} ({', '.join(sorted({str(v) for v in seen.values()}))})")
        return
    value, odd = _majority(known)
    out.set(path, value, f"nvidia-smi -q -x: {what} on {len(known) - len(odd)} of {len(seen)} GPUs")
    for gpu, v in odd.items():
        out.outliers.append(f"{gpu}: {what} {v}: {check} fails here")


# -- TOML -------------------------------------------------------------------------

def toml_value(value: object) -> str:
    """A TOML literal for the scalars, lists and flat tables init writes (JSON's
    string escapes are TOML's)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{toml_key(k)} = {toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML form for {type(value).__name__}")


def toml_key(key: str) -> str:
    return key if key and all(c.isalnum() or c in "_-" for c in key) else json.dumps(key)


def _comment(text: str) -> str:
    return " ".join(text.split())


def _line(key: str, value: object, source: str, prefix: str = "") -> str:
    text = f"{prefix}{key} = {toml_value(value)}"
    return f"{text:<38}  # {_comment(source)}"


def _lines(s: Setting, dotted: bool) -> list[str]:
    """One setting; a table (gpu_nic_map) one entry a line, each with its source.
    dotted: a [[groups]] entry's dotted keys, else keys of the current [table]
    (a table value then opens its own [table.key], so it must come last)."""
    key = ".".join(s.path) if dotted else s.path[-1]
    if not isinstance(s.value, dict) or not s.value:
        return [_line(key, s.value, s.source)]
    head = [f"# {key}: {_comment(s.source)}"] if dotted else \
        ["", f"[{'.'.join(s.path)}]" + f"   # {_comment(s.source)}"]
    sources = s.item_sources or {}
    return head + [_line(toml_key(k), v, sources.get(k, s.source), prefix=f"{key}." if dotted else "")
                   for k, v in s.value.items()]


def _header(reading: Reading, node: str, root: str, version: str) -> list[str]:
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [f"# Written by `slurmqual config init` (slurmqual {version}) from node {node}"
             + (f" (root {root})" if root != "/" else "") + f", {when}.",
             "# Each value says where it was read; every key not here keeps its default",
             "# (annotated example: config/slurmqual.toml, `slurmqual config show`).",
             "# Review it, then: slurmqual config validate FILE"]
    if reading.skipped:
        lines.append("# Not written (could not be read here):")
        lines += [f"#   - {_comment(s)}" for s in reading.skipped]
    if reading.outliers:
        lines.append("# This node disagrees with itself; the value most parts show was written:")
        lines += [f"#   - {_comment(s)}" for s in reading.outliers]
    if reading.doubts:
        lines.append("# Written as read, but check it:")
        lines += [f"#   - {_comment(s)}" for s in reading.doubts]
    return lines


def render_base(reading: Reading, node: str, root: str, version: str) -> str:
    """The site config: one [section] per table, checks.<id> as [checks.<id>]."""
    lines = _header(reading, node, root, version)
    tables: dict[tuple[str, ...], list[Setting]] = {}
    for s in reading.settings:
        tables.setdefault(s.path[:-1], []).append(s)
    order = ["node", "fabric", "checks", "burnin"]
    for table in sorted(tables, key=lambda t: (order.index(t[0]) if t[0] in order else 9, t)):
        lines += ["", f"[{'.'.join(table)}]"]
        ordered = sorted(tables[table], key=lambda s: isinstance(s.value, dict) and bool(s.value))
        lines += [f"# {_line(s.path[-1], s.value, s.source)}" for s in reading.seen if s.path[:-1] == table]
        for s in ordered:
            lines += _lines(s, dotted=False)
    return "\n".join(lines) + "\n"


def render_group(reading: Reading, node: str, root: str, version: str, name: str, match: dict) -> str:
    """One [[groups]] entry with what a group may set (node, fabric, checks);
    the rest is fleet-wide and named in a comment."""
    lines = _header(reading, node, root, version)
    lines += ["", "[[groups]]", f"name = {toml_value(name)}", f"match = {toml_value(match)}"]
    fleet = []
    for s in sorted(reading.settings, key=lambda s: GROUP_SECTIONS.index(s.path[0]) if s.path[0] in GROUP_SECTIONS else 9):
        if s.path[0] in GROUP_SECTIONS:
            lines += _lines(s, dotted=True)
        else:
            fleet.append(f"# fleet-wide, not per group: {_line('.'.join(s.path), s.value, s.source)}")
    lines += [f"# {_line('.'.join(s.path), s.value, s.source)}" for s in reading.seen]
    return "\n".join(lines + fleet) + "\n"


def parse_written(text: str, group: bool, source: str):
    """The written text as the Config the checks would see on this node
    (a group's node/fabric/checks tables merged over the defaults)."""
    from .config import Config, parse_toml, validate

    data = parse_toml(text.encode(), source)
    validate(data, source)   # the file as written must validate
    if group:
        entry = data["groups"][0]
        data = {k: entry[k] for k in GROUP_SECTIONS if k in entry}
    return Config(validate(data, source), source)


def verify(root: str, config, state_dir: str, level: str = "standard", node: str | None = None) -> list:
    """The checks run on the node with the written config; counter state goes
    to state_dir (a fresh one: init must not touch the hooks' state)."""
    from .checks import run_checks, select

    ctx = Context(FsRoot(root), config, level=level, command_timeout=config["hooks"]["command_timeout_s"],
                  state_dir=state_dir, node=node)
    return run_checks(select(None, level), ctx)


def default_node_name(root: str) -> str:
    if root != "/":
        return os.path.basename(os.path.normpath(root))
    return os.uname().nodename.split(".")[0]
