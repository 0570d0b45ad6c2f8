"""The repair ladder's GPU reset (remediation.py): `nvidia-smi -r -i <gpu>`,
only when no process uses the GPU. Reset with a process on it fails or,
worse, kills a job; so the hook drains first (no new job lands) and asks
`nvidia-smi -q -x` afresh (its <processes>: compute and graphics) right
before resetting. Commands go through the check context (timeouts, the
hook deadline, recorded outputs on node trees)."""

from __future__ import annotations


class ResetError(Exception):
    """The GPUs' use could not be read, or the reset failed."""


def _key(pci: str) -> str:
    """'0000:18:00', '00000000:18:00.0' -> '0000:18:00' (domain, bus, device)."""
    dom, _, rest = pci.lower().partition(":")
    return f"{int(dom, 16):04x}:{rest.split('.')[0]}" if rest else pci.lower()


def reset_argv(pci: str) -> list[str]:
    return ["nvidia-smi", "-r", "-i", f"{_key(pci)}.0"]


def busy(ctx, gpus: list[str]) -> dict[str, list[int]]:
    """GPU (as named in `gpus`) -> pids using it, for the GPUs that have any."""
    from .command import CommandError
    from .probe.nvsmi import SmiError, parse_xml

    try:
        rep = parse_xml(ctx.run_command(["nvidia-smi", "-q", "-x"]).stdout)
    except (CommandError, SmiError) as exc:
        raise ResetError(str(exc)) from None
    by_key = {_key(g.pci): g for g in rep.gpus}
    missing = [p for p in gpus if _key(p) not in by_key]
    if missing:
        raise ResetError(f"nvidia-smi does not list GPU {','.join(missing)}")
    return {p: [pid for pid, _t, _n in by_key[_key(p)].processes] for p in gpus if by_key[_key(p)].processes}


def reset(ctx, gpus: list[str]) -> None:
    from .command import CommandError

    for pci in gpus:
        try:
            ctx.run_command(reset_argv(pci), timeout=max(ctx.command_timeout, 60.0))
        except CommandError as exc:
            raise ResetError(f"GPU {pci}: {exc}") from None


def after_reset(ctx, gpus: list[str]) -> None:
    """A reset clears what the Xid events were about: forget those GPUs' events."""
    from .checks import xid

    xid.forget(ctx.state_path(f"xid/{ctx.node_key()}.json"), [_key(p) for p in gpus])
