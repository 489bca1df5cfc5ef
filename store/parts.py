"""Chat messages sent in parts. People send one message as several ("Guess what, I finally built
the shelf." / "took me three weekends lol"); each part is stored as a message of its own, and the
parts of one share what they are about, so a search would fill several of its first places with
one message, or show the part that matched best, which may be the filler ("Mochi 🍡" / "wait
really"). The hybrid ranking (store/hybrid.py `rank`) keeps such a message once, at its
best-ranked part, with all its parts known, in the order they were sent."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import timedelta
from itertools import pairwise
from typing import Any, TypeVar

from store.dates import parse_stamp

PARTS_GAP = timedelta(minutes=2)  # one person's consecutive messages this close are one message sent in parts

R = TypeVar("R")  # a ranked candidate: `.item` (with `.key`, `.value`) and `.parts` (store.hybrid.Ranked)


def message_heads(
    neighbours: dict[str, list[Any]],
    by_key: dict[str, Any],
    author: Callable[[dict], str | None],
    written: Callable[[dict], Any],
) -> dict[str, str]:
    """Key -> the key of its message's first part, for the candidates the thread neighbours of
    the hits (`neighbours`: hit key -> the items around it) show to be parts of one message:
    consecutive messages of one `author` written (`written`: a stamp) at most PARTS_GAP apart."""
    head: dict[str, str] = {}
    for seed, items in neighbours.items():
        if seed not in by_key:
            continue
        run = sorted([by_key[seed], *items], key=lambda item: (str(written(item.value) or ""), item.key))
        for before, after in pairwise(run):
            who = author(before.value)
            said, then = parse_stamp(written(before.value)), parse_stamp(written(after.value))
            if who and who == author(after.value) and said and then and timedelta(0) <= then - said <= PARTS_GAP:
                head[after.key] = head.get(before.key, before.key)
    for key in head:  # runs seen from different seeds: follow each to its first part
        first = head[key]
        while first in head and head[first] != first:
            first = head[first]
        head[key] = first
    return head


def with_parts(
    ranked: Sequence[R], heads: dict[str, str], by_key: dict[str, Any], order: Callable[[dict], str]
) -> list[R]:
    """`ranked` with each message sent in parts (`heads`: part -> first part) once, at its
    best-ranked part, which carries all the parts known (`parts`, by `order` of their values,
    then key) and the best vector similarity of those ranked (`similarity`); its other parts
    leave the ranking."""
    if not heads:
        return list(ranked)
    members: dict[str, list[Any]] = {}
    for key in {*heads, *heads.values()}:
        if key in by_key:
            members.setdefault(heads.get(key, key), []).append(by_key[key])
    similarity: dict[str, float] = {}  # a message's best part's
    for r in ranked:
        key, part = r.item.key, r.similarity  # type: ignore[attr-defined]
        group = heads.get(key, key)
        if group in members and part is not None:
            similarity[group] = max(similarity.get(group, part), part)
    kept: list[R] = []
    seen: set[str] = set()
    for r in ranked:
        key = r.item.key  # type: ignore[attr-defined]
        group = heads.get(key, key)
        if group not in members:
            kept.append(r)
        elif group not in seen:
            seen.add(group)
            parts = sorted(members[group], key=lambda item: (order(item.value), item.key))
            best = similarity.get(group, r.similarity)  # type: ignore[attr-defined]
            kept.append(replace(r, parts=tuple(parts), similarity=best))  # type: ignore[type-var]
    return kept
