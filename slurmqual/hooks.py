"""`slurmqual hook prolog|epilog|healthcheck`: what slurmd runs.

Rules (each one a lesson from the field):
- prolog runs fast checks only; on success it makes no slurmctld call at all
  (thousands of nodes run it at once for a big job); on failure it sets our
  drain reason and exits non-zero so Slurm requeues the job; where the rules
  keep the node in service (fleet guard, hands-off node) it exits 0, since
  slurmd drains a node after a failed prolog itself ("Prolog error").
- epilog/healthcheck run the standard checks; a failure drains with our reason;
  a pass resumes the node only if *we* drained it, and calls slurmctld only
  when the node's state file says we did (or the file is unreadable).
- who may drain, re-reason or resume what is decided in policy.py; a new hook
  drain first asks the fleet guard (policy.HookGuard), which holds drains once
  more than max(2, 10%) of the nodes were drained by hooks within its window.
- a check in `error` holds our own drain at most hooks.error_hold_s (_error_hold).
- drains, resumes and holds are spooled as events (events.py) for `history`.
- we never touch a node an admin or another tool drained, nor one that is
  down, rebooting or in maintenance (LBNL NHC issue #134 is the bug to avoid).
- a check `error` (bad input, hung command) never drains.
- a bug in slurmqual itself never drains (unless hooks.drain_on_internal_error):
  it is logged with its traceback and the hook exits 0.
"""

from __future__ import annotations

import os
import time

from .result import CheckResult, Status

# Imported where needed, not here: traceback and logging (the failure paths),
# slurm.reason (its package imports the Slurm adapters). A passing prolog runs
# before every job and should import no more than it uses.

LEVEL = {"prolog": "fast", "epilog": "standard", "healthcheck": "standard"}


def node_name(env: dict) -> str:
    name = env.get("SLURMD_NODENAME") or os.uname().nodename.split(".")[0]
    # SLURMD_NODENAME comes from slurmd, but be strict anyway: it becomes a path
    # and a drain target (slurmqual/names.py).
    from .names import BadNodeName, check

    try:
        return check(name)
    except BadNodeName as exc:
        raise ValueError(str(exc)) from None


def drain_reason(failed: list[CheckResult]) -> str:
    from .slurm import reason as reasons

    first = failed[0]
    return reasons.make(first.name, first.message, others=[r.name for r in failed[1:]])


def record_state(state_dir: str, node: str, hook: str, results: list[CheckResult], versions: dict, log):
    """Merge this run into the node's state file (for `status`, `inventory`, baselines)."""
    from .nodestate import record_run

    return record_run(state_dir, node, hook, results, versions, warn=log.warning)


def _latest_results(state, results: list[CheckResult]) -> list[CheckResult]:
    """Every check's latest result on the node (the state file merges the hooks'
    runs): the node's metrics file must not lose the health check's checks when
    an epilog, which runs fewer, rewrites it."""
    if state is None:
        return results
    latest = []
    for d in state.checks.values():
        try:
            latest.append(CheckResult(d["name"], Status(d["status"]), str(d.get("message", ""))))
        except (KeyError, ValueError, TypeError):
            continue  # a malformed entry of an older state file: skip it, never fail the hook
    return latest or results


def run(hook: str, env: dict | None = None) -> int:
    env = dict(os.environ) if env is None else env
    os.environ["SLURMQUAL_HOOK"] = hook  # visible to the Slurm CLI calls we make (audit logs)
    config = None
    log = None
    signal = _signal_module()

    try:
        from .config import ConfigError, load
        from .hooklog import setup

        # Armed before reading anything (the config could be a FIFO), with the defaults.
        _arm_deadline({"deadline_s": 30.0, "command_timeout_s": 10.0})
        try:
            config = load()
        except ConfigError as exc:
            # Nothing from a refused or broken config is used: not its log_file,
            # not drain_on_internal_error. One clear line, no drain, exit 0, and
            # a record an admin sees in `status` (configproblem.py).
            signal.alarm(0)
            from .configproblem import report

            try:
                node = node_name(env)
            except ValueError:
                node = None
            report(hook, node, str(exc))
            return 0
        log = setup(config["hooks"])
        _arm_deadline(config["hooks"])
        try:
            return _run(hook, env, config, log)
        finally:
            signal.alarm(0)  # the hook is over; never leave an alarm behind in the caller
    except Exception as exc:  # noqa: BLE001 - a slurmqual bug must not drain a fleet
        signal.alarm(0)
        import traceback

        from .hooklog import setup

        log = log or setup(config["hooks"] if config else None)
        log.error("internal error in hook %s: %s\n%s", hook, exc, traceback.format_exc())
        if config is not None and config["hooks"]["drain_on_internal_error"]:
            try:
                from .slurm import get_adapter
                from .slurm import reason as reasons

                get_adapter(config, hook=True).drain([node_name(env)], reasons.make("internal", f"{type(exc).__name__}: {exc}"))
            except Exception:  # noqa: BLE001
                log.error("could not drain after internal error:\n%s", traceback.format_exc())
            return 1 if hook == "prolog" else 0
        return 0


class HookDeadline(Exception):
    pass


def _signal_module():
    """signal's C core: signal.signal/alarm/SIGALRM without signal.py, whose
    enum conversions cost the prolog ~0.5 ms before every job."""
    try:
        import _signal as signal
    except ImportError:  # not CPython
        import signal
    return signal


def _arm_deadline(hooks_cfg: dict) -> None:
    """Last line of defence: checks and Slurm calls have their own timeouts, but
    whatever happens the hook ends (as an internal error: no drain) soon after
    its deadline instead of hanging slurmd."""
    signal = _signal_module()

    def expired(_sig, _frame):
        raise HookDeadline(f"hook exceeded its deadline of {hooks_cfg['deadline_s']:g}s")

    signal.signal(signal.SIGALRM, expired)
    seconds = hooks_cfg["deadline_s"] + hooks_cfg["command_timeout_s"]
    signal.alarm(max(1, int(-(-seconds // 1))))  # ceil without importing math (a shared library load)


def _run(hook: str, env: dict, config, log) -> int:
    from .evaluation import evaluate_with_context
    from .security import check_root_only

    from .security import root_only_ok

    check_root_only(config.path or "", "site config")
    # A state dir others can write is refused, but the checks still run (and
    # drain): refusing to check at all would silently switch the node's checks off.
    state_unsafe = root_only_ok(config["hooks"]["state_dir"], "state dir")
    if state_unsafe:
        log.error("%s: not recording state: %s", hook, state_unsafe)
    node = node_name(env)
    if config.groups:  # [[groups]]: this node's overrides, merged in config.for_node
        from .nodefacts import node_config

        config = node_config(config, node, hook=hook, trusted=not state_unsafe, log=log)
    deadline = time.monotonic() + config["hooks"]["deadline_s"]
    results, ctx = evaluate_with_context(config.node_root(node), config, LEVEL[hook], config.checks_for(hook), deadline,
                                         node=node)
    state = None
    try:
        if not state_unsafe:
            state = record_state(config["hooks"]["state_dir"], node, hook, results, ctx.memo.get("versions", {}),
                                 log)
    except (OSError, ValueError) as exc:
        log.warning("could not record state for %s: %s", node, exc)
    for r in results:
        if r.status in (Status.FAIL, Status.ERROR, Status.WARN):
            log.info("%s %s: %s %s: %s", hook, node, r.name, r.status.value, r.message)
    for name, tb in ctx.memo.get("_tracebacks", []):
        log.error("check %s raised:\n%s", name, tb)
    failed = [r for r in results if r.status is Status.FAIL]
    if not state_unsafe and (failed or (hook != "prolog" and ("xid_lines" in ctx.memo or any(
            r.status is Status.WARN and r.devices for r in results)))):
        _record_evidence(hook, node, results, ctx, log)

    if hook != "prolog" and state is not None:
        state = _record_hardware(hook, node, state, ctx, config, log)
    # A drain Slurm undid: made while the ladder's reboot was completing (see _drain).
    enforce = state.drain if state is not None and state.drain and state.drain.get("enforce") else None
    swapped = state.swap if state is not None else None
    if hook == "prolog" and not failed and enforce is None and swapped is None:
        return 0  # the hot path: no slurmctld call at all (and no metrics: see _write_metrics)
    try:
        return _act(hook, node, results, failed, state, ctx, config, log, enforce)
    finally:
        _write_metrics(hook, node, results, state, state_unsafe, ctx, config, log)


def _write_metrics(hook, node, results, state, state_unsafe, ctx, config, log) -> None:
    """A passing prolog writes no metrics (prometheus_client would cost every
    job ~70 ms); a failing one does. Epilog and health check refresh them,
    after acting, so the ladder's actions are in them."""
    if not config["hooks"]["metrics_dir"]:
        return
    try:
        from .metrics import write_node_metrics
        from .nodestate import StateError, read
        from .security import check_root_only

        check_root_only(config["hooks"]["metrics_dir"], "metrics dir")  # its writer follows symlinks
        if not state_unsafe:
            try:
                state = read(config["hooks"]["state_dir"], node) or state
            except (StateError, ValueError):
                pass
        write_node_metrics(config["hooks"]["metrics_dir"], node, _latest_results(state, results), time.time(),
                           versions=state.versions if state is not None else ctx.memo.get("versions", {}),
                           remediation=state.remediation if state is not None else None)
    except Exception as exc:  # noqa: BLE001 - metrics are nice to have
        log.warning("could not write metrics: %s", exc)


def _record_evidence(hook, node, results, ctx, log) -> None:
    """The raw output behind failures, for `slurmqual rma` (rawevidence.py)."""
    from . import rawevidence

    try:
        note = rawevidence.record(ctx, hook, results)
    except Exception as exc:  # noqa: BLE001 - evidence is a help: never a reason for the hook to fail
        note = f"{type(exc).__name__}: {exc}"
    if note:
        log.warning("%s %s: raw evidence: %s", hook, node, note)


def _record_hardware(hook, node, state, ctx, config, log):
    """Keep the node's hardware identity; a swap is logged, spooled and its
    part's baselines start fresh (hwid.py)."""
    from . import hwid
    from .nodestate import record_hardware

    parts = hwid.identity(ctx)
    if hwid.merge(state.hardware, parts) == state.hardware:
        return state   # nothing new: no second write (and fsync) after every job's epilog
    try:
        state, found = record_hardware(config["hooks"]["state_dir"], node, parts)
    except (OSError, ValueError) as exc:
        log.warning("could not record the hardware identity of %s: %s", node, exc)
        return state
    if found:
        what = "; ".join(hwid.describe(c) for c in found)
        log.warning("%s %s: hardware swapped: %s; held drained until `slurmqual requalify --swapped`", hook, node,
                    what)
        _event(config, node, "swap", what, hook, log)
        hwid.fresh_baselines(ctx, found)
    return state


def _act(hook, node, results, failed, state, ctx, config, log, enforce=None) -> int:
    if state is not None and state.swap is not None and not _requalifying(config, node):
        held = _hold_swapped(hook, node, state, config, log)
        if held is not None:
            return held
    if not failed and state is not None and state.drain is None and state.drain_known:
        # Passing epilog/healthcheck on a node we did not drain: nothing to give
        # back, so no slurmctld call (512 epilogs end together after a big job).
        return 0

    from .slurm import SlurmError, get_adapter

    adapter = get_adapter(config, hook=True)
    try:
        info = {n.name: n for n in adapter.node_info(node)}.get(node)
    except SlurmError as exc:
        log.error("%s %s: cannot read node state from Slurm: %s", hook, node, exc)
        return 1 if (hook == "prolog" and failed) else 0
    if failed:
        return _on_failure(hook, node, failed, info, adapter, config, log, state, ctx)
    if enforce is not None:
        return _enforce(hook, node, enforce, info, adapter, config, log)
    return _on_pass(hook, node, results, info, state, adapter, config, log)


def _set_drain(config, node: str, drain: dict | None, log, error_since: float | None | bool = False) -> None:
    """Remember (or forget) our own hook drain in the node's state file."""
    from .nodestate import update

    def change(st):
        st.drain = drain
        st.drain_known = True
        if error_since is not False:
            st.error_since = error_since

    try:
        update(config["hooks"]["state_dir"], node, change, warn=log.warning)
    except (OSError, ValueError) as exc:
        log.warning("could not record drain state for %s: %s", node, exc)


def _event(config, node: str, kind: str, detail: str, hook: str, log) -> None:
    from . import events

    try:
        events.record(config["hooks"]["state_dir"], node, kind, detail, source=hook)
    except (OSError, ValueError) as exc:
        log.warning("could not spool %s event for %s: %s", kind, node, exc)


def _on_failure(hook, node, failed, info, adapter, config, log, state=None, ctx=None) -> int:
    """The repair ladder (remediation.py) picks the action; without it (or
    when it says drain) the node is drained with the first failing check."""
    fail_rc = 1 if hook == "prolog" else 0
    reason = drain_reason(failed)
    if config["remediation"]["enabled"]:
        from . import policy, remediation

        boot = _boot_id(ctx)
        last = state.remediation[-1] if state is not None and state.remediation else {}
        if policy.ladder_rebooting(info) and last.get("action") == "reboot" and last.get("boot_id") == boot:
            # Slurm has not rebooted the node yet (newer slurmctld send the reboot a while later).
            log.info("%s %s: failing (%s); the reboot asked at %s is still to come", hook, node, reason,
                     time.strftime("%H:%M:%S", time.localtime(float(last["time"]))))
            return fail_rc
        plan = remediation.plan(failed, state.remediation if state is not None else [], config["remediation"],
                                time.time())
        if plan.action == "none":
            log.warning("%s %s: failing (%s); remediation says none: left in service", hook, node, reason)
            _event(config, node, "warn", reason, hook, log)
            return 0
        if plan.action == "reboot":
            done = _reboot(hook, node, plan, info, adapter, config, log, boot)
            if done:
                return fail_rc
        elif plan.action == "reset":
            return _reset(hook, node, plan, info, adapter, config, log, ctx)
        else:
            reason = plan.reason
            last = state.remediation[-1] if state is not None and state.remediation else {}
            if plan.escalated and not (last.get("action") == "escalate" and last.get("check") == plan.check):
                _record_action(config, node, {"action": "escalate", "check": plan.check, "detail": plan.detail,
                                              "after": plan.escalated, "hook": hook}, log)
                _event(config, node, "escalate", reason, hook, log)
            elif plan.action == "rma" and not (info is not None and info.reason == reason):
                _record_action(config, node, {"action": "rma", "check": plan.check, "detail": plan.detail,
                                              "hook": hook, "evidence": [r.to_dict() for r in failed]}, log)
                _event(config, node, "rma", reason, hook, log)
    drained = _drain(hook, node, reason, info, adapter, config, log)
    return _prolog_rc(drained, info) if hook == "prolog" else fail_rc


def _prolog_rc(drained: bool | None, info) -> int:
    """A failing prolog's exit once it tried to drain. Non-zero requeues the
    job, and slurmd then drains the node itself ("Prolog error") unless it is
    drained already (slurmctld's validate_node_specs). So: 1 where the node is
    drained (ours, or anyone's: the reason stays) and where our drain call
    failed (Slurm's drain is the fallback: a failing node takes no job); 0
    where the rules left it in service (fleet guard held, a node Slurm or an
    admin is handling): exiting 1 there would drain it all the same, under
    Slurm's generic reason, and undo the guard."""
    if drained is False and not (info is not None and info.drained):
        return 0
    return 1


def _drain(hook, node, reason, info, adapter, config, log) -> bool | None:
    """A hook drain through the ownership rules and the fleet guard: True when
    the node is (now) drained so, False when the rules leave it as it is, None
    when the Slurm call failed."""
    from . import policy
    from .slurm import SlurmError

    # Inside a requalify's own maintenance reservation the node is ours to judge.
    decision = policy.may_drain(info, reason, "hook", own_maintenance=_requalifying(config, node))
    if not decision:
        if decision.noop:
            _set_drain(config, node, {"reason": reason, "time": time.time(), "hook": hook}, log)
            return True
        log.info("%s %s: failing (%s) but %s", hook, node, reason, decision.why)
        return False
    if info is None or not info.drained:  # a new drain: ask the fleet guard first
        try:
            verdict = policy.HookGuard.from_config(config).request_drain(node, reason)
        except OSError as exc:
            log.error("%s %s: fleet guard unavailable (%s); draining anyway", hook, node, exc)
            verdict = None
        if verdict is not None and not verdict.allowed:
            log.critical("%s %s: drain HELD by the fleet guard: %d nodes drained by slurmqual hooks within %gs "
                         "(limit %d of %d nodes); would drain: %s. Suspect a shared config or fleet-wide fault; "
                         "see `slurmqual status`", hook, node, verdict.recent,
                         config["hooks"].get("guard_window_s", 3600.0), verdict.limit, verdict.fleet, reason)
            _event(config, node, "guard_hold", reason, hook, log)
            return False  # (a failing prolog exits 0 then: see _prolog_rc)
    drain = {"reason": reason, "time": time.time(), "hook": hook}
    if policy.ladder_rebooting(info):
        # Slurm clears a node's drain when its reboot completes: the next hook
        # run (the prolog of any job too) applies it again (_enforce).
        drain["enforce"] = True
    _set_drain(config, node, drain, log, error_since=None)
    try:
        adapter.drain([node], reason)
        log.warning("%s %s: drained: %s", hook, node, reason)
        _event(config, node, "drain", reason, hook, log)
    except SlurmError as exc:
        log.error("%s %s: could not drain (%s): %s", hook, node, reason, exc)
        return None
    return True


def _hold_swapped(hook, node, state, config, log) -> int | None:
    """A swapped part: the node takes no job until requalify passes it,
    whatever its checks say now (a new GPU needs the slow checks and a burn-in).
    None: a requalify of the node started while this hook ran (judge it as usual)."""
    from . import hwid
    from .slurm import SlurmError, get_adapter

    reason = hwid.swap_reason(state.swap)
    adapter = get_adapter(config, hook=True)
    try:
        info = {n.name: n for n in adapter.node_info(node)}.get(node)
    except SlurmError as exc:
        log.error("%s %s: cannot read node state from Slurm: %s", hook, node, exc)
        return 1 if hook == "prolog" else 0
    if info is not None and info.drained and info.reason in hwid.held_reasons(state.swap):
        return 1 if hook == "prolog" else 0
    if _requalifying(config, node):
        # requalify marked the node before it resumed it: a hook that read no
        # marker and then saw the node resumed must not drain it under requalify.
        log.info("%s %s: swapped, and its requalify started meanwhile: not drained", hook, node)
        return None
    drained = _drain(hook, node, reason, info, adapter, config, log)
    return _prolog_rc(drained, info) if hook == "prolog" else 0


def _enforce(hook, node, drain, info, adapter, config, log) -> int:
    """Apply again a drain the hook made while the ladder's reboot was
    completing (Slurm undid it when the node registered); the prolog of a
    job that landed in between fails, so the job is requeued."""
    from . import policy
    from .slurm import SlurmError

    fail_rc = 1 if hook == "prolog" else 0
    if policy.ladder_rebooting(info):
        return fail_rc  # not registered yet: the next run applies it
    kept = {k: v for k, v in drain.items() if k != "enforce"}
    if info is None or info.drained:
        _set_drain(config, node, kept if info is not None and info.reason == drain["reason"] else None, log)
        return fail_rc if info is not None and info.reason == drain["reason"] else 0
    decision = policy.may_drain(info, drain["reason"], "hook")
    if not decision:
        log.info("%s %s: not draining again (%s): %s", hook, node, drain["reason"], decision.why)
        _set_drain(config, node, None, log)
        return 0
    try:
        adapter.drain([node], drain["reason"])
    except SlurmError as exc:
        log.error("%s %s: could not drain (%s): %s", hook, node, drain["reason"], exc)
        return fail_rc
    log.warning("%s %s: drained again after the reboot completed (Slurm had resumed it): %s", hook, node,
                drain["reason"])
    _event(config, node, "drain", f"{drain['reason']} (again after the reboot)", hook, log)
    _set_drain(config, node, kept, log)
    return fail_rc


def _requalifying(config, node: str) -> bool:
    """A requalify of this node is running (its marker: nodestate.mark_requalify)."""
    from .nodestate import requalifying

    return requalifying(config["hooks"]["state_dir"], node)


def _record_action(config, node: str, entry: dict, log) -> None:
    from .nodestate import record_action

    try:
        record_action(config["hooks"]["state_dir"], node, entry)
    except (OSError, ValueError) as exc:
        log.warning("could not record remediation for %s: %s", node, exc)


def _boot_id(ctx) -> str | None:
    """The node's boot id (tells a reboot that happened from one still to come)."""
    if ctx is None:
        return None
    from .probe.kmsg import boot_id

    try:
        return boot_id(ctx.fs) or None
    except Exception:  # noqa: BLE001 - no boot id: the ladder only waits less
        return None


def _reboot(hook, node, plan, info, adapter, config, log, boot: str | None = None) -> bool:
    """`scontrol reboot ASAP nextstate=RESUME` with the ladder's reason, if the
    ownership rules and the fleet reboot guard allow; False: not rebooted
    (the caller drains with the check's own reason instead)."""
    from . import policy
    from .slurm import SlurmError

    if info is not None and info.reason == plan.reason and (info.drained or info.state == "down"):
        return True  # asked already (a second hook run while the reboot waits for the node to idle)
    decision = policy.may_drain(info, plan.reason, "hook")
    if not decision:
        log.info("%s %s: would reboot (%s) but %s", hook, node, plan.reason, decision.why)
        return False
    guard = policy.reboot_guard(config)
    try:
        verdict = guard.request_drain(node, plan.reason)
    except OSError as exc:
        log.error("%s %s: reboot guard unavailable (%s); draining instead", hook, node, exc)
        return False
    if not verdict.allowed:
        log.critical("%s %s: reboot HELD by the fleet reboot guard: %d nodes rebooting (limit %d of %d nodes); "
                     "drained instead, rebooted once the others are back: %s", hook, node, verdict.recent,
                     verdict.limit, verdict.fleet, plan.reason)
        _event(config, node, "reboot_hold", plan.reason, hook, log)
        return False
    try:
        adapter.reboot([node], plan.reason)
    except SlurmError as exc:
        log.error("%s %s: could not reboot (%s): %s; draining instead", hook, node, plan.reason, exc)
        guard.release(node)
        return False
    _set_drain(config, node, {"reason": plan.reason, "time": time.time(), "hook": hook}, log, error_since=None)
    _record_action(config, node, {"action": "reboot", "check": plan.check, "detail": plan.detail, "hook": hook,
                                  "boot_id": boot}, log)
    log.warning("%s %s: reboot requested: %s", hook, node, plan.reason)
    _event(config, node, "reboot", plan.reason, hook, log)
    return True


def _reset(hook, node, plan, info, adapter, config, log, ctx) -> int:
    """Drain with the ladder's reset reason (no new job lands), then reset the
    GPUs once no process uses them. The prolog runs no commands: its drain
    leaves the reset to the epilog or health check. After the reset the drain
    holds until a hook's checks all pass (then _on_pass resumes)."""
    from . import gpureset

    fail_rc = 1 if hook == "prolog" else 0
    drained = _drain(hook, node, plan.reason, info, adapter, config, log)
    if not drained:
        return _prolog_rc(drained, info) if hook == "prolog" else fail_rc
    if ctx is None or ctx.level == "fast":
        return fail_rc
    gpus = list(plan.gpus)
    if not gpus:
        log.error("%s %s: reset planned for %s but no GPU named; left drained", hook, node, plan.check)
        return fail_rc
    try:
        busy = gpureset.busy(ctx, gpus)
    except gpureset.ResetError as exc:
        log.error("%s %s: cannot tell whether the GPUs are idle (%s); no reset, left drained", hook, node, exc)
        return fail_rc
    if busy:
        what = "; ".join(f"{pci}: pid {','.join(map(str, pids))}" for pci, pids in sorted(busy.items()))
        log.warning("%s %s: GPU reset waits: processes on the GPU (%s); drained until they end", hook, node, what)
        _event(config, node, "reset_wait", f"{plan.reason} (busy: {what})", hook, log)
        return fail_rc
    try:
        gpureset.reset(ctx, gpus)
    except gpureset.ResetError as exc:
        log.error("%s %s: GPU reset failed (%s); left drained", hook, node, exc)
        _event(config, node, "reset", f"failed: {exc}", hook, log)
        return fail_rc
    gpureset.after_reset(ctx, gpus)
    _record_action(config, node, {"action": "reset", "check": plan.check, "detail": plan.detail, "gpus": gpus,
                                  "hook": hook}, log)
    log.warning("%s %s: GPU reset done (%s); drained until every check passes", hook, node, ",".join(gpus))
    _event(config, node, "reset", f"{','.join(gpus)}: {plan.reason}", hook, log)
    return fail_rc


def _on_pass(hook, node, results, info, state, adapter, config, log) -> int:
    """Give back only what a node check took. A burn-in, requalify or admin
    drain needs requalify or `slurmqual resume`."""
    from . import policy
    from .slurm import SlurmError

    decision = policy.may_resume(info, "hook")
    if not decision:
        if info is not None and (info.drained or info.hands_off) and policy.is_hook_reason(info.reason):
            # ours, perhaps mid-reboot (REBOOT_ISSUED): keep asking Slurm until it is given back
            _set_drain(config, node, {"reason": info.reason, "time": time.time(), "hook": hook}, log)
        else:  # not (or no longer) our hook drain: someone resumed or re-reasoned it
            _set_drain(config, node, None, log, error_since=None)
            if decision.noop and config["remediation"]["enabled"]:
                try:  # back in service and passing: a ladder reboot (Slurm resumed it) is over
                    policy.reboot_guard(config).release(node)
                except OSError:
                    pass
        log.info("%s %s: checks pass; %s", hook, node, decision.why)
        return 0
    drained_for = policy.drained_for(info.reason)
    judged = {r.name: r.status for r in results}
    if drained_for not in judged or judged[drained_for] in (Status.SKIP,):
        # This hook does not run the check that drained the node: its pass says nothing about it.
        log.info("%s %s: checks pass, but %s (which drained the node) is not run by this hook; kept drained",
                 hook, node, drained_for)
        _set_drain(config, node, {"reason": info.reason, "time": time.time(), "hook": hook}, log)
        return 0
    errors = [r for r in results if r.status is Status.ERROR]
    if errors:
        return _error_hold(hook, node, errors, info, state, adapter, config, log)
    try:
        adapter.resume([node])
        log.warning("%s %s: checks pass, resumed (was: %s)", hook, node, info.reason)
        _event(config, node, "resume", f"checks pass (was: {info.reason})", hook, log)
    except SlurmError as exc:
        log.error("%s %s: could not resume: %s", hook, node, exc)
        return 0
    _set_drain(config, node, None, log, error_since=None)
    try:
        policy.HookGuard.from_config(config).release(node)
        if config["remediation"]["enabled"]:
            policy.reboot_guard(config).release(node)   # a ladder reboot is over once the node passes
    except OSError:
        pass
    return 0


def _error_hold(hook, node, errors, info, state, adapter, config, log) -> int:
    """Bounded policy for checks that cannot judge while our drain holds: keep
    the drain for hooks.error_hold_s; then resume if the check that drained the
    node passes now (errors never drain), else re-reason the drain to say that
    check cannot judge, so an admin sees why the node stays out."""
    from . import policy
    from .slurm import SlurmError
    from .slurm import reason as reasons

    now = time.time()
    since = state.error_since if state is not None and state.error_since is not None else now
    if state is None or state.error_since is None or state.drain is None:
        drain = (state.drain if state is not None else None) or {"reason": info.reason, "time": now, "hook": hook}
        _set_drain(config, node, drain, log, error_since=since)
    hold = config["hooks"].get("error_hold_s", 3600.0)
    names = ",".join(r.name for r in errors)
    if now - since < hold:
        log.info("%s %s: checks pass but %s cannot judge; keeping our drain (at most %gs more)", hook, node, names,
                 hold - (now - since))
        return 0
    drained_for = policy.drained_for(info.reason)
    own = [r for r in errors if r.name == drained_for]
    if own:
        when = time.strftime("%m-%d %H:%M", time.localtime(since))
        reason = reasons.make(drained_for, f"cannot judge since {when}: {own[0].message}")
        if info.reason != reason:
            try:
                adapter.drain([node], reason)
                _event(config, node, "error_hold", reason, hook, log)
            except SlurmError as exc:
                log.error("%s %s: could not re-reason: %s", hook, node, exc)
        log.critical("%s %s: %s drained the node and cannot judge for %gs; left drained: %s", hook, node,
                     drained_for, now - since, reason)
        return 0
    try:
        adapter.resume([node])
    except SlurmError as exc:
        log.error("%s %s: could not resume: %s", hook, node, exc)
        return 0
    log.critical("%s %s: %s passes again; resumed after holding %gs for checks that cannot judge (%s)", hook, node,
                 drained_for, now - since, names)
    _event(config, node, "resume", f"{drained_for} passes; {names} cannot judge after {hold:g}s hold", hook, log)
    _set_drain(config, node, None, log, error_since=None)
    return 0
