"""A node's hardware identity and its swaps: GPU serials and UUIDs (from the
`nvidia-smi -q -x` report the GPU checks already read: no extra command),
RDMA NIC node GUIDs (/sys/class/infiniband/*/node_guid), board, chassis and
product serials (/sys/class/dmi/id/*_serial), all read through the node's
FsRoot. The epilog and health check record it (the prolog runs no command
and reads nothing more: a swap needs a reboot, whose start-up health check
sees it before the node registers).

A part present before and now with another serial/UUID/GUID is a *swap*:
the node is held drained `slurmqual: swap: <what> <old> -> <new>: requalify`
until `slurmqual requalify --swapped` passes it; the swapped part's counter
windows and Xid events start fresh. A failed requalify drains the node with
its own reason, which then holds the node in the swap's place. A part that
vanished is not a swap (its check fails); its last identity is kept, so it
is compared when it returns.
"""

from __future__ import annotations

DMI = ("board_serial", "chassis_serial", "product_serial")
# What vendors write when there is no serial: not an identity.
_PLACEHOLDERS = {"", "0", "none", "n/a", "not specified", "to be filled by o.e.m.", "default string",
                 "system serial number", "chassis serial number", "0000000000", "0123456789"}


def _value(text: str | None) -> str | None:
    v = (text or "").strip()
    return None if v.lower() in _PLACEHOLDERS or not v.strip("0") else v


def identity(ctx) -> dict[str, dict]:
    """part -> {field: value}: 'dmi:board_serial' {serial}, 'nic:mlx5_0' {node_guid},
    'gpu:0000:18:00.0' {index, serial, uuid}."""
    parts: dict[str, dict] = {}
    for name in DMI:
        v = _value(ctx.fs.read_or(f"/sys/class/dmi/id/{name}"))
        if v:
            parts[f"dmi:{name}"] = {"serial": v}
    try:
        devices = ctx.fs.listdir("/sys/class/infiniband")
    except Exception:  # noqa: BLE001 - an unreadable sysfs is nic_link's finding, not ours
        devices = []
    for dev in devices:
        guid = _value(ctx.fs.read_or(f"/sys/class/infiniband/{dev}/node_guid"))
        if guid and guid.replace(":", "").strip("0"):
            parts[f"nic:{dev}"] = {"node_guid": guid}
    report = ctx.memo.get("nvidia_smi")
    if report is not None and not isinstance(report, Exception):
        for g in report.gpus:
            fields = {k: v for k, v in (("serial", _value(g.serial)), ("uuid", _value(g.uuid))) if v}
            if fields:
                parts[f"gpu:{g.pci}"] = dict(fields, index=g.index)
    return parts


def changes(old: dict[str, dict], new: dict[str, dict]) -> list[dict]:
    """Parts in both whose identity differs: [{part, field, old, new, label}]."""
    out = []
    for part in sorted(set(old) & set(new)):
        for fld in ("serial", "uuid", "node_guid"):
            a, b = old[part].get(fld), new[part].get(fld)
            if a and b and a != b:
                out.append({"part": part, "field": fld, "old": a, "new": b, "label": label(part, new[part])})
                break   # one line per part: the serial and the UUID change together
    return out


def label(part: str, fields: dict) -> str:
    kind, _, name = part.partition(":")
    if kind == "gpu":
        return f"GPU {fields.get('index', name)}"
    if kind == "nic":
        return f"NIC {name}"
    return name.replace("_serial", "")


def describe(change: dict) -> str:
    """'GPU 3 serial 1652323000003 -> 1652399999999'."""
    return f"{change['label']} {change['field']} {change['old']} -> {change['new']}"


def swap_reason(swap: dict) -> str:
    from .slurm import reason as reasons

    found = swap.get("changes") or []
    first = describe(found[0]) if found else "hardware changed"
    more = f" (+{len(found) - 1} more)" if len(found) > 1 else ""
    return reasons.make("swap", f"{first}{more}: requalify")


def held_reasons(swap: dict) -> set[str]:
    """Drain reasons that hold a swapped node: the swap's own, or the reason
    a failed requalify of it drained the node with (nodestate.fail_swap)."""
    failed = (swap.get("failed") or {}).get("reason")
    return {swap_reason(swap), *([failed] if isinstance(failed, str) else [])}


def merge(old: dict[str, dict], new: dict[str, dict]) -> dict[str, dict]:
    """The identity to keep: today's parts, plus the last identity of parts not seen now."""
    return {**old, **new}


def fresh_baselines(ctx, found: list[dict]) -> None:
    """A swapped part starts with no history: its Xid events, raw evidence
    (rawevidence.py) and counter windows are forgotten (NVLink counters are
    keyed by GPU UUID: a new GPU has a new key already)."""
    import os

    from . import counterwindow
    from .checks import xid

    gpus = [c["part"].split(":", 1)[1] for c in found if c["part"].startswith("gpu:")]
    nics = [c["part"].split(":", 1)[1] for c in found if c["part"].startswith("nic:")]
    if gpus:
        from . import rawevidence

        xid.forget(ctx.state_path(f"xid/{ctx.node_key()}.json"), [g.rsplit(".", 1)[0] for g in gpus])
        rawevidence.forget(rawevidence.evidence_path(ctx), gpus)
    for check in ("ib_counters", "roce_qos"):
        if not nics:
            break
        path = ctx.state_path(f"counters/{ctx.node_key()}.{check}.json")
        if not os.path.exists(path):
            continue
        history, _note = counterwindow.load(path)
        # keys: 'mlx5_0/1' (ib_counters), 'mlx5_2 (ens3np0)' (roce_qos)
        kept = {k: v for k, v in history.items() if k.split("/", 1)[0].split(" ", 1)[0] not in nics}
        if kept != history:
            counterwindow.save(path, kept)
