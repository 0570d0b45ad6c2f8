"""Error counters judged as increases within a time window.

Hardware counters (IB port errors, ...) count since the driver loaded and
never go down. Judging totals drains a node forever after one cable reseat;
judging *increases* lets the node recover by itself once the counter stays
flat for a window. So a check keeps a short history of readings per device
in its own JSON file under the state dir and compares the current reading
with the one taken a window ago.

First reading (no history): the totals count as increases for one window,
since nothing says they are old, so a node that comes up with errors is
judged once and then resumes when they stop growing. A counter lower than
the baseline was reset (driver reload, reboot): its whole value is new.
"""

from __future__ import annotations

import json
import os

Sample = tuple[float, dict[str, int]]


def increases(samples: list[Sample], now: float, current: dict[str, int],
              window_s: float) -> tuple[dict[str, int], float | None]:
    """Increase of each counter over the window and the time of the baseline
    reading (None: first reading, the totals are the increase). The baseline
    is the latest reading at least a window old, else the oldest one."""
    base_t: float | None = None
    base: dict[str, int] = {}
    older = [s for s in samples if s[0] <= now - window_s]
    if older:
        base_t, base = older[-1]
    elif samples:
        base_t, base = samples[0]
    out = {}
    for name, value in current.items():
        before = base.get(name, 0)
        out[name] = value if value < before else value - before
    return out, base_t


def updated(samples: list[Sample], now: float, current: dict[str, int], window_s: float) -> list[Sample]:
    """The history to keep after this reading: everything newer than the window
    plus the latest reading before it (the next baseline). A reading equal to
    the previous one is only added once a quarter window has passed, so the
    file stays small however often the hook runs."""
    samples = [s for s in samples if s[0] <= now]       # a clock that went back: drop the future
    if not samples:
        # First reading: a zero baseline now, so the totals count for one window.
        samples = [(now, {k: 0 for k in current})]
    last_t, last = samples[-1]
    if last != current or now - last_t >= window_s / 4:
        samples.append((now, dict(current)))
    older = [i for i, s in enumerate(samples) if s[0] <= now - window_s]
    if older:
        samples = samples[older[-1]:]
    return samples


def load(path: str) -> tuple[dict[str, list[Sample]], str]:
    """device -> readings; a missing file is an empty history, an unreadable
    one too (with a note for the check's message: never a crash, never a drain)."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
        devices = data["devices"]
        return {dev: [(float(t), {str(k): int(v) for k, v in vals.items()}) for t, vals in samples]
                for dev, samples in devices.items()}, ""
    except FileNotFoundError:
        return {}, ""
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        return {}, f"counter history {path} unreadable ({type(exc).__name__}), started afresh"


def save(path: str, history: dict[str, list[Sample]]) -> str:
    """Write atomically; returns a note instead of raising (a read-only state
    dir costs the history, not the check)."""
    from .atomic import ensure_dir, write_text

    try:
        ensure_dir(os.path.dirname(path))
        write_text(path, json.dumps({"version": 1, "devices": {d: [[t, v] for t, v in s]
                                                              for d, s in sorted(history.items())}}))
        return ""
    except OSError as exc:
        return f"counter history not saved ({path}: {exc.strerror or exc})"


def observe(path: str, current: dict[str, dict[str, int]], now: float, window_s: float,
            label=lambda key: key) -> tuple[dict[str, dict[str, int]], dict[str, float | None], str]:
    """One reading of every device: its increases within the window and the
    time of its baseline (keyed by `label(device)`), the history saved for the
    next run (devices gone from the reading are forgotten), and a note ("" when
    all went well) for the check's message."""
    history, note = load(path)
    increase: dict[str, dict[str, int]] = {}
    since: dict[str, float | None] = {}
    for key, values in current.items():
        increase[label(key)], since[label(key)] = increases(history.get(key, []), now, values, window_s)
        history[key] = updated(history.get(key, []), now, values, window_s)
    for gone in set(history) - set(current):
        del history[gone]
    return increase, since, "; ".join(n for n in (note, save(path, history)) if n)
