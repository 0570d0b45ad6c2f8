"""Who meets whom: groups for the job array and rounds of node pairs.

Each round is a perfect matching from the circle method (round-robin), so in
k rounds every node meets k *different* partners: a slow node is slow in all
of its pairs, a bad link in only one, and two rounds already tell them apart.
"""

from __future__ import annotations


def groups(nodes: list[str], size: int) -> list[list[str]]:
    """Split into array-task groups of about `size`; never leave a group of one."""
    if len(nodes) <= size:
        return [list(nodes)] if nodes else []
    count = -(-len(nodes) // size)
    base, extra = divmod(len(nodes), count)
    out, i = [], 0
    for g in range(count):
        n = base + (1 if g < extra else 0)
        out.append(nodes[i:i + n])
        i += n
    return out


def rounds(nodes: list[str], count: int) -> list[list[tuple[str, str]]]:
    """`count` rounds of disjoint pairs (circle method). With an odd number of
    nodes one node sits out each round (a different one every round)."""
    players: list[str | None] = list(nodes)
    if len(players) % 2:
        players.append(None)
    n = len(players)
    if n < 2:
        return []
    out = []
    fixed, rest = players[0], players[1:]
    for r in range(min(count, n - 1)):
        rot = rest[r:] + rest[:r]
        line = [fixed] + rot
        pairs = []
        for i in range(n // 2):
            a, b = line[i], line[n - 1 - i]
            if a is not None and b is not None:
                pairs.append((a, b))
        out.append(pairs)
    return out


def retest_plan(suspects: list[str], good: list[str], partners: int = 2) -> list[list[tuple[str, str]]]:
    """Rounds pairing each suspect with `partners` different proven-good nodes."""
    if not good:
        return []
    out = []
    for r in range(partners):
        used: set[str] = set()
        pairs = []
        for i, s in enumerate(suspects):
            for k in range(len(good)):
                g = good[(i + r * len(suspects) + k) % len(good)]
                if g not in used:
                    used.add(g)
                    pairs.append((s, g))
                    break
        out.append(pairs)
    return out
