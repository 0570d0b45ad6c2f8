"""nvlink: every NVLink of every GPU is up, at the expected count and speed
(`nvidia-smi nvlink -s`), and no link's error counters (`nvidia-smi nvlink -e`:
replay, recovery, CRC) rose above their limits within the window. A GPU with a
dead link falls back to slower paths or, on NVSwitch systems, breaks the
all-to-all fabric NCCL relies on; a link whose errors keep rising is next."""

from __future__ import annotations

import re

from ..result import CheckResult, Status
from . import CheckSpec

NAME = "nvlink"

# Links per GPU of the SXM parts (NVIDIA data sheets); others: the most any GPU shows.
LINKS_BY_PRODUCT = {"H100": 18, "H200": 18, "H800": 8, "A100": 12, "A800": 8, "V100": 6, "B200": 18}
# PCIe boards joined by NVLink bridges: links per GPU with every bridge fitted (data
# sheets: A100 PCIe, H100 PCIe and H100 NVL take 3 bridges of 4 links; RTX A6000,
# A5000, A40 and RTX 3090 one 4-link bridge). nvidia-smi lists more links than the
# bridges use (H100 PCIe: 18 listed, 12 active, the rest '<inactive>'), so the number
# listed is no measure; a GPU without a bridge has no NV# peer in `nvidia-smi topo -m`.
BRIDGED_LINKS_BY_PRODUCT = {"H100 PCIe": 12, "H100 NVL": 12, "A100 80GB PCIe": 12, "A100-PCIE": 12,
                            "A100 PCIe": 12, "RTX A6000": 4, "RTX A5000": 4, "A40": 4, "RTX 3090": 4}

# Per link and window. Replays (a flit resent after a CRC error) and CRC errors
# are corrected by the link and show up in small numbers on healthy links; a
# recovery means the link went through retraining: traffic stalled.
ERROR_LIMITS = {"replay": 100, "recovery": 0, "crc": 100}
ERRORS_OK = "NVLink error counters within limits"


def settings():
    from pydantic import Field, field_validator

    from ._settings import Strict

    class NvlinkCfg(Strict):
        # Active links every GPU must have; None: by product (H100/H200 SXM 18, A100 SXM
        # 12, NVLink-bridged H100 PCIe/NVL and A100 PCIe 12, RTX A6000 4), the
        # NV# of `nvidia-smi topo -m`, or else the most any GPU on the node has active.
        # Set it where every GPU must be bridged: a GPU without one then fails.
        links_per_gpu: int | None = Field(None, ge=0, le=64)
        # Largest allowed increase of each `nvidia-smi nvlink -e` counter per link
        # within window_s ({} turns the error counters off). Names: the printed
        # label in lower case, without " Errors" (Replay Errors -> replay).
        error_limits: dict[str, int] = Field(default_factory=lambda: dict(ERROR_LIMITS))
        window_s: float = Field(3600.0, gt=0, le=30 * 86400)

        @field_validator("error_limits")
        @classmethod
        def _sane_limits(cls, v: dict[str, int]) -> dict[str, int]:
            negative = sorted(k for k, n in v.items() if n < 0)
            if negative:
                raise ValueError(f"error_limits must be >= 0 (a negative limit fails every link): {negative}")
            bad = sorted(k for k in v if not k or k != k.lower() or " " in k)
            if bad:
                raise ValueError(f"error_limits names are lower case with '_' (replay, recovery, crc): {bad}")
            return v

    return NvlinkCfg


SPEC = CheckSpec(
    NAME, "standard", rank=125, settings=settings,
    summary="every GPU has all its NVLinks active at full speed and their error counters stay within limits",
    hint="reset the GPU (nvidia-smi -r -i <index>) or reboot; links still down or errors still rising: reseat the "
         "GPU/baseboard, RMA",
    explain="""Runs `nvidia-smi nvlink -s` and requires checks.nvlink.links_per_gpu active links on
every GPU (default by product: H100/H200 SXM 18, A100 SXM 12; PCIe boards joined by
NVLink bridges: H100 PCIe, H100 NVL and A100 PCIe 12 (3 bridges), RTX A6000/A5000/A40,
RTX 3090 4; nvidia-smi lists more links than a bridge uses, e.g. 18 on an H100 PCIe
of which 12 are active, so the number listed is no measure; other products: the NV#
links to its peers in `nvidia-smi topo -m`, else the most any GPU on the node has
active), all at the speed of the fastest link. A GPU whose links are all down prints
'Unable to retrieve NVLink information as all links are inactive'. `nvidia-smi topo
-m` is read only for non-SXM GPUs with links down: a GPU without an NV# peer and
without an active link has no bridge and is not judged (named in the message); a
bridge gone entirely looks the same, so where every GPU must be bridged set
checks.nvlink.links_per_gpu. PCIe GPUs without NVLink: n/a.
A dead link makes NCCL route around it (slower) or fail on NVSwitch systems.
Then `nvidia-smi nvlink -e`: each link's error counters may rise by at most
checks.nvlink.error_limits within checks.nvlink.window_s (default one hour;
replay 100, recovery 0, crc 100; names are the printed labels in lower case
without " Errors"; {} turns this off). Like ib_counters, the readings of the last
window are kept in <hooks.state_dir>/counters/<node>.nvlink.json: a link that
erred once and then stays flat passes again one window later, without an admin.
Fix: reset the GPU or reboot; if links stay down or errors keep rising, reseat
the GPU or baseboard (NVSwitch tray), RMA.""",
)


def _product_links(name: str, table: dict[str, int]) -> int | None:
    for part, n in table.items():
        if re.search(rf"{re.escape(part)}(?!\w)", name):
            return n
    return None


def sxm_links(name: str) -> int | None:
    """Links of an SXM part (the name has no PCIe/NVL board suffix)."""
    if "PCI" in name.upper() or " NVL" in name or _product_links(name, BRIDGED_LINKS_BY_PRODUCT):
        return None
    return _product_links(name, LINKS_BY_PRODUCT)


def expected_links(gpus, configured: int | None, peers: dict[int, dict[int, int]] | None = None) -> dict[int, int | None]:
    """Active links each GPU must have; None: a GPU without an NVLink bridge
    (no NV# peer in `nvidia-smi topo -m` and no active link), not judged.
    Order: checks.nvlink.links_per_gpu; the SXM product; a bridged PCIe
    product; the NV# links to its peers (more than the GPU lists: through
    NVSwitches, each peer shows them all); the most links any GPU has active."""
    most = max((sum(1 for v in g.links.values() if v) for g in gpus), default=0)
    out: dict[int, int | None] = {}
    for g in gpus:
        nv = (peers or {}).get(g.index)
        active = sum(1 for v in g.links.values() if v)
        if configured is not None:
            out[g.index] = configured
        elif sxm_links(g.name):
            out[g.index] = sxm_links(g.name)
        elif nv is not None and not nv and not active:
            out[g.index] = None
        elif _product_links(g.name, BRIDGED_LINKS_BY_PRODUCT):
            out[g.index] = _product_links(g.name, BRIDGED_LINKS_BY_PRODUCT)
        elif nv:
            total = sum(nv.values())
            out[g.index] = total if total <= max(len(g.links), active) else max(nv.values())
        else:
            out[g.index] = most
    return out


def needs_topology(gpus, configured: int | None) -> bool:
    """`nvidia-smi topo -m` is read only where the links listed cannot tell
    the count: no configured count, no SXM part, and a GPU with links down."""
    return configured is None and any(
        not sxm_links(g.name) and (g.all_inactive or sum(1 for v in g.links.values() if v) < len(g.links))
        for g in gpus)


def judge(gpus, configured: int | None, peers: dict[int, dict[int, int]] | None = None) -> CheckResult:
    want = expected_links(gpus, configured, peers)
    unbridged = [g for g in gpus if want[g.index] is None]
    judged = [g for g in gpus if want[g.index]]
    note = (f" ({', '.join(f'GPU {g.index}' for g in unbridged)} without an NVLink bridge: no NV# peer in "
            f"nvidia-smi topo -m)" if unbridged else "")
    if not judged:
        return CheckResult(NAME, Status.NA, f"{len(gpus)} GPUs without NVLink{note}")
    speeds = [s for g in judged for s in g.links.values() if s]
    top = max(speeds, default=0.0)
    bad, devices, hints = [], [], []
    for g in judged:
        active = {n: s for n, s in g.links.items() if s}
        issues = []
        if g.all_inactive:
            issues.append(f"all links inactive (expected {want[g.index]})")
        elif len(active) < want[g.index]:
            down = sorted(n for n in g.links if n not in active)
            issues.append(f"{len(active)} of {want[g.index]} links active" + (f" (down: {', '.join(map(str, down))})"
                                                                              if down else ""))
        slow = sorted(n for n, s in active.items() if s < top * 0.99)
        if slow:
            issues.append(f"links {', '.join(map(str, slow))} below {top:g} GB/s")
        if issues:
            bad.append(f"GPU {g.index} ({g.uuid or g.name}): {'; '.join(issues)}")
            devices.append(f"GPU {g.index}")
            hints.append(f"nvidia-smi -r -i {g.index} or reboot; links still down: reseat/RMA GPU {g.index}"
                         + (" or its NVLink bridge" if not sxm_links(g.name) else ""))
    if bad:
        return CheckResult(NAME, Status.FAIL, "; ".join(bad) + note, devices, "; ".join(hints))
    counts = sorted({want[g.index] for g in judged})
    return CheckResult(NAME, Status.PASS, f"{len(judged)} GPUs x {'/'.join(map(str, counts))} NVLinks active at "
                       f"{top:g} GB/s{note}")


def _nvlink_query(ctx, flag: str, what: str, parse):
    """Parsed `nvidia-smi nvlink FLAG`, or the ERROR result saying why it cannot be read."""
    from ..command import CommandError

    try:
        out = ctx.run_command(["nvidia-smi", "nvlink", flag])
    except CommandError as exc:
        return CheckResult(NAME, Status.ERROR, f"cannot read {what}: {exc}")
    gpus = parse(out.stdout)
    if not gpus:
        return CheckResult(NAME, Status.ERROR, f"nvidia-smi nvlink {flag} printed no GPU lines: "
                           f"{out.stdout.strip()[:120]!r}")
    return gpus


def run(ctx) -> CheckResult:
    from ..probe.nvsmi import parse_nvlink_status

    if not ctx.gpus():
        return CheckResult(NAME, Status.NA, "no NVIDIA GPUs on this node")
    cfg = ctx.settings(NAME)
    gpus = _nvlink_query(ctx, "-s", "NVLink state", parse_nvlink_status)
    if isinstance(gpus, CheckResult):
        if cfg["links_per_gpu"] == 0 and "printed no GPU lines" in gpus.message:
            return CheckResult(NAME, Status.NA, "no NVLink expected (checks.nvlink.links_per_gpu = 0) and "
                               "nvidia-smi nvlink -s lists none")
        return gpus
    peers, note = None, ""
    if needs_topology(gpus, cfg["links_per_gpu"]):
        peers, note = topology(ctx)
    links = judge(gpus, cfg["links_per_gpu"], peers)
    links.message += note
    if links.status in (Status.NA, Status.ERROR) or not cfg["error_limits"]:
        return links
    return combine(links, errors(ctx, cfg["error_limits"], cfg["window_s"]))


def topology(ctx) -> tuple[dict[int, dict[int, int]] | None, str]:
    """NV# peers of `nvidia-smi topo -m`, or None and a note saying why not
    (then every GPU is judged: one without a bridge is not told apart)."""
    from ..command import CommandError
    from ..probe.nvsmi import parse_topo_nvlink_peers

    try:
        peers = parse_topo_nvlink_peers(ctx.run_command(["nvidia-smi", "topo", "-m"]).stdout)
    except CommandError as exc:
        return None, f" (nvidia-smi topo -m unreadable, GPUs without a bridge not told apart: {exc})"
    if not peers:
        return None, " (nvidia-smi topo -m printed no GPU matrix, GPUs without a bridge not told apart)"
    return peers, ""


# -- error counters ------------------------------------------------------------

def judge_errors(increase: dict[str, dict[str, int]], limits: dict[str, int], since: dict[str, float | None],
                 now: float, note: str = "") -> CheckResult:
    """increase: 'GPU <i> link <n>' -> counter -> increase within the window;
    since: the same key -> time of the baseline reading (None: first reading)."""
    bad, devices, by_gpu = [], [], {}
    for dev in sorted(increase, key=_dev_order):
        over = [f"{k} +{v} (limit {limits[k]})" for k, v in sorted(increase[dev].items())
                if k in limits and v > limits[k]]
        if over:
            base = since.get(dev)
            when = "since the driver loaded (first reading)" if base is None else f"in {_ago(now - base)}"
            bad.append(f"{dev}: {', '.join(over)} {when}")
            devices.append(dev)
            gpu, link = _dev_order(dev)
            by_gpu.setdefault(gpu, []).append(link)
    if bad:
        hints = [f"GPU {g}: NVLink errors rising on link {', '.join(map(str, ls))}: nvidia-smi -r -i {g} or reboot; "
                 f"still rising: reseat GPU {g}/baseboard or NVSwitch tray, RMA" for g, ls in sorted(by_gpu.items())]
        return CheckResult(NAME, Status.FAIL, "NVLink errors: " + "; ".join(bad) + note, devices, "; ".join(hints))
    return CheckResult(NAME, Status.PASS, f"{ERRORS_OK}{note}")


def _dev_order(dev: str) -> tuple[int, int]:
    """'GPU 3 link 17' -> (3, 17)."""
    parts = dev.split()
    return int(parts[1]), int(parts[3])


def _ago(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min"


def errors(ctx, limits: dict[str, int], window: float) -> CheckResult:
    """Read `nvidia-smi nvlink -e` and judge each link's increase within the window.
    The history is keyed by GPU UUID and link, so a swapped GPU starts afresh."""
    import time

    from .. import counterwindow
    from ..probe.nvsmi import parse_nvlink_errors

    gpus = _nvlink_query(ctx, "-e", "NVLink error counters", parse_nvlink_errors)
    if isinstance(gpus, CheckResult):
        return gpus
    seen = {k for g in gpus for values in g.links.values() for k in values}
    if seen and not seen & set(limits):
        return CheckResult(NAME, Status.ERROR, "nvidia-smi nvlink -e shows none of the counters of "
                           f"checks.nvlink.error_limits ({', '.join(sorted(limits))}); it shows: "
                           f"{', '.join(sorted(seen))}")
    current, labels = {}, {}
    for g in gpus:
        for link, values in g.links.items():
            key = f"{g.uuid or 'GPU' + str(g.index)}/link{link}"
            current[key] = {k: v for k, v in values.items() if k in limits}
            labels[key] = f"GPU {g.index} link {link}"
    now = time.time()
    path = ctx.state_path(f"counters/{ctx.node_key()}.{NAME}.json")
    increase, since, note = counterwindow.observe(path, current, now, window, label=labels.__getitem__)
    return judge_errors(increase, limits, since, now, f" ({note})" if note else "")


def combine(links: CheckResult, errs: CheckResult) -> CheckResult:
    """One verdict from the link-state and the error-counter halves: the worse
    status, the messages of the halves that did not pass, every device and hint."""
    if links.status is Status.PASS and errs.status is Status.PASS:     # the link message, plus any note
        return CheckResult(NAME, Status.PASS, links.message + errs.message.removeprefix(ERRORS_OK))
    status = links.status if links.status.rank >= errs.status.rank else errs.status
    parts = [r for r in (links, errs) if r.status is not Status.PASS] or [links, errs]
    message = "; ".join(r.message for r in parts)
    devices = [d for r in parts for d in r.devices]
    hint = "; ".join(r.hint for r in parts if r.hint)
    return CheckResult(NAME, status, message, devices, hint)
