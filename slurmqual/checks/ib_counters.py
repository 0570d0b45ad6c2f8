"""ib_counters: port error counters below the configured limits. Rising symbol
errors and link downs mark a bad cable or transceiver before it fails outright."""

from __future__ import annotations

from ..result import CheckResult, Status
from . import CheckSpec

NAME = "ib_counters"


# The per-port error counters the kernel exposes under ports/<n>/counters
# (drivers/infiniband/core/sysfs.c); a limit on any other name would make every
# node's check error on a missing file, so config validate rejects it.
KNOWN_COUNTERS = (
    "symbol_error", "link_error_recovery", "link_downed", "port_rcv_errors", "port_rcv_remote_physical_errors",
    "port_rcv_switch_relay_errors", "port_xmit_discards", "port_xmit_constraint_errors",
    "port_rcv_constraint_errors", "local_link_integrity_errors", "excessive_buffer_overrun_errors",
    "VL15_dropped", "port_xmit_wait",
)


def settings():
    from pydantic import Field, field_validator

    from ._settings import Strict

    class IbCountersCfg(Strict):
        # Largest allowed increase of each counter within window_s.
        limits: dict[str, int] = Field(default_factory=lambda: {
            "symbol_error": 100,
            "link_downed": 0,
            "port_rcv_errors": 100,
            "link_error_recovery": 10,
            "local_link_integrity_errors": 10,
            "excessive_buffer_overrun_errors": 10,
        })
        window_s: float = Field(3600.0, gt=0, le=30 * 86400)

        @field_validator("limits")
        @classmethod
        def _sane_limits(cls, v: dict[str, int]) -> dict[str, int]:
            unknown = sorted(k for k in v if k not in KNOWN_COUNTERS)
            if unknown:
                raise ValueError(f"unknown counter {unknown}; known: {', '.join(KNOWN_COUNTERS)}")
            negative = sorted(k for k, n in v.items() if n < 0)
            if negative:
                raise ValueError(f"limits must be >= 0 (a negative limit fails every port): {negative}")
            return v

    return IbCountersCfg


SPEC = CheckSpec(
    NAME, "fast", rank=70, hooks=("epilog", "healthcheck"), settings=settings,
    summary="fabric port error counters did not rise above their limits within the window",
    hint="errors on the link: clean/replace the cable or transceiver, check the switch port; perfquery -x to watch",
    explain="""Port error counters (/sys/class/infiniband/<dev>/ports/<n>/counters) are judged as
increases within checks.ib_counters.window_s (default one hour): each counter may
rise by at most its entry in checks.ib_counters.limits (symbol_error, link_downed,
port_rcv_errors, ...). link_downed +1 within the hour is a link flap.
The counters count since the driver loaded and never go down, so slurmqual keeps
the readings of the last window in <hooks.state_dir>/counters/<node>.ib_counters.json
and compares with the reading a window ago: after a cable is replaced the counters
stay flat and the node passes again one window later, without an admin. On the
first reading the totals count as the increase (nothing says they are old).
Fix: clean or replace the cable/transceiver, check the switch port, watch with perfquery -x.""",
)


# What the kernel prints for a port counter of a device without a PMA (iWARP,
# some RoCE/soft devices): drivers/infiniband/core/sysfs.c, show_pma_counter.
NO_PMA = "N/A"


def judge(increase: dict[str, dict[str, int]], limits: dict[str, int], since: dict[str, float | None],
          now: float, note: str = "", no_pma: list[str] = ()) -> CheckResult:
    """increase: port -> counter -> increase within the window; since: port ->
    time of the baseline reading (None: first reading, totals); no_pma: ports
    whose counters read N/A (not judged: na for them, never an error)."""
    if no_pma:
        note = f" (counters N/A, no PMA: {', '.join(no_pma)}){note}"
    bad, devices = [], []
    for port, values in sorted(increase.items()):
        over = [f"{k} +{v} (limit {limits[k]})" for k, v in sorted(values.items()) if v > limits[k]]
        if over:
            base = since.get(port)
            when = "since the driver loaded (first reading)" if base is None else f"in {_ago(now - base)}"
            bad.append(f"{port}: {', '.join(over)} {when}")
            devices.append(port)
    if bad:
        return CheckResult(NAME, Status.FAIL, "; ".join(bad) + note, devices)
    if not increase:
        return CheckResult(NAME, Status.NA, "no fabric ports" if not no_pma else f"no port with error counters{note}")
    return CheckResult(NAME, Status.PASS, f"{len(increase)} ports within error limits{note}")


def _ago(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min"


def run(ctx) -> CheckResult:
    import time

    from .. import counterwindow

    fs, cfg = ctx.fs, ctx.settings(NAME)
    limits, window = cfg["limits"], cfg["window_s"]
    current, no_pma = {}, []
    for p in ctx.ports():
        values = _read_counters(fs, p.base, limits)
        if values is None:
            no_pma.append(p.name)
        else:
            current[p.name] = values
    now = time.time()
    path = ctx.state_path(f"counters/{ctx.node_key()}.{NAME}.json")
    increase, since, note = counterwindow.observe(path, current, now, window)
    return judge(increase, limits, since, now, f" ({note})" if note else "", no_pma)


def _read_counters(fs, base: str, limits: dict[str, int]) -> dict[str, int] | None:
    """A port's counters, or None when the device has no PMA to count with
    (its counters read "N/A (no PMA)"). Anything else unreadable is an error."""
    from ..fsroot import FsError

    try:
        return {k: fs.read_int(f"{base}/counters/{k}", 10) for k in limits}
    except FsError as exc:
        try:
            if fs.read(exc.path).strip().startswith(NO_PMA):
                return None
        except FsError:
            pass
        raise
