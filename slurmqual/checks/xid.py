"""xid: NVIDIA Xid events from the kernel log, classified by NVIDIA's Xid
catalog. Application errors (a bad kernel, an illegal address) never drain;
hardware and driver faults do, with the catalog's recommended action.

Every new kernel record is read once (a saved boot id + sequence cursor),
events are kept with their time in the node's state dir and judged within a
window, de-duplicated per (Xid, GPU). Events of an earlier boot are dropped:
a reboot is the catalog's fix for most of them, and a fault that persists
shows again (gpu_count, gpu_memory, or a new Xid)."""

from __future__ import annotations

import re

from ..result import CheckResult, Status
from . import CheckSpec

NAME = "xid"

# NVIDIA Xid catalog (docs.nvidia.com/deploy/xid-errors): xid -> (kind, what, action).
# kind: "app" never drains; "hw" drains with the action as hint; "nvlink" drains when the
# message says Fatal, warns otherwise.
CATALOG: dict[int, tuple[str, str, str]] = {
    13: ("app", "Graphics Engine Exception", "application error: check the job's code"),
    31: ("app", "GPU memory page fault", "application error: illegal address in the job"),
    43: ("app", "GPU stopped processing", "application error: the job's channel was reset"),
    45: ("app", "Preemptive cleanup after a previous error", "follows another Xid; see that one"),
    109: ("app", "Context switch timeout", "application or driver hang; restart the job"),
    48: ("hw", "Double bit ECC error", "reset the GPU (nvidia-smi -r -i <gpu>) or reboot, then check row remapping"),
    61: ("hw", "Internal micro-controller breakpoint/warning", "reset the GPU or reboot"),
    62: ("hw", "Internal micro-controller halt", "reset the GPU or reboot"),
    63: ("hw", "ECC page retirement or row remapping recording event",
         "reset the GPU (nvidia-smi -r -i <gpu>) or reboot to activate the remap"),
    64: ("hw", "ECC page retirement or row remapper recording failure",
         "reset the GPU; if it recurs run the field diagnostic and RMA"),
    74: ("hw", "NVLink error", "reset the GPU or reboot; if it recurs check the NVLink/NVSwitch baseboard, RMA"),
    79: ("hw", "GPU has fallen off the bus", "reboot; check PCIe seating, power and cooling; RMA if it recurs"),
    92: ("hw", "High single-bit ECC error rate", "reset the GPU; RMA if it recurs"),
    94: ("hw", "Contained ECC error", "drain, then reset the GPU (nvidia-smi -r -i <gpu>) to retire the memory"),
    95: ("hw", "Uncontained ECC error", "reset the GPU (nvidia-smi -r -i <gpu>) or reboot"),
    119: ("hw", "GSP RPC timeout", "reset the GPU or reboot; update the driver if it recurs"),
    120: ("hw", "GSP error", "reset the GPU or reboot; update the driver if it recurs"),
    140: ("hw", "Unrecovered ECC error", "reset the GPU or reboot"),
    154: ("hw", "GPU recovery action changed", "perform the recovery action the message names (Drain and Reset, Reboot)"),
    **{x: ("nvlink", "NVLink error", "reset the GPU or reboot; if it recurs check the NVLink/NVSwitch path")
       for x in range(144, 151)},
}

# 'NVRM: Xid (PCI:0000:3b:00): 79, ...'; with MIG the driver adds the GPU instance: '(PCI:0000:01:00 GPU-I:05)'.
_XID = re.compile(r"NVRM: Xid \(PCI:([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})(?:\.[0-7])?(?: GPU-I:\d+)?\): "
                  r"(\d+),?\s*(.*)")
_FALLEN = re.compile(r"NVRM: The NVIDIA GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})(?:\.[0-7])?"
                     r".*fallen off the bus", re.S)


def settings():
    from typing import Literal

    from pydantic import Field

    from ._settings import Strict

    class XidCfg(Strict):
        window_s: float = Field(86400.0, gt=0, le=30 * 86400)   # events older than this are forgotten
        drain: list[int] = []        # Xids to treat as hardware faults besides the catalog's
        ignore: list[int] = []       # Xids never judged (e.g. one a site's workload triggers)
        unknown: Literal["warn", "fail", "ignore"] = "warn"       # Xids the catalog does not list
        journal_fallback: bool = True   # read `journalctl -k` where /dev/kmsg is not readable

    return XidCfg


SPEC = CheckSpec(
    NAME, "standard", rank=105, settings=settings,
    summary="no NVIDIA Xid hardware or driver fault in the kernel log within the window",
    hint="follow the Xid catalog action in the message (reset the GPU / reboot / RMA); application Xids never drain",
    explain="""Reads new kernel log records from /dev/kmsg (non-blocking; `journalctl -k -o json` where
/dev/kmsg is not readable and checks.xid.journal_fallback is true), picks the NVRM
Xid lines ('NVRM: Xid (PCI:0000:3b:00): 79, ...') and the multi-line 'fallen off
the bus' report, and classifies them by NVIDIA's Xid catalog:
- application errors (13, 31, 43, 45, 109): reported, never drain;
- hardware/driver faults (48, 61-64, 74, 79, 92, 94, 95, 119, 120, 140, 154, plus
  checks.xid.drain): fail, with the catalog's recommended action as the hint;
- NVLink Xids 144-150 fail when the message says Fatal, warn otherwise;
- what the message itself states overrides the catalog: Xid 154 'GPU recovery
  action changed from 0x0 (None) to 0x1 (GPU Reset Required)' (or Node Reboot
  Required, Drain and Reset, Drain P2P) and 'RST: Yes' / 'D-RST: Yes' (Xid 94/95,
  error containment) fail with that recovery as the hint; 'RST: No, D-RST: No'
  (a contained error the driver says needs no reset) warns instead of draining;
  the message names it as '[the driver states: ...]'. MIG-attributed lines
  ('(PCI:0000:01:00 GPU-I:05): 94, ...') count for the GPU;
- Xids not in the catalog: checks.xid.unknown ("warn", "fail" or "ignore");
  checks.xid.ignore lists Xids never judged.
Each record is read once (a boot id + sequence cursor in <hooks.state_dir>/xid/);
events are de-duplicated per Xid and GPU and judged within checks.xid.window_s
(default a day). Events of an earlier boot are dropped: after the reboot that fixes
them the node passes again. After a GPU reset without reboot, delete the node's
file under <hooks.state_dir>/xid/ (or wait for the window) to resume.
Fix: the catalog action in the hint: reset the GPU, reboot, reseat, RMA.""",
)


# The recovery a message itself states (newer drivers): Xid 154 names the action it
# changed to ('... changed from 0x0 (None) to 0x4 (Drain and Reset)'); error-containment
# Xids (94, 95, ...) end with 'RST: Yes|No, D-RST: Yes|No' (GPU reset required / drain
# and reset). Stated value -> (what the message says, the action for the hint).
RECOVERY: dict[str, tuple[str, str]] = {
    "none": ("no reset needed", ""),
    "reset": ("GPU reset required", "reset the GPU (nvidia-smi -r -i <gpu>) or reboot"),
    "drain_and_reset": ("drain and reset", "drain the GPU, then reset it (nvidia-smi -r -i <gpu>) or reboot"),
    "drain_p2p": ("drain peer-to-peer traffic", "drain the GPU's peer-to-peer (NVLink/PCIe P2P) work, then reset it"),
    "reboot": ("node reboot required", "reboot the node"),
}
# Xid 154 labels as drivers print them (R550+ NVML names; some branches print
# 'OS Reboot' or 'PF FLR'), and the NVML codes for a label we do not know.
_ACTION_LABELS = {"none": "none", "gpu reset required": "reset", "pf flr": "reset", "reset": "reset",
                  "node reboot required": "reboot", "os reboot": "reboot", "reboot": "reboot",
                  "drain p2p": "drain_p2p", "drain and reset": "drain_and_reset"}
_ACTION_CODES = {0: "none", 1: "reset", 2: "reboot", 3: "drain_p2p", 4: "drain_and_reset"}
_CHANGED_TO = re.compile(r"recovery action changed from .*? to 0x([0-9A-Fa-f]+)(?: \(([^)]*)\))?")
_RST = re.compile(r"\bRST: (Yes|No),\s*D-RST: (Yes|No)")


def stated_recovery(text: str) -> str | None:
    """The recovery the message itself states (a key of RECOVERY), or None
    when it states none (older drivers, most Xids: the catalog decides)."""
    m = _CHANGED_TO.search(text)
    if m:
        label = (m.group(2) or "").strip().lower()
        return _ACTION_LABELS.get(label) or _ACTION_CODES.get(int(m.group(1), 16))
    m = _RST.search(text)
    if m:
        return "reset" if m.group(1) == "Yes" else "drain_and_reset" if m.group(2) == "Yes" else "none"
    lower = text.lower()
    if "drain and reset recommended" in lower:
        return "drain_and_reset"
    if "gpu reset required" in lower:
        return "reset"
    return None


def classify(xid: int, text: str, cfg: dict) -> str:
    """'fail', 'warn' or 'ok' for one event. What the message itself states
    overrides the catalog: a recovery (reset, drain, reboot) fails; 'RST: No,
    D-RST: No' (or a recovery action back to None) warns instead of draining."""
    if xid in cfg["ignore"]:
        return "ok"
    if xid in cfg["drain"]:
        return "fail"
    kind = CATALOG.get(xid, ("unknown",))[0]
    stated = stated_recovery(text)
    if stated == "none":
        return "ok" if kind == "app" else "warn"
    if stated is not None:
        return "fail"
    if kind == "app":
        return "ok"
    if kind == "hw":
        return "fail"
    if kind == "nvlink":
        return "fail" if re.search(r"\bFatal\b", text) else "warn"
    return {"warn": "warn", "fail": "fail", "ignore": "ok"}[cfg["unknown"]]


def events_in(messages) -> list[tuple[float, int, str, str]]:
    """(time, xid, pci, text) for each Xid record; 'fallen off the bus' without an Xid line counts as 79."""
    out = []
    for rec in messages:
        m = _XID.search(rec.message)
        if m:
            out.append((rec.time, int(m.group(2)), _pci(m.group(1)), _clip(m.group(3).strip())))
            continue
        m = _FALLEN.search(rec.message)
        if m:
            out.append((rec.time, 79, _pci(m.group(1)), "GPU has fallen off the bus (no Xid line)"))
    return out


def _clip(text: str) -> str:
    """At most 200 characters kept per event, its end included: the recovery the
    driver states ('RST: Yes, D-RST: No') closes the message."""
    return text if len(text) <= 200 else f"{text[:150]} ... {text[-45:]}"


def _pci(text: str) -> str:
    dom, bus, dev = text.lower().split(":")
    return f"{int(dom, 16):04x}:{bus}:{dev}"


def judge(events: list[tuple[float, int, str, str]], now: float, cfg: dict) -> CheckResult:
    groups: dict[tuple[int, str], list] = {}
    for t, xid, pci, text in sorted(events):
        if now - t <= cfg["window_s"]:
            groups.setdefault((xid, pci), []).append((t, text))
    failed, warned, apps, devices, hints = [], [], [], [], []
    for (xid, pci), hits in sorted(groups.items()):
        verdict = classify(xid, hits[-1][1], cfg)
        what = CATALOG.get(xid, ("", "Xid not in the catalog", ""))[1]
        stated = stated_recovery(hits[-1][1])
        ago = (now - hits[-1][0]) / 60
        line = (f"Xid {xid} on GPU {pci} ({len(hits)}x, last {_ago(ago)} ago): {what}"
                + (f": {hits[-1][1]}" if hits[-1][1] and xid not in (13, 31, 43) else "")
                + (f" [the driver states: {RECOVERY[stated][0]}]" if stated else ""))
        if verdict == "fail":
            failed.append(line)
        elif verdict == "warn":
            warned.append(line)
        else:
            apps.append(f"Xid {xid} on {pci} x{len(hits)}")
            continue
        devices.append(pci)
        action = (RECOVERY[stated][1] if stated and stated != "none" else
                  CATALOG.get(xid, ("", "", "investigate the Xid (nvidia-smi -q, dmesg), reset the GPU or reboot"))[2])
        hints.append(f"GPU {pci}: {action}" if stated != "none" else
                     f"GPU {pci}: no reset needed (the driver says so); watch for a repeat")
    note = f" (application errors, not drained: {', '.join(apps)})" if apps else ""
    if failed:
        return CheckResult(NAME, Status.FAIL, "; ".join(failed + warned) + note, devices, "; ".join(hints))
    if warned:
        return CheckResult(NAME, Status.WARN, "; ".join(warned) + note, devices, "; ".join(hints))
    return CheckResult(NAME, Status.PASS, f"no Xid hardware faults in the last {_ago(cfg['window_s'] / 60)}{note}")


def _ago(minutes: float) -> str:
    if minutes >= 120:
        return f"{minutes / 60:.0f} h"
    return f"{minutes:.0f} min"


def run(ctx) -> CheckResult:
    import json
    import time

    from ..command import CommandError
    from ..probe import kmsg

    cfg = ctx.settings(NAME)
    now = time.time()
    path = ctx.state_path(f"xid/{ctx.node_key()}.json")
    state, note = _load(path)
    boot = kmsg.boot_id(ctx.fs)
    if state.get("boot_id") != boot:
        state = {"boot_id": boot, "seq": -1, "cursor": None, "events": []}
    try:
        records = kmsg.read_kmsg(ctx.fs, state["seq"], now)
        if records:
            state["seq"] = records[-1].seq
        source = "/dev/kmsg"
    except kmsg.KmsgUnavailable as exc:
        if not cfg["journal_fallback"]:
            return CheckResult(NAME, Status.ERROR, f"{exc}; journal fallback switched off")
        argv = ["journalctl", "-k", "-o", "json", "--no-pager", f"--since=@{int(now - cfg['window_s'])}"]
        if state.get("cursor"):
            argv.append(f"--after-cursor={state['cursor']}")
        try:
            out = ctx.run_command(argv)
        except CommandError as cexc:
            return CheckResult(NAME, Status.ERROR, f"{exc}; journalctl fallback failed: {cexc}")
        records, cursor = kmsg.parse_journal_json(out.stdout)
        state["cursor"] = cursor or state.get("cursor")
        source = "journalctl -k"
    events = [tuple(e) for e in state["events"]] + events_in(records)
    raw = [(r.time, r.message) for r in records if _XID.search(r.message) or _FALLEN.search(r.message)]
    if raw:   # the whole lines, for the RMA evidence (rawevidence.py; events keep 200 characters)
        ctx.memo["xid_lines"] = raw
    state["events"] = [list(e) for e in events if now - e[0] <= cfg["window_s"]]
    note = "; ".join(n for n in (note, _save(path, json.dumps(state))) if n)
    result = judge(events, now, cfg)
    if note:
        result.message += f" ({note})"
    if result.status is Status.PASS:
        result.message += f" [{source}]"
    return result


def _load(path: str) -> tuple[dict, str]:
    import json

    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
        if not isinstance(data, dict) or not isinstance(data.get("events"), list) or not isinstance(data.get("seq"), int):
            raise ValueError("unexpected layout")
        data["events"] = [e for e in data["events"] if isinstance(e, list) and len(e) == 4]
        return data, ""
    except FileNotFoundError:
        return {}, ""
    except (OSError, ValueError) as exc:
        return {}, f"xid state {path} unreadable ({type(exc).__name__}), started afresh"


def _save(path: str, text: str) -> str:
    import os

    from ..atomic import ensure_dir, write_text

    try:
        ensure_dir(os.path.dirname(path))
        write_text(path, text)
        return ""
    except OSError as exc:
        return f"xid state not saved ({path}: {exc.strerror or exc})"


def forget(path: str, pcis: list[str]) -> str:
    """Drop the kept events of these GPUs ('0000:18:00'): after the ladder reset
    them (remediation.py) their faults are gone; a new one shows again."""
    import json

    state, note = _load(path)
    if not state:
        return note
    state["events"] = [e for e in state["events"] if e[2] not in set(pcis)]
    return _save(path, json.dumps(state))


def kept_events(path: str) -> tuple[list[dict], str]:
    """The events kept in a node's xid file ({time, xid, gpu, text}, oldest
    first) and a note when it is unreadable: for `slurmqual rma`."""
    state, note = _load(path)
    return [{"time": e[0], "xid": e[1], "gpu": e[2], "text": e[3]} for e in sorted(state.get("events", []))], note
