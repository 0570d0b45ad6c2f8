"""slurm.conf as slurmqual's hooks depend on it: the file's Key=Value lines,
and what each supported Slurm (22.05-26.05) does with the hook settings.

Verified against SchedMD's doc/man/man5/slurm.conf.5, src/common/read_config.c
and the changelogs at the release tags:

- `PrologEpilogTimeout`: every version; without it Slurm waits for a hook
  forever. A prolog that times out drains the node and requeues the job, an
  epilog that times out drains the node: with Slurm's generic reason, not ours.
- `PrologTimeout` / `EpilogTimeout` (25.05+): each replaces PrologEpilogTimeout
  for its hook when set (default: PrologEpilogTimeout). An older slurmctld
  refuses a slurm.conf that names them.
- `HealthCheckTimeout` (26.05+, default 60, 0 means the default): before 26.05
  slurmd kills HealthCheckProgram after a fixed 60 s.
- `HealthCheckNodeState`: `START_ONLY` (25.11+) and `REBOOT_ONLY` (26.05+) run
  the program only at slurmd start / after a reboot and exclude every other
  state, so the periodic runs that resume a repaired node stop. Whatever the
  setting, slurmd runs HealthCheckProgram when it starts, before it registers
  with slurmctld: a rebooted node is checked before it takes a job.
- `RebootProgram`: what `scontrol reboot` runs; without it the reboots of the
  remediation ladder never happen.
"""

from __future__ import annotations

import glob
import os

# Keys and HealthCheckNodeState words, and the first release that knows them.
KEY_SINCE = {"prologtimeout": (25, 5), "epilogtimeout": (25, 5), "healthchecktimeout": (26, 5)}
STATE_SINCE = {"start_only": (25, 11), "reboot_only": (26, 5)}
HEALTHCHECK_TIMEOUT_S = 60.0       # fixed before 26.05, HealthCheckTimeout's default after
SKIPPED = ("nodename", "partitionname", "nodeset", "downnodes", "frontendname")


def parse(path: str, seen: set[str] | None = None) -> dict[str, str]:
    """Key=Value pairs of a slurm.conf (keys lower-cased; later lines win),
    following Include lines. Node/partition lines are skipped. OSError when
    the file cannot be read."""
    seen = set() if seen is None else seen
    real = os.path.realpath(path)
    if real in seen:
        return {}
    seen.add(real)
    out: dict[str, str] = {}
    with open(path, encoding="utf-8", errors="replace") as fh:
        for raw in fh:
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            if line.lower().startswith("include ") or line.lower().startswith("include\t"):
                target = line.split(None, 1)[1].strip()
                if not os.path.isabs(target):
                    target = os.path.join(os.path.dirname(path), target)
                for inc in sorted(glob.glob(target)):
                    out.update(parse(inc, seen))
                continue
            key, sep, value = line.partition("=")
            if not sep or key.strip().lower() in SKIPPED:
                continue
            out[key.strip().lower()] = value.strip()
    return out


def items(value: str) -> set[str]:
    """A comma list (PrologFlags, HealthCheckNodeState, ...) as lower-case words."""
    return {v.strip().lower() for v in value.split(",") if v.strip()}


def _seconds(conf: dict[str, str], key: str) -> float | None:
    try:
        return float(conf[key])
    except (KeyError, ValueError):
        return None


def hook_timeouts(conf: dict[str, str], version: tuple[int, int]) -> dict[str, float | None]:
    """How long Slurm lets each hook run, as this version reads the file
    (None: no limit)."""
    both = _seconds(conf, "prologepilogtimeout")
    out: dict[str, float | None] = {"prolog": both, "epilog": both}
    if version >= (25, 5):
        for hook in ("prolog", "epilog"):
            own = _seconds(conf, f"{hook}timeout")
            if own is not None:
                out[hook] = own
    out["healthcheck"] = HEALTHCHECK_TIMEOUT_S
    if version >= (26, 5):
        own = _seconds(conf, "healthchecktimeout")
        if own:   # 0 is reset to the default
            out["healthcheck"] = own
    return out


def findings(conf: dict[str, str], version: tuple[int, int] | None, budget_s: float,
             may_reboot: bool) -> list[tuple[bool, str, str, str]]:
    """(ok, what, detail, fix) for the hook settings of `conf` on this Slurm
    version (None: unknown, judged as 22.05-24.11 read it). budget_s: the
    longest a hook of ours runs (hooks.deadline_s plus one command's timeout)."""
    out: list[tuple[bool, str, str, str]] = []
    ver = version or (22, 5)
    shown = f"Slurm {ver[0]}.{ver[1]:02d}" if version else "an unknown Slurm version (judged as 22.05)"
    for key, since in KEY_SINCE.items():
        if key in conf and ver < since:
            out.append((False, f"slurm.conf {key}", f"{shown} does not know this key (it is {since[0]}.{since[1]:02d}+): "
                        "slurmctld refuses the file", "remove it; use PrologEpilogTimeout"))
    states = items(conf.get("healthchecknodestate", ""))
    for word, since in STATE_SINCE.items():
        if word not in states:
            continue
        if ver < since:
            out.append((False, "slurm.conf HealthCheckNodeState", f"{word.upper()} is {since[0]}.{since[1]:02d}+, "
                        f"not known to {shown}", "HealthCheckNodeState=ANY,CYCLE"))
        else:
            out.append((False, "slurm.conf HealthCheckNodeState",
                        f"{word.upper()} stops the periodic health checks: a node slurmqual drained is never "
                        "resumed by itself once repaired (slurmd runs the health check at every start anyway, so a "
                        "rebooted node is checked before it takes a job without it)", "HealthCheckNodeState=ANY,CYCLE"))
    keys = {"prolog": "PrologTimeout" if ver >= (25, 5) else "PrologEpilogTimeout",
            "epilog": "EpilogTimeout" if ver >= (25, 5) else "PrologEpilogTimeout",
            "healthcheck": "HealthCheckTimeout" if ver >= (26, 5) else "the fixed health check timeout"}
    for hook, limit in hook_timeouts(conf, ver).items():
        what = f"slurm.conf {hook} timeout"
        if limit is None:
            out.append((True, what, "none set: Slurm waits for the hook (slurmqual's own deadline ends it)", ""))
        elif limit <= budget_s:
            fix = (f"{keys[hook]}={int(budget_s * 2)} or lower hooks.deadline_s" if hook != "healthcheck" or ver >= (26, 5)
                   else f"lower hooks.deadline_s + hooks.command_timeout_s under {limit:g}s (Slurm {ver[0]}.{ver[1]:02d} "
                        "kills the health check after 60 s)")
            out.append((False, what, f"{limit:g}s ({keys[hook]}) is not above the hooks' deadline ({budget_s:g}s "
                        "with command timeout): Slurm would kill a slow hook and drain with a generic reason", fix))
        else:
            out.append((True, what, f"{limit:g}s ({keys[hook]})", ""))
    if may_reboot and not conf.get("rebootprogram"):
        out.append((False, "slurm.conf RebootProgram", "[remediation] may reboot nodes but slurm.conf has no "
                    "RebootProgram: `scontrol reboot` does nothing", "RebootProgram=/usr/sbin/reboot"))
    return out
