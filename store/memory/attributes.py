"""The person/attribute indexes of a memory space (store/aspects.py): one item per recorded
speaker in `aspects_namespace`, holding `{aspect: {value: [chat message id, ...]}}`.

Two writes feed them. Each chat message recorded files its own id under the values its words name
in its speaker's index (`learn_turn`). Each memory saved with `turn_ids` (the memory writer's:
the chat messages it was learnt from) files those messages under the values the memory's text
names, in the index of the person it is about (`learn_memory`), so a list question finds a
message that never used the word ("I finally finished the vase I made on the wheel!", learnt as
"Jo took up pottery": Jo's activity `pottery`). Only messages of the same chat namespace count,
said by the memory's `speaker` (else the user's messages); the person is the memory's `subject`
as a recorded speaker (`subject_speaker`: by name, first name or a name they go by, through the
registry of people, store/people.py), else whoever said the messages. A memory about someone who
never spoke in the chat feeds no index. An index holding another speaker's messages (a memory
about Ana learnt from what Jo said) lists them in `told_by`, whose messages a list question
about Ana searches too (store/memory/hybrid.py). `rebuild` builds every index anew from the chat
history and the memories, in the order they were written.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from langgraph.store.base import BaseStore, GetOp, Item

from store import aspects
from store.backend import backend_for
from store.memory.config import ASPECTS_KIND, PEOPLE_KEY
from store.people import Person, people, resolve


def aspects_namespace(chat_ns: tuple) -> tuple:
    """The namespace of the person/attribute indexes (store/aspects.py) of a chat namespace's
    memory space: one item per speaker, keyed by their recorded name."""
    return (*chat_ns[:-1], ASPECTS_KIND)


def aspects_value(speaker: str, index: dict, told_by: Iterable[str] = ()) -> dict:
    """The stored item of `speaker`'s person/attribute index; `told_by`: the other speakers whose
    messages it holds (through memories about `speaker` learnt from them)."""
    told = sorted(set(told_by) - {speaker})
    return {"kind": ASPECTS_KIND, "speaker": speaker, "aspects": index, **({"told_by": told} if told else {})}


async def _fold(store: BaseStore, index_ns: tuple, found: dict, filing: dict[str, tuple[list[str], set[str]]]) -> None:
    """File each person's keys under the values of `found` in their index (`filing`: person ->
    (keys, the other speakers who said them), as `filed` gives it): the indexes are read and the
    changed ones written in one update, which concurrent ones never undo (`Backend.update_items`:
    a chat message recorded while a memory is saved, two server workers)."""

    def change(person: str, value: dict | None) -> dict | None:
        keys, told_by = filing[person]
        index = dict((value or {}).get("aspects") or {})
        told = set((value or {}).get("told_by") or ()) | told_by
        return aspects_value(person, index, told) if aspects.add_ids(index, found, keys) else None

    await backend_for(store).update_items(index_ns, list(filing), change)


async def learn_turn(store: BaseStore, chat_ns: tuple, speaker: str | None, key: str, text: str) -> None:
    """Fold a chat message into its speaker's index: only a message of a speaker that speaks of
    a known aspect costs an update (a read and a write)."""
    found = aspects.turn_aspects(text) if speaker else {}
    if speaker and found:
        await _fold(store, aspects_namespace(chat_ns), found, {speaker: ([key], set())})


def evidence(turns: Iterable[Item], speaker: str | None) -> list[Item]:
    """The chat messages a memory was learnt from that bear it out: those of its `speaker`, else
    (a memory saved without one, or none of the messages theirs) the user's messages."""
    said = [turn for turn in turns if turn.value.get("speaker")]
    own = [turn for turn in said if turn.value["speaker"] == speaker]
    return own or [turn for turn in said if turn.value.get("role") == "user"]


def subject_speaker(subject: str, persons: Sequence[Person]) -> str | None:
    """The recorded speaker a memory's `subject` names ("Jo", "my friend Jo", a first name, a
    name they introduced themselves with or are called by; not a mere misspelling), when it names
    exactly one."""
    words = {word.lower() for word in re.findall(r"[\w'’-]+", subject)}
    found = resolve(subject, persons, words)
    return next(iter(found)) if len(found) == 1 else None


def filed(turns: Sequence[Item], person: str | None) -> dict[str, tuple[list[str], set[str]]]:
    """Whose index a memory's evidence `turns` go to: person -> (the turns' ids, the other
    speakers who said them); all to `person` (the subject) when given, else each to its speaker."""
    if person:
        return {person: ([turn.key for turn in turns], {str(turn.value["speaker"]) for turn in turns} - {person})}
    grouped: dict[str, tuple[list[str], set[str]]] = {}
    for turn in turns:
        grouped.setdefault(str(turn.value["speaker"]), ([], set()))[0].append(turn.key)
    return grouped


async def persons(store: BaseStore, chat_ns: tuple) -> list[Person]:
    """The recorded speakers of the memory space with the names they go by (store/people.py)."""
    speakers = await backend_for(store).speakers(chat_ns)
    found = await store.asearch((*chat_ns[:-1], "profile"), limit=2, refresh_ttl=False)
    return people(speakers, next((item.value for item in found if item.key == PEOPLE_KEY), None))


async def learn_memory(
    store: BaseStore, chat_ns: tuple, text: str, turn_ids: Sequence[str], speaker: str | None, subject: str | None
) -> None:
    """Fold a memory saved with `turn_ids` into the index of the person it is about (see the
    module's docstring): nothing is read when its text names no aspect or it has no turn ids;
    then one read of its turns and one update of the indexes of the persons it files them for."""
    found = aspects.turn_aspects(text)
    if not found or not turn_ids:
        return
    read = await store.abatch([GetOp(chat_ns, key, False) for key in turn_ids])
    turns = evidence([item for item in read if isinstance(item, Item)], speaker)
    if not turns:
        return
    person = None
    if subject:
        person = subject_speaker(subject, await persons(store, chat_ns))
        if person is None:
            return
    await _fold(store, aspects_namespace(chat_ns), found, filed(turns, person))


async def rebuild(store: BaseStore, chat_ns: tuple, chat: Sequence[Item], memories: Sequence[Item]) -> dict[str, dict]:
    """Every index built anew from the `chat` messages (oldest first) and the `memories` with
    turn ids, each folded in when it was written (a memory at its last update, with its current
    text), and stored (an index no one feeds any more is deleted); returns speaker -> index."""
    by_key = {item.key: item for item in chat}
    registry = await store.aget((*chat_ns[:-1], "profile"), PEOPLE_KEY, refresh_ttl=False)
    speakers = {str(item.value["speaker"]) for item in chat if item.value.get("speaker")}
    known = people(speakers, registry.value if registry else None)
    events: list[tuple[str, int, Item]] = [(str(item.value.get("created_at") or ""), 0, item) for item in chat]
    events += [(str(item.value.get("updated_at") or ""), 1, item) for item in memories if item.value.get("turn_ids")]
    indexes: dict[str, dict] = {}
    told: dict[str, set[str]] = {}
    for _, is_memory, item in sorted(events, key=lambda event: event[:2]):
        value: dict[str, Any] = item.value
        found = aspects.turn_aspects(str(value.get("text") or ""))
        if not found:
            continue
        if not is_memory:
            if value.get("speaker"):
                aspects.add_ids(indexes.setdefault(str(value["speaker"]), {}), found, [item.key])
            continue
        turns = evidence([by_key[key] for key in value["turn_ids"] if key in by_key], value.get("speaker"))
        person = subject_speaker(str(value["subject"]), known) if value.get("subject") else None
        if not turns or (value.get("subject") and person is None):
            continue
        for name, (keys, told_by) in filed(turns, person).items():
            aspects.add_ids(indexes.setdefault(name, {}), found, keys)
            told.setdefault(name, set()).update(told_by)
    indexes = {speaker: index for speaker, index in indexes.items() if index}
    index_ns = aspects_namespace(chat_ns)
    for old in await store.asearch(index_ns, limit=1000, refresh_ttl=False):
        if old.key not in indexes:
            await store.adelete(index_ns, old.key)
    for speaker, index in indexes.items():
        await store.aput(index_ns, speaker, aspects_value(speaker, index, told.get(speaker, ())), index=False)
    return indexes
