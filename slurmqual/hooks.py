"""`slurmqual hook prolog|epilog|healthcheck`: what slurmd runs.

Rules (each one a lesson from the field):
- prolog runs fast checks only; on success it makes no slurmctld call at all
  (thousands of nodes run it at once for a big job); on failure it sets our
  drain reason and exits non-zero so Slurm requeues the job.
- epilog/healthcheck run the standard checks; a failure drains with our reason;
  a pass resumes the node only if *we* drained it.
- we never touch a node an admin or another tool drained, nor one that is
  down, rebooting or in maintenance (LBNL NHC issue #134 is the bug to avoid).
- a check `error` (bad input, hung command) never drains.
- a bug in slurmqual itself never drains (unless hooks.drain_on_internal_error):
  it is logged with its traceback and the hook exits 0.
"""

from __future__ import annotations

import json
import os
import time
import traceback

from .result import CheckResult, Status, worst
from .slurm import reason as reasons

LEVEL = {"prolog": "fast", "epilog": "standard", "healthcheck": "standard"}


def node_name(env: dict) -> str:
    name = env.get("SLURMD_NODENAME") or os.uname().nodename.split(".")[0]
    # SLURMD_NODENAME comes from slurmd, but be strict anyway: it becomes a path.
    if not name or "/" in name or name.startswith(".") or len(name) > 128:
        raise ValueError(f"unusable node name {name!r}")
    return name


def drain_reason(failed: list[CheckResult]) -> str:
    first = failed[0]
    detail = first.message
    if len(failed) > 1:
        detail = f"{detail} (+{len(failed) - 1} more: {','.join(r.name for r in failed[1:])})"
    return reasons.make(first.name, detail)


def record_state(state_dir: str, node: str, hook: str, results: list[CheckResult], versions: dict) -> None:
    """Last result per node, for `slurmqual status` on the head node."""
    from .atomic import ensure_dir, write_text

    nodes_dir = os.path.join(state_dir, "nodes")
    ensure_dir(nodes_dir)
    data = {"node": node, "time": time.time(), "hook": hook, "status": worst(results).value,
            "checks": [r.to_dict() for r in results], "versions": versions}
    write_text(os.path.join(nodes_dir, f"{node}.json"), json.dumps(data))


def run(hook: str, env: dict | None = None) -> int:
    env = dict(os.environ) if env is None else env
    os.environ["SLURMQUAL_HOOK"] = hook  # visible to the Slurm CLI calls we make (audit logs)
    config = None
    log = None
    try:
        from .config import load
        from .hooklog import setup

        config = load()
        log = setup(config["hooks"])
        _arm_deadline(config["hooks"])
        try:
            return _run(hook, env, config, log)
        finally:
            import signal

            signal.alarm(0)  # the hook is over; never leave an alarm behind in the caller
    except Exception as exc:  # noqa: BLE001 - a slurmqual bug must not drain a fleet
        from .hooklog import setup

        log = log or setup(config["hooks"] if config else None)
        log.error("internal error in hook %s: %s\n%s", hook, exc, traceback.format_exc())
        if config is not None and config["hooks"]["drain_on_internal_error"]:
            try:
                from .slurm import get_adapter

                get_adapter(config).drain([node_name(env)], reasons.make("internal", f"{type(exc).__name__}: {exc}"))
            except Exception:  # noqa: BLE001
                log.error("could not drain after internal error:\n%s", traceback.format_exc())
            return 1 if hook == "prolog" else 0
        return 0


class HookDeadline(Exception):
    pass


def _arm_deadline(hooks_cfg: dict) -> None:
    """Last line of defence: checks and Slurm calls have their own timeouts, but
    whatever happens the hook ends (as an internal error: no drain) soon after
    its deadline instead of hanging slurmd."""
    import math
    import signal

    def expired(_sig, _frame):
        raise HookDeadline(f"hook exceeded its deadline of {hooks_cfg['deadline_s']:g}s")

    signal.signal(signal.SIGALRM, expired)
    signal.alarm(max(1, math.ceil(hooks_cfg["deadline_s"] + hooks_cfg["command_timeout_s"])))


def _run(hook: str, env: dict, config, log) -> int:
    from .commands.check import evaluate_with_context
    from .security import check_root_only

    check_root_only(config.path or "", "site config")
    check_root_only(config["hooks"]["state_dir"], "state dir")
    node = node_name(env)
    deadline = time.monotonic() + config["hooks"]["deadline_s"]
    results, ctx = evaluate_with_context(config.node_root(node), config, LEVEL[hook], config.checks_for(hook), deadline)
    try:
        record_state(config["hooks"]["state_dir"], node, hook, results, ctx.memo.get("versions", {}))
    except OSError as exc:
        log.warning("could not record state for %s: %s", node, exc)
    if config["hooks"]["metrics_dir"]:
        try:
            from .metrics import write_node_metrics

            write_node_metrics(config["hooks"]["metrics_dir"], node, results, time.time())
        except Exception as exc:  # noqa: BLE001 - metrics are nice to have
            log.warning("could not write metrics: %s", exc)
    for r in results:
        if r.status in (Status.FAIL, Status.ERROR, Status.WARN):
            log.info("%s %s: %s %s: %s", hook, node, r.name, r.status.value, r.message)
    for name, tb in ctx.memo.get("_tracebacks", []):
        log.error("check %s raised:\n%s", name, tb)
    failed = [r for r in results if r.status is Status.FAIL]

    if hook == "prolog" and not failed:
        return 0  # the hot path: no slurmctld call at all

    from .slurm import SlurmError, get_adapter

    adapter = get_adapter(config)
    try:
        info = {n.name: n for n in adapter.node_info(node)}.get(node)
    except SlurmError as exc:
        log.error("%s %s: cannot read node state from Slurm: %s", hook, node, exc)
        return 1 if (hook == "prolog" and failed) else 0
    if failed:
        reason = drain_reason(failed)
        if info is not None and info.drained and not reasons.is_ours(info.reason):
            log.info("%s %s: failing (%s) but already drained by someone else (%r): left alone",
                     hook, node, reason, info.reason)
        elif info is not None and info.hands_off and not info.drained:
            log.info("%s %s: failing (%s) but node is %s: left alone", hook, node, reason, info.state)
        elif info is None or info.reason != reason:
            try:
                adapter.drain([node], reason)
                log.warning("%s %s: drained: %s", hook, node, reason)
            except SlurmError as exc:
                log.error("%s %s: could not drain (%s): %s", hook, node, reason, exc)
        return 1 if hook == "prolog" else 0
    # Passed (epilog/healthcheck): give back only what a node check took. A
    # burn-in or admin drain ("slurmqual: burnin: ...") needs requalify/resume.
    from .checks import REGISTRY

    if info is not None and info.drained and reasons.check_of(info.reason) in REGISTRY and not info.hands_off:
        if any(r.status is Status.ERROR for r in results):
            log.info("%s %s: checks pass but some errored; keeping our drain until they judge", hook, node)
            return 0
        try:
            adapter.resume([node])
            log.warning("%s %s: checks pass, resumed (was: %s)", hook, node, info.reason)
        except SlurmError as exc:
            log.error("%s %s: could not resume: %s", hook, node, exc)
    return 0
