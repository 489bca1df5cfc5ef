"""How a saved memory feeds the person/attribute indexes (store/memory/attributes.py): the
messages that bear it out, the recorded speaker its subject names, whose index each message goes
to, several ids filed at once, and nothing read for a memory that names no aspect."""

from __future__ import annotations

from datetime import UTC, datetime

from langgraph.store.base import Item

from store import aspects
from store.memory import attributes
from store.people import people

AT = datetime(2024, 1, 1, tzinfo=UTC)


def turn(key: str, speaker: str | None, role: str = "user") -> Item:
    value = {"text": "...", "role": role, **({"speaker": speaker} if speaker else {})}
    return Item(value=value, key=key, namespace=("memories", "u", "chat"), created_at=AT, updated_at=AT)


def test_the_memory_speaker_messages_bear_it_out_else_the_user_ones():
    turns = [turn("t1", "Jo"), turn("t2", "assistant", "assistant"), turn("t3", None)]
    assert [t.key for t in attributes.evidence(turns, "Jo")] == ["t1"]
    assert [t.key for t in attributes.evidence(turns, None)] == ["t1"]  # the user's, not the assistant's
    assert [t.key for t in attributes.evidence(turns, "jo_account")] == ["t1"]  # a name no message has
    assert attributes.evidence([turn("t2", "assistant", "assistant")], None) == []


def test_a_subject_names_a_recorded_speaker_by_any_of_their_names_and_only_one():
    registry = {"people": {"Samuel Okafor": {"introduced": {"Sammy": 1}}}}
    persons = people(["Jo", "Samuel Okafor", "Joanna"], registry)
    assert attributes.subject_speaker("Sammy", persons) == "Samuel Okafor"  # introduced
    assert attributes.subject_speaker("my friend Samuel", persons) == "Samuel Okafor"  # first name
    assert attributes.subject_speaker("Jo", persons) == "Jo"
    assert attributes.subject_speaker("sister Ana", persons) is None  # never spoke
    assert attributes.subject_speaker("Sami", persons) is None  # a misspelling is not enough
    assert attributes.subject_speaker("Jo and Sammy", persons) is None  # two people


def test_a_subject_takes_every_message_else_each_goes_to_its_speaker():
    turns = [turn("t1", "Jo"), turn("t2", "Kim")]
    assert attributes.filed(turns, "Sam") == {"Sam": (["t1", "t2"], {"Jo", "Kim"})}
    assert attributes.filed(turns, "Jo") == {"Jo": (["t1", "t2"], {"Kim"})}
    assert attributes.filed(turns, None) == {"Jo": (["t1"], set()), "Kim": (["t2"], set())}
    stored = attributes.aspects_value("Sam", {}, {"Jo", "Sam"})
    assert stored["told_by"] == ["Jo"] and "told_by" not in attributes.aspects_value("Jo", {}, {"Jo"})


def test_several_ids_are_filed_under_each_value_latest_last():
    index: dict = {"activity": {"pottery": ["t0", "t1"]}}
    assert aspects.add_ids(index, aspects.turn_aspects("Jo took up pottery"), ["t1", "t2"])
    assert index["activity"]["pottery"] == ["t0", "t1", "t2"] and index["art"]["pottery"] == ["t1", "t2"]
    assert not aspects.add_ids(index, {}, ["t3"]) and not aspects.add_ids(index, {"sport": ["yoga"]}, [])
    assert "sport" not in index


class Untouchable:
    """A store any read or write of fails the test."""

    def __getattr__(self, name: str):
        raise AssertionError(f"the store was used: {name}")


async def test_a_memory_of_no_aspect_word_or_no_turn_ids_reads_nothing():
    ns = ("memories", "u", "chat")
    await attributes.learn_memory(Untouchable(), ns, "Jo likes quiet evenings", ["t1"], "Jo", None)  # type: ignore[arg-type]
    await attributes.learn_memory(Untouchable(), ns, "Jo took up pottery", [], "Jo", None)  # type: ignore[arg-type]
