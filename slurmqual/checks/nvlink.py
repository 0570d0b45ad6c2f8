"""nvlink: every NVLink of every GPU is up, at the expected count and speed
(`nvidia-smi nvlink -s`), and no link's error counters (`nvidia-smi nvlink -e`:
replay, recovery, CRC) rose above their limits within the window. A GPU with a
dead link falls back to slower paths or, on NVSwitch systems, breaks the
all-to-all fabric NCCL relies on; a link whose errors keep rising is next."""

from __future__ import annotations

from ..result import CheckResult, Status
from . import CheckSpec

NAME = "nvlink"

# Links per GPU of the SXM parts (NVIDIA data sheets); others: the most any GPU shows.
LINKS_BY_PRODUCT = {"H100": 18, "H200": 18, "H800": 8, "A100": 12, "A800": 8, "V100": 6, "B200": 18}

# Per link and window. Replays (a flit resent after a CRC error) and CRC errors
# are corrected by the link and show up in small numbers on healthy links; a
# recovery means the link went through retraining: traffic stalled.
ERROR_LIMITS = {"replay": 100, "recovery": 0, "crc": 100}
ERRORS_OK = "NVLink error counters within limits"


def settings():
    from pydantic import Field, field_validator

    from ._settings import Strict

    class NvlinkCfg(Strict):
        # Active links every GPU must have; None: by product (H100/H200 18, A100 12)
        # or else the most any GPU on the node has.
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
every GPU (default by product: H100/H200 SXM 18, A100 SXM 12; else the most any GPU
on the node has), all at the speed of the fastest link. A GPU whose links are all
down prints 'Unable to retrieve NVLink information as all links are inactive'.
PCIe GPUs without NVLink: n/a.
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


def expected_links(gpus, configured: int | None) -> int:
    if configured is not None:
        return configured
    for g in gpus:
        for part, n in LINKS_BY_PRODUCT.items():
            if part in g.name and "PCIe" not in g.name:
                return n
    return max((len(g.links) for g in gpus), default=0)


def judge(gpus, configured: int | None) -> CheckResult:
    want = expected_links(gpus, configured)
    if not want:
        return CheckResult(NAME, Status.NA, f"{len(gpus)} GPUs without NVLink")
    speeds = [s for g in gpus for s in g.links.values() if s]
    top = max(speeds, default=0.0)
    bad, devices, hints = [], [], []
    for g in gpus:
        active = {n: s for n, s in g.links.items() if s}
        issues = []
        if g.all_inactive:
            issues.append(f"all links inactive (expected {want})")
        elif len(active) < want:
            down = sorted(n for n in g.links if n not in active)
            issues.append(f"{len(active)} of {want} links active" + (f" (down: {', '.join(map(str, down))})"
                                                                      if down else ""))
        slow = sorted(n for n, s in active.items() if s < top * 0.99)
        if slow:
            issues.append(f"links {', '.join(map(str, slow))} below {top:g} GB/s")
        if issues:
            bad.append(f"GPU {g.index} ({g.uuid or g.name}): {'; '.join(issues)}")
            devices.append(f"GPU {g.index}")
            hints.append(f"nvidia-smi -r -i {g.index} or reboot; links still down: reseat/RMA GPU {g.index}")
    if bad:
        return CheckResult(NAME, Status.FAIL, "; ".join(bad), devices, "; ".join(hints))
    return CheckResult(NAME, Status.PASS, f"{len(gpus)} GPUs x {want} NVLinks active at {top:g} GB/s")


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
    gpus = _nvlink_query(ctx, "-s", "NVLink state", parse_nvlink_status)
    if isinstance(gpus, CheckResult):
        return gpus
    cfg = ctx.settings(NAME)
    links = judge(gpus, cfg["links_per_gpu"])
    if links.status in (Status.NA, Status.ERROR) or not cfg["error_limits"]:
        return links
    return combine(links, errors(ctx, cfg["error_limits"], cfg["window_s"]))


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
