"""Raw tool output behind a node's failures, kept for the RMA bundle
(`slurmqual rma`, rma.py): the `nvidia-smi -q -x` section of each GPU a
failing (or warning) check names, and the kernel-log lines of Xid events.

Written by the hooks on their failure path only, from what the checks
already read this run (no extra command, nothing on the passing prolog):
`<state_dir>/evidence/<node key>.json`, one JSON object:
  time, hook: the last write;
  gpus: {pci 'dddd:bb:dd': {time, hook, checks: [names], nvidia_smi_xml}}
        (the GPU's <gpu> element; the latest failing run's per GPU);
  kernel_log: [{time, line}] (Xid / fallen-off-the-bus lines, oldest first).
Bounded: GPU_XML_MAX characters per GPU section, MAX_GPUS sections,
KERNEL_LINES lines of LINE_MAX characters; what was cut says so in place.
"""

from __future__ import annotations

import json
import os
import re
import time

GPU_XML_MAX = 32 * 1024
MAX_GPUS = 16
KERNEL_LINES = 100
LINE_MAX = 1000
_GPU_ELEMENT = re.compile(r'<gpu id="([^"]+)">.*?</gpu>', re.S)


def pci_key(text: str) -> str | None:
    """'00000000:4B:00.0', '0000:4b:00' -> '0000:4b:00' (None: not a PCI address)."""
    m = re.fullmatch(r"([0-9a-fA-F]+):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})(?:\.[0-7])?", text.strip())
    return f"{int(m.group(1), 16):04x}:{m.group(2).lower()}:{m.group(3).lower()}" if m else None


def gpu_sections(xml: str, wanted: set[str]) -> dict[str, str]:
    """The <gpu> elements of a `nvidia-smi -q -x` report for these PCI keys, each bounded."""
    out = {}
    for m in _GPU_ELEMENT.finditer(xml):
        key = pci_key(m.group(1))
        if key in wanted:
            out[key] = clip(m.group(0), GPU_XML_MAX)
    return out


def clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = len(text) - limit
    return f"{text[:limit]}\n... [{cut} more characters cut by slurmqual]"


def evidence_path(ctx) -> str:
    """The node's evidence file, under the state dir the checks' memories use."""
    return ctx.state_path(f"evidence/{ctx.node_key()}.json")


def load(path: str) -> tuple[dict, str]:
    """The kept evidence ({} when none) and a note when the file is unusable."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
        if not isinstance(data, dict) or not isinstance(data.get("gpus", {}), dict) \
                or not isinstance(data.get("kernel_log", []), list):
            raise ValueError("unexpected layout")
        return data, ""
    except FileNotFoundError:
        return {}, ""
    except (OSError, ValueError) as exc:
        return {}, f"evidence {path} unreadable ({type(exc).__name__})"


def merge(old: dict, hook: str, now: float, failing: list, xml: str | None, kernel: list[tuple[float, str]]) -> dict:
    """The evidence to keep after this run: the failing checks' GPUs' sections
    replace their older ones; new kernel lines are appended; both bounded."""
    gpus = dict(old.get("gpus", {}))
    named: dict[str, list[str]] = {}
    for r in failing:
        for dev in r.devices or []:
            key = pci_key(str(dev))
            if key:
                named.setdefault(key, []).append(r.name)
    if xml and named:
        for key, section in gpu_sections(xml, set(named)).items():
            gpus[key] = {"time": now, "hook": hook, "checks": sorted(set(named[key])), "nvidia_smi_xml": section}
    if len(gpus) > MAX_GPUS:
        gpus = dict(sorted(gpus.items(), key=lambda kv: kv[1].get("time", 0))[-MAX_GPUS:])
    lines = [e for e in old.get("kernel_log", []) if isinstance(e, dict)]
    seen = {(e.get("time"), e.get("line")) for e in lines}
    for t, line in kernel:
        entry = {"time": t, "line": clip(line, LINE_MAX)}
        if (entry["time"], entry["line"]) not in seen:
            lines.append(entry)
    return {"time": now, "hook": hook, "gpus": gpus, "kernel_log": lines[-KERNEL_LINES:]}


def _save(path: str, data: dict) -> str:
    from .atomic import ensure_dir, write_text

    try:
        ensure_dir(os.path.dirname(path))
        write_text(path, json.dumps(data))
    except OSError as exc:
        return f"evidence not saved ({path}: {exc.strerror or exc})"
    return ""


def forget(path: str, pcis: list[str]) -> str:
    """A swapped GPU ('0000:4b:00', hwid.fresh_baselines) starts without the
    old one's evidence: its section and its kernel lines go."""
    old, note = load(path)
    if not old:
        return note
    keys = {k for k in (pci_key(p) for p in pcis) if k}
    gone = tuple(f"pci:{k}" for k in keys)
    kept = dict(old, gpus={k: v for k, v in old.get("gpus", {}).items() if k not in keys},
                kernel_log=[e for e in old.get("kernel_log", [])
                            if not any(g in str(e.get("line", "")).lower() for g in gone)])
    return _save(path, kept) if kept != old else note


def record(ctx, hook: str, results: list) -> str:
    """Keep what this run's failing/warning checks saw (the hooks' failure
    path, or new Xid lines); returns a note when it could not be written."""
    from .result import Status

    failing = [r for r in results if r.status in (Status.FAIL, Status.WARN) and r.devices]
    xml = ctx.memo.get("nvidia_smi_xml")
    kernel = ctx.memo.get("xid_lines") or []
    if not kernel and not (failing and xml):
        return ""
    path = evidence_path(ctx)
    old, note = load(path)
    new = merge(old, hook, time.time(), failing, xml, kernel)
    if {k: v for k, v in new.items() if k not in ("time", "hook")} == \
            {k: v for k, v in old.items() if k not in ("time", "hook")}:
        return note
    return _save(path, new) or note
