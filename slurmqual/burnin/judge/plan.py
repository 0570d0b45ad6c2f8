"""Who meets whom: groups for the task jobs and rounds of node pairs.

Each round is a perfect matching (one node sits out when the count is odd),
and in k rounds every node meets k *different* partners: a slow node is slow
in all of its pairs, a bad link in only one, and two rounds already tell them
apart.

With a node -> switch map (leaf switch; `topology.py` reads it from Slurm's
topology.conf or the fabric map) the plan follows the fabric: groups hold
whole switches, or halves of two switches, so every group can test both; the
first rounds pair nodes under the same switch (a slow switch shows up on its
own), the later ones pair across switches (its uplinks show up). Without a
map it is the plain circle method over sorted names.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from statistics import median

# The most values a run gives one link: the first round's and one per retest
# round (a link within one value's margin is measured again, and slow twice
# within the margins a third time: pairs.suspect_links' `again`).
LINK_VALUES = 3

Pair = tuple[str, str]


def groups(nodes: list[str], size: int, switch_of: dict[str, str] | None = None) -> list[list[str]]:
    """Split into task groups of about `size`; never leave a group of one.
    With a switch map, groups are made of switch chunks (at most half a group
    each, so a group can hold two switches), each chunk going to the emptiest
    group that has room and no node of that switch yet."""
    if not switch_of or len({switch_of.get(n, "") for n in nodes}) < 2:
        return _even_groups(list(nodes), size)
    half = max(1, size // 2)
    chunks: list[tuple[str, list[str]]] = []
    for sw, members in sorted(_by_switch(nodes, switch_of).items()):
        chunks += [(sw, c) for c in _even_groups(members, half, allow_one=True)]
    chunks.sort(key=lambda c: (-len(c[1]), c[0]))
    out: list[tuple[set[str], list[str]]] = []
    for sw, members in chunks:
        room = [g for g in out if len(g[1]) + len(members) <= size and sw not in g[0]]
        if room:
            g = min(room, key=lambda g: len(g[1]))
            g[0].add(sw)
            g[1].extend(members)
        else:
            out.append(({sw}, list(members)))
    result = [g[1] for g in out]
    while len(result) > 1 and min(len(g) for g in result) == 1:
        one = min(result, key=len)
        result.remove(one)
        min(result, key=len).extend(one)
    order = {n: i for i, n in enumerate(_switch_order(nodes, switch_of))}
    return sorted((sorted(g, key=order.__getitem__) for g in result), key=lambda g: order[g[0]])


def _even_groups(nodes: list[str], size: int, allow_one: bool = False) -> list[list[str]]:
    if len(nodes) <= size:
        return [list(nodes)] if nodes else []
    count = -(-len(nodes) // size)
    base, extra = divmod(len(nodes), count)
    if base == 1 and not allow_one:
        count, base, extra = len(nodes) // 2, 2, len(nodes) % 2
    out, i = [], 0
    for g in range(count):
        n = base + (1 if g < extra else 0)
        out.append(nodes[i:i + n])
        i += n
    return out


def _by_switch(nodes: list[str], switch_of: dict[str, str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for n in nodes:
        out.setdefault(switch_of.get(n, ""), []).append(n)
    return out


def _switch_order(nodes: list[str], switch_of: dict[str, str]) -> list[str]:
    return [n for _sw, members in sorted(_by_switch(nodes, switch_of).items()) for n in members]


def circle(nodes: list[str], count: int) -> list[list[Pair]]:
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


def rounds(nodes: list[str], count: int, switch_of: dict[str, str] | None = None) -> list[list[Pair]]:
    """`count` rounds of disjoint pairs, no pair twice. Without a switch map
    (or with one switch) the circle method. With one: the first
    max(1, count // 2) rounds within switches (the odd node of a switch pairs
    with another switch's odd node), the rest across switches."""
    if not switch_of or len({switch_of.get(n, "") for n in nodes}) < 2:
        return circle(nodes, count)
    per = _by_switch(nodes, switch_of)
    within = min(max(1, count // 2) if count > 1 else 1, max(len(m) for m in per.values()) - 1)
    used: set[frozenset[str]] = set()
    out: list[list[Pair]] = []
    inner = {sw: circle(m, within) for sw, m in per.items()}
    for r in range(within):
        pairs = [p for sw in sorted(inner) if r < len(inner[sw]) for p in inner[sw][r]]
        _complete(nodes, pairs, used, lambda a, b: True)
        out.append(pairs)
    cross = lambda a, b: switch_of.get(a, "") != switch_of.get(b, "")  # noqa: E731
    for pairs in _across(_switch_order(nodes, switch_of), switch_of, count - within, used):
        _complete(nodes, pairs, used, cross)
        out.append(pairs)
    return [rnd for rnd in out if rnd]


def _complete(nodes: list[str], pairs: list[Pair], used: set[frozenset[str]], prefer) -> None:
    """Record `pairs` as used, then pair the nodes left over in this round
    (an odd node per switch, a skipped collision) with new partners, `prefer`red ones first."""
    for a, b in pairs:
        used.add(frozenset((a, b)))
    busy = {n for p in pairs for n in p}
    free = [n for n in nodes if n not in busy]
    for first_pass in (True, False):
        i = 0
        while i < len(free):
            a = free[i]
            b = next((b for b in free[i + 1:] if frozenset((a, b)) not in used and (not first_pass or prefer(a, b))),
                     None)
            if b is None:
                i += 1
                continue
            pairs.append((a, b))
            used.add(frozenset((a, b)))
            free.remove(b)
            free.pop(i)


def _across(order: list[str], switch_of: dict[str, str], count: int, used: set[frozenset[str]]) -> list[list[Pair]]:
    """Rounds pairing the first half of the switch-ordered nodes with the
    second half at rising offsets: each a matching, mostly across switches.
    Offsets whose pairs were already used or stay under one switch are skipped
    (the pair is left out: `_complete` re-pairs its nodes)."""
    if count <= 0:
        return []
    half = len(order) // 2
    a_side, b_side = order[:half], order[half:2 * half]
    scored = []
    for off in range(half):
        pairs = [(a_side[i], b_side[(i + off) % half]) for i in range(half)]
        good = [p for p in pairs if frozenset(p) not in used and switch_of.get(p[0]) != switch_of.get(p[1])]
        scored.append((-len(good), off, good))
    scored.sort()
    out = []
    for _neg, _off, good in scored[:count]:
        fresh = [p for p in good if frozenset(p) not in used]
        out.append(fresh)
        used.update(frozenset(p) for p in fresh)
    while len(out) < count:
        out.append([])
    return out


def retest_plan(suspects: list[str], good: list[str], partners: int = 2,
                met: dict[str, set[str]] | None = None,
                switch_of: dict[str, str] | None = None, avoid: Iterable[str] = (),
                present: Iterable[str] = (), twins: dict[str, set[str]] | None = None) -> list[list[Pair]]:
    """`partners` rounds pairing each suspect with a different proven-good
    node per round; no good node twice in a round. Partners it has `met`
    before come last, then good nodes to `avoid` (behind a switch found
    slow: a pair through it reads the switch, not the suspect), then
    partners under a switch it already met someone under (a new switch
    separates the node from its old partners' switch and uplinks). Among
    partners as good as each other, one already in the round comes first:
    a good node `present` anyway (an end of a link measured again) or
    another suspect's partner in an earlier round of the plan. Each node
    in a retest round is a node-job (a rerun); one partner serving a
    suspect per round serves as many suspects as there are rounds, and
    the same evidence costs a third fewer nodes. `twins`: the other ends of
    a suspect's links: their new partners count as met (each end of a
    link is shown fine elsewhere by partners of its own)."""
    if not good:
        return []
    met = met or {}
    switch_of = switch_of or {}
    avoid = set(avoid)
    is_good = set(good)
    # Good nodes already in the round, in the order they came (a list: the
    # plan is the same on every run of the same analysis).
    here = list(dict.fromkeys(g for g in present if g in is_good))
    in_round = set(here)
    out: list[list[Pair]] = []
    seen = {s: set(met.get(s, ())) for s in suspects}
    twins = twins or {}
    chosen: dict[str, set[str]] = {s: set() for s in suspects}
    best_rank = (False, False, False)
    for r in range(partners):
        used: set[str] = set()
        pairs = []
        for i, s in enumerate(suspects):
            switches = {switch_of.get(q) for q in seen[s]} - {None}
            mine = seen[s]
            if twins.get(s):
                mine = mine.union(*(chosen.get(t, ()) for t in twins[s]))

            def rank(g: str) -> tuple[bool, bool, bool]:
                return g in mine, g in avoid, switch_of.get(g) in switches

            # A node already in the round, the best by rank (scan stops at
            # the first of the best rank).
            near, near_rank = None, None
            for g in here:
                if g in used or g == s:
                    continue
                k = rank(g)
                if near_rank is None or k < near_rank:
                    near, near_rank = g, k
                    if k == best_rank:
                        break
            choice = near
            if near_rank != best_rank:
                start = (i + r * len(suspects)) % len(good)
                # The first free good node from `start` on, by rank (not met,
                # under a new switch); a scan that stops at the first of rank
                # (False, False, False), not a sort of the whole fleet per suspect.
                first: dict[tuple[bool, bool, bool], str] = {}
                for k in range(len(good)):
                    g = good[(start + k) % len(good)]
                    if g in used or g == s:
                        continue
                    first.setdefault(rank(g), g)
                    if rank(g) == best_rank:
                        break
                if first and (near_rank is None or min(first) < near_rank):
                    choice = first[min(first)]
            if choice is not None:
                used.add(choice)
                seen[s].add(choice)
                chosen[s].add(choice)
                pairs.append((s, choice))
                if choice not in in_round:
                    in_round.add(choice)
                    here.append(choice)
        out.append(pairs)
    return out


# -- the next retest round: one function for the analysis and the run ------------

@dataclass
class RoundState:
    """What a run's earlier rounds and Slurm say before its next round is
    planned (burnin/run/retest.py reads it from the run directory and Slurm):
    `decided` node -> its fail as the analysis that decided it recorded it
    (key, score, failed_nics, round; `held`: its drain waited for its rails'
    retest), `unavailable` node -> why no job can run on it (drained, by us
    or by someone else, or down), `switch_of` the leaf map partners are
    chosen by (None: the analysis' topology), `partners` per suspect;
    `last`: the run's retest rounds are spent (this analysis judges the
    last one): no round can decide a `retest` node any more. `cleared`: the
    suspect links an earlier analysis settled (its `clear_links`) that no
    later round measured again: in the last round's analysis they stay
    settled, as a decided fail stays fail (analyze.keep_cleared).
    `retested` node -> how many submitted retest rounds had it as a
    suspect: the retest budget keeps first the retests that waited longest
    (analyze._apply_retest_budget)."""
    decided: dict[str, dict] = field(default_factory=dict)
    unavailable: dict[str, str] = field(default_factory=dict)
    switch_of: dict[str, str] | None = None
    partners: int = 2
    last: bool = False
    cleared: list[list[str]] = field(default_factory=list)
    retested: dict[str, int] = field(default_factory=dict)


def met_of(pairs: Iterable[Sequence[str]]) -> dict[str, set[str]]:
    """Who has been paired with whom (any pair test, valid or not)."""
    met: dict[str, set[str]] = {}
    for nodes in pairs:
        if len(nodes) == 2:
            a, b = nodes
            met.setdefault(a, set()).add(b)
            met.setdefault(b, set()).add(a)
    return met


def repeats_of(measured: Iterable[tuple[Sequence[str], str]]) -> dict[frozenset[str], int]:
    """Pair -> how often it was measured on the key it was measured most on
    (`measured`: (nodes, key) of every valid pair test: a failed one measured
    nothing): 2 and more, a link measured again."""
    per: dict[tuple[str, str, str], int] = {}
    get = per.get
    for nodes, key in measured:
        if len(nodes) == 2:
            a, b = nodes
            k = (a, b, key) if a < b else (b, a, key)  # a frozenset per line was most of its time
            per[k] = get(k, 0) + 1
    out: dict[frozenset[str], int] = {}
    for (a, b, _key), c in per.items():
        pair = frozenset((a, b))
        out[pair] = max(out.get(pair, 0), c)
    return out


def rail_suspects(nodes: dict[str, dict]) -> list[str]:
    """Nodes failing a whole-node pair key while one of their rails is still
    `retest`: the part to replace (the node or that NIC) is not known yet, so
    a round re-measures their rails before they are drained."""
    out = []
    for n, v in nodes.items():
        keys = v.get("keys") or {}
        if v["verdict"] == "fail" and any(kv["verdict"] == "fail" and _topo(k) == "pair" for k, kv in keys.items()) \
                and any(kv["verdict"] == "retest" and _topo(k) == "rail" for k, kv in keys.items()):
            out.append(n)
    return sorted(out)


def _topo(key: str) -> str:
    parts = key.split(":")
    return parts[1] if len(parts) > 1 else ""


def to_remeasure(links: list[list[str]], clear: list[list[str]],
                 again: Iterable[list[str]] = (), rails_open: bool = False) -> list[list[str]]:
    """The links a retest round measures again: the suspect ones no key's
    evidence settles (a pair clearly slow on one rail is not re-measured
    for its whole-node key either: that rail explains it), and those `again`
    (slow once where transient hits could explain it: not suspects yet).
    A pair settled on its whole-node key only (no rail named) is measured
    again where a rail key still asks about it (`again` naming a rail):
    which of its rails is the slow route is not settled (a rail's first
    value was a high artefact, its second one low value). `rails_open`
    (planning a round): so is every rail link of such a pair, suspect too
    (a route at 0.50 named on the whole-node key after two values kept its
    rail link, 0.49 and 0.69, from its third value, and the rail was never named)."""
    rail_settled = {frozenset(x[:2]) for x in clear if len(x) > 2}
    settled = {frozenset(x[:2]) for x in clear}
    return [x for x in [*links, *again]
            if frozenset(x[:2]) not in (rail_settled if len(x) > 2 and (rails_open or x in again) else settled)]


def low_pairs(nodes: dict[str, dict], values: dict[tuple[str, str, str], float], threshold: float) -> list[list[str]]:
    """Pairs (a, b) reading below `threshold` of what each of their ends
    reads with its other partners on a pair key (`values`: (a, b, key) ->
    the pair's value there, the median of its repeats; every pair of the
    `retest` nodes). An end's level is its `own` level there (its pairs
    with partners not under suspicion and no suspect link), else its
    `score`; a `retest` end's the median of its other pairs where that is
    higher (its score counts the low pair itself: a route's one value pulls
    its end below the line, and its own level counts the pair until it is
    a suspect link). A node a little
    slow (0.87) reads its pairs about its own level, not 10% under it: none
    of them is low. Pairs with an end behind a switch found slow are left
    out (the switch, not the link). Whole-node pair keys only: there a
    route shows on a pair no rail key names; rail keys measure their own
    clearly low single values again (pairs.CLEARLY_LOW), and a retested
    NIC's every low rail pair measured again at 8% noise reran 15% more
    node-jobs, and a run of it drained a healthy node (bench_components_sim
    'links, 8% noise', base 9001, seed 9004)."""
    per: dict[tuple[str, str], list[tuple[str, float]]] = {}
    for (a, b, key), v in values.items():
        per.setdefault((a, key), []).append((b, v))
        per.setdefault((b, key), []).append((a, v))

    def level(x: str, other: str, key: str) -> float | None:
        v = nodes[x]
        k = (v.get("keys") or {}).get(key)
        own = None if k is None else k.get("own", k.get("score"))
        if own is None or v["verdict"] != "retest":
            return own
        rest = [w for q, w in per.get((x, key), ()) if q != other]
        return max(own, median(rest)) if rest else own

    out: set[tuple[str, str]] = set()
    for (a, b, key), v in values.items():
        if _topo(key) != "pair":
            continue
        va, vb = nodes.get(a), nodes.get(b)
        if va is None or vb is None or va.get("behind_suspect_switch") or vb.get("behind_suspect_switch"):
            continue
        la, lb = level(a, b, key), level(b, a, key)
        if la is not None and lb is not None and v < threshold * la and v < threshold * lb:
            out.add((a, b) if a < b else (b, a))
    return [list(p) for p in sorted(out)]


def next_round(nodes: dict[str, dict], suspect_links: list[list[str]], met: dict[str, set[str]],
               repeats: dict[frozenset[str], int] | None = None, trusted: Iterable[str] = (),
               state: RoundState | None = None, lows: Iterable[Sequence[str]] = ()) -> list[list[list[str]]]:
    """The pair rounds of a run's next retest round: THE plan (analyze()'s
    `retest_plan`, printed by `burnin analyze --json`, is what the run's
    analysis job submits). Each `retest` node, each node failing its
    whole-node key with a rail `retest` (rail_suspects) and the ends that do
    not pass of each suspect link measured fewer than LINK_VALUES times
    (`repeats`: times a pair was measured on one key; `to_remeasure`: not
    settled already: a link slow twice within the margins gets its third) meet
    `state.partners` proven-good nodes (`pass`, or `trusted`
    references) they have not `met`, under switches they have not met where
    there are some; each such link is measured once more, in a round of its
    own. Decided fails and `unavailable` nodes are never planned, suspects
    nor partners; a partner behind a switch found slow (`behind_suspect_switch`)
    only where no other is free. Nodes without a partner are left out
    (retest.settle says why).

    `lows` (low_pairs: below 90% of what each end reads with its other
    partners): such a pair of a `retest` node, its other end passing or
    `retest` too, is measured again in the round that retests the node,
    once per round while it has fewer than LINK_VALUES values (its ends
    are in the round anyway, or one passing end joins it). The round's new
    partners tell the node's part only: a route at 0.62 whose end was
    `retest` (not fine elsewhere: no suspect link) kept its one low value
    while new partners cleared the end, and was asked again only after
    the last round, unsettled (links 8%, whole-node). A node slow on its
    own reads its pairs about its own level: none of them is low."""
    st = state or RoundState()
    out_of = set(st.unavailable) | {n for n, d in st.decided.items() if not d.get("held")}
    rails = set(rail_suspects(nodes))
    # A node failing now (not for a rail still open) is settled: it is
    # drained, and no later round pins a job to it, nor re-measures its
    # links (new partners and a held drain bought no answer).
    out_of |= {n for n, v in nodes.items() if v["verdict"] == "fail" and n not in rails}
    retested = {n for n, v in nodes.items() if v["verdict"] == "retest"} - out_of
    passing = {n for n, v in nodes.items() if v["verdict"] == "pass"} - out_of
    lows = [(a, b) for a, b, *_rail in lows if {a, b} & retested and {a, b} <= retested | passing]
    links = [(a, b) for a, b, *_rail in [*suspect_links, *lows]
             if (repeats or {}).get(frozenset((a, b)), 1) < LINK_VALUES and not {a, b} & out_of]
    links = list(dict.fromkeys(tuple(sorted(p)) for p in links))
    # An end of a link that passes is fine with its other partners: new
    # partners would tell nothing the link's own repeat does not (they
    # cost four node-jobs per end: with heavy-tailed noise, a thousand
    # ambiguous links per fleet reran half of it). An end not passing meets them.
    suspects = sorted({n for n, v in nodes.items() if v["verdict"] == "retest"} | rails
                      | {n for p in links for n in p if nodes.get(n, {}).get("verdict") != "pass"})
    suspects = [n for n in suspects if n not in out_of]
    good = sorted((set(trusted) | {n for n, v in nodes.items() if v["verdict"] == "pass"}) - out_of - set(suspects))
    # A partner behind a switch found slow gives a pair bounded by that
    # switch (fabricmodel.bounded_ends): no evidence of the suspect's level.
    behind = [n for n in good if nodes.get(n, {}).get("behind_suspect_switch")]
    twins: dict[str, set[str]] = {}
    for a, b in links:
        twins.setdefault(a, set()).add(b)
        twins.setdefault(b, set()).add(a)
    # The passing ends of the links measured again are in the round anyway:
    # as partners they cost no node-job more.
    rounds_ = [[list(p) for p in rnd] for rnd in
               retest_plan(suspects, good, st.partners, met=met, switch_of=st.switch_of, avoid=behind,
                           present=[n for p in links for n in p], twins=twins) if rnd]
    busy: list[set[str]] = []
    again: list[list[list[str]]] = []
    for a, b in links:  # the link itself again: a node once per round
        i = next((i for i, s in enumerate(busy) if not {a, b} & s), len(busy))
        if i == len(busy):
            busy.append(set())
            again.append([])
        busy[i] |= {a, b}
        again[i].append([a, b])
    return rounds_ + again
