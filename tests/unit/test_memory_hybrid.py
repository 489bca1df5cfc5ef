"""Hybrid memory search, pure parts and the in-process path (InMemoryStore, real local
embeddings): score fusion, dates named in queries, keyword + time candidates, and dedupe that
never merges different speakers or different days."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from store import memory
from store.backend import backend_for
from store.dates import (
    EventRelative,
    asks_when,
    event_relative,
    names_time,
    query_time_range,
    stamp,
    tells_of,
    told_spans,
)
from store.floor import FLOOR_TAIL, standouts, with_keyword_floor
from store.fusion import fuse, normalised
from store.hybrid import speaker_share
from store.memory.write import near_exact, same_source
from store.names import about, capitalised_words, mentions, named, without_names
from store.sentences import EXCHANGE_QUESTION_CHARS, exchange, passages

NOW = datetime(2023, 12, 20, 15, 0, tzinfo=UTC)
# A long message whose third sentence answers "Did they get a new pet turtle?", and shorter
# messages closer to the question's words than the long message's one vector is.
LONG_NEWS = (
    "Hey, long time no see, how have you been doing lately? Work has been really busy and the kids both "
    "have colds again. We adopted two baby turtles last weekend. Anyway, how was your trip to the coast "
    "with your sister and her family, did the weather hold up?"
)
PET_TALK = [
    "Our neighbours have a pet rabbit that keeps escaping.",
    "I watched a nature documentary about sea creatures.",
    "My sister wants to get a hamster for her kids.",
]


# ---------------------------------------------------------------- fusion


def test_fuse_weight_zero_and_one_reproduce_each_signal():
    dense = [("a", 0.9), ("b", 0.8), ("c", 0.1)]
    keyword = [("c", 12.0), ("d", 3.0), ("e", 1.0)]
    assert [d for d, _ in fuse(dense, keyword, keyword_weight=0.0)][:3] == ["a", "b", "c"]
    assert [d for d, _ in fuse(dense, keyword, keyword_weight=1.0)][:2] == ["c", "d"]


def test_fuse_min_max_normalises_each_list():
    fused = dict(
        fuse([("a", 0.5), ("b", 0.25), ("x", 0.2)], [("b", 10.0), ("c", 6.0), ("y", 2.0)], keyword_weight=0.25)
    )
    assert fused["a"] == pytest.approx(0.75 * 1.0)
    assert fused["b"] == pytest.approx(0.75 * (0.05 / 0.3) + 0.25 * 1.0)
    assert fused["c"] == pytest.approx(0.25 * 0.5)
    assert fused["x"] == fused["y"] == 0.0


def test_other_normalisations():
    assert normalised([("a", 0.5), ("b", 0.25)], "max") == [("a", 1.0), ("b", 0.5)]
    assert normalised([("a", 3.0), ("b", 3.0)], "minmax") == [("a", 1.0), ("b", 1.0)]
    assert normalised([("a", 9.0), ("b", 1.0)], "rrf") == [("a", 1.0), ("b", pytest.approx(61 / 62))]
    assert normalised([("a", 1.7), ("b", 0.4), ("c", -1.0)], "given") == [("a", 1.0), ("b", 0.4), ("c", 0.0)]
    with pytest.raises(ValueError, match="minmax"):
        normalised([("a", 1.0)], "softmax")


def test_fuse_adds_the_time_bonus_and_breaks_ties_by_dense_rank():
    fused = fuse([("a", 1.0), ("b", 1.0)], [], keyword_weight=0.3, bonus={"b": 0.2, "z": 0.2, "a": 0.0})
    assert [d for d, _ in fused] == ["b", "a", "z"]
    assert dict(fused)["z"] == pytest.approx(0.2)
    assert [d for d, _ in fuse([("x", 0.5), ("y", 0.5)], [], keyword_weight=0.0)] == ["x", "y"]


def test_fuse_normalises_the_keyword_list_its_own_way():
    fused = dict(fuse([("a", 0.9), ("b", 0.5)], [("b", 0.2)], keyword_weight=0.5, keyword_method="given"))
    assert fused["a"] == pytest.approx(0.5)
    assert fused["b"] == pytest.approx(0.5 * 0.0 + 0.5 * 0.2)


def test_named_speakers_are_capitalised_whole_words():
    names = {"Maya", "Tom", "Ann", "Jo-Ann"}
    assert named("what was maya up to?", names) == {"Maya"}
    assert named("What was MAYA up to?", names) == {"Maya"}
    assert named("Did Tom and Jo-Ann meet Anne?", names) == {"Tom", "Jo-Ann"}
    assert named("Tomorrow, maybe", names) == set()
    assert named("What will Tom do?", {"Will", "Tom"}) == {"Tom"}  # a lower-case word is no name
    assert named("what will tom do?", {"Will", "Tom"}) == {"Will", "Tom"}  # unless all is lower case


def test_names_become_pronouns_for_the_dense_query():
    assert without_names("What did Maya's dog eat, and did Maya like it?", {"Maya"}) == (
        "What did their dog eat, and did they like it?"
    )
    assert without_names("Did Tom meet Tomas and Jo-Ann’s sister?", {"Tom", "Jo-Ann"}) == (
        "Did they meet Tomas and their sister?"
    )
    assert without_names("Where does Maya live?", set()) == "Where does Maya live?"
    assert without_names("What will Will do in May?", {"Will", "May"}) == "What will they do in they?"
    assert without_names("what did maya's dog eat?", {"Maya"}) == "what did their dog eat?"
    assert capitalised_words("What did Maya's dog eat in Berlin, I wonder?") == {"Maya", "Berlin", "I"}


def test_a_text_mentions_a_name_as_a_whole_word_spelt_as_given():
    assert mentions("Maya: Haha, classic.", {"Maya"})
    assert mentions("Nice one, Maya's brother!", {"Tom", "Maya"})
    assert not mentions("The Mayan ruins", {"Maya"})
    assert not mentions("MAYA-2 rocket; maya", {"Maya"})
    assert not mentions("Maya: hi", set())


def test_a_name_said_to_its_bearer_is_not_about_them():
    # "Thanks, Maya!" speaks to Maya; a chat log says so in every other message.
    for said_to in ("Tom: Thanks, Maya!", "Tom: Hey Maya, how was it?", "Tom: Wow Maya, cool.", "Tom: I get it, Maya."):
        assert mentions(said_to, {"Maya"}) and not about(said_to, {"Maya"}), said_to
    assert not about("Tom: Maya, look at this.", {"Maya"})
    for said_about in (
        "Maya: Haha, classic.",
        "Tom: I told Maya about it.",
        "Nice one, Maya's brother!",
        "Maya said hi",
    ):
        assert about(said_about, {"Maya"}), said_about
    assert about("Tom: Thanks, Maya! Maya's dog is cute.", {"Maya"})  # one mention about her is enough
    assert not about("Tom: hi", {"Maya"}) and not about("Maya: hi", set())


def test_a_long_message_is_also_searched_by_its_sentences():
    long = "Nate: Hey Joanna! That's cool. I've been stressed by the tournament, but my turtles always cheer me up."
    assert passages(long) == [
        "Nate: Hey Joanna! That's cool.",  # too short alone: joined to the next sentence
        "I've been stressed by the tournament, but my turtles always cheer me up.",
    ]
    assert passages("Tom: Haha, classic.") == [] == passages("Tom: Sure. Great!")  # one passage: the text itself
    assert passages("Dr. Smith saw M. Ward today. He was fine, thanks for asking!") == [
        "Dr. Smith saw M. Ward today.",
        "He was fine, thanks for asking!",
    ]
    assert passages(long, "Nate")[1] == "Nate: I've been stressed by the tournament, but my turtles always cheer me up."
    assert passages(long, "Nate")[0] == "Nate: Hey Joanna! That's cool."  # labelled once
    many = " ".join(f"Sentence number {i} is here." for i in range(12))
    assert len(passages(many)) == 8 and passages(many)[-1].endswith("Sentence number 11 is here.")


async def test_a_chat_message_is_found_by_its_best_sentence_and_reads_hide_the_passages(store, monkeypatch):
    monkeypatch.setenv("MEMORY_KEYWORD_WEIGHT", "0")  # the vectors alone
    monkeypatch.setenv("MEMORY_NEIGHBOUR_WEIGHT", "0")
    at = day(2023, 6, 1) + timedelta(hours=9)

    async def ranked(user: str) -> tuple[dict, list[str]]:
        said = [
            await memory.record_chat_message(store, user, "user", text, "t", now=at + timedelta(minutes=i))
            for i, text in enumerate([LONG_NEWS, *PET_TALK])
        ]
        found = await memory.recall(store, user, "Did they get a new pet turtle?", "chat", top_k=4, record_access=False)
        return said[0], [r["id"] for r in found]

    first, order = await ranked("u")
    assert "passages" not in first
    stored = await store.aget(memory.namespace("u", "chat"), first["id"])
    assert stored is not None and len(stored.value["passages"]) == 4
    assert order[0] == first["id"]
    monkeypatch.setattr("store.memory.write.passages", lambda text, speaker: [])  # the whole text's vector alone
    first, order = await ranked("v")
    assert order[0] != first["id"]


def test_an_exchange_passage_holds_the_question_answered_and_the_reply():
    asked = "Wow, that painting is awesome! What inspired you?"
    reply = "I did it after I visited the community centre."
    assert exchange(asked, "Melanie", reply, "Caroline") == f"Melanie: {asked} Caroline: {reply}"
    assert exchange(f"Melanie: {asked}", "Melanie", f"Caroline: {reply}", "Caroline") == (
        f"Melanie: {asked} Caroline: {reply}"  # labelled once
    )
    assert exchange("That painting is awesome!", "Melanie", reply, "Caroline") is None  # no question asked
    assert exchange(asked, "Caroline", reply, "Caroline") is None  # the writer's own question
    assert exchange(asked, None, reply, "Caroline") is None
    long = "Blah blah " * 60 + "What inspired you?"
    passage = exchange(long, "Melanie", reply, "Caroline")
    assert passage is not None and passage.endswith(f"What inspired you? Caroline: {reply}")
    assert (
        passage.startswith("Melanie: ")
        and len(passage) <= len(f"Melanie:  Caroline: {reply}") + EXCHANGE_QUESTION_CHARS
    )


PAINTING_TALK = [
    (
        "Melanie",
        "Wow Caroline, that painting is awesome! The colours are so vivid and it all looks so unified. What inspired you?",
    ),
    (
        "Caroline",
        "Thanks! I did it after I visited the community centre. I wanted to capture everyone's unity and strength.",
    ),
    ("Caroline", "Check out my painting for the art show! Hope you like it."),
    ("Caroline", "Painting is great for expressing myself, I love creating art."),
    ("Caroline", "Here is a self-portrait I painted last week."),
    ("Caroline", "Got any paintings to show? I'd love to see them."),
]


async def test_a_reply_is_found_by_the_question_it_answers(store, monkeypatch):
    monkeypatch.setenv("MEMORY_KEYWORD_WEIGHT", "0")  # the vectors alone
    monkeypatch.setenv("MEMORY_NEIGHBOUR_WEIGHT", "0")
    at = day(2023, 6, 1) + timedelta(hours=9)

    async def ranked(user: str) -> tuple[list[str], list[str]]:
        said = [
            (
                await memory.record_chat_message(
                    store, user, "user", text, "t", speaker=who, now=at + timedelta(minutes=i)
                )
            )["id"]
            for i, (who, text) in enumerate(PAINTING_TALK)
        ]
        found = await memory.recall(
            store, user, "What inspired Caroline's painting?", "chat", top_k=6, record_access=False
        )
        return said, [r["id"] for r in found]

    said, order = await ranked("u")
    stored = await store.aget(memory.namespace("u", "chat"), said[1])
    assert stored is not None and stored.value["passages"][-1] == (
        f"Melanie: {PAINTING_TALK[0][1]} Caroline: {PAINTING_TALK[1][1]}"
    )
    assert "passages" not in (await store.aget(memory.namespace("u", "chat"), said[3])).value  # its writer asked
    assert order[0] == said[1]
    monkeypatch.setattr("store.memory.write.exchange", lambda *args: None)  # the reply's own words alone
    said, order = await ranked("v")
    assert order[0] != said[1]


async def test_the_message_a_new_one_follows_is_the_last_of_its_thread(store):
    at = day(2023, 6, 1) + timedelta(hours=9)
    said = [
        (
            await memory.record_chat_message(
                store, "u", "user", text, thread, speaker="Jo", now=at + timedelta(minutes=i)
            )
        )["id"]
        for i, (thread, text) in enumerate(
            [("a", "first in a"), ("b", "first in b"), ("a", "second in a"), ("b", "second in b")]
        )
    ]
    backend = backend_for(store)
    ns = memory.namespace("u", "chat")
    last = await backend.thread_last(ns, "a", stamp(at + timedelta(minutes=10)))
    assert last is not None and last.key == said[2]
    last = await backend.thread_last(ns, "a", stamp(at + timedelta(minutes=2)))  # before the second was written
    assert last is not None and last.key == said[0]
    assert await backend.thread_last(ns, "a", stamp(at)) is None
    assert await backend.thread_last(ns, "c", stamp(at + timedelta(minutes=10))) is None


def test_fuse_of_empty_or_non_positive_lists():
    assert fuse([], [], keyword_weight=0.5) == []
    assert [d for d, _ in fuse([("a", 0.0)], [("b", 0.0)], keyword_weight=0.5)] == ["a", "b"]


# ---------------------------------------------------------------- dates in queries


def day(y: int, m: int, d: int) -> datetime:
    return datetime(y, m, d, tzinfo=UTC)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("What was Maya up to in the week of 10 May 2023?", (day(2023, 5, 8), day(2023, 5, 15))),
        ("what happened on 10th May, 2023", (day(2023, 5, 10), day(2023, 5, 11))),
        ("anything on May 10, 2023?", (day(2023, 5, 10), day(2023, 5, 11))),
        ("notes from 2023-05-10", (day(2023, 5, 10), day(2023, 5, 11))),
        ("what did I do in September 2023", (day(2023, 9, 1), day(2023, 10, 1))),
        ("trips in Dec 2022", (day(2022, 12, 1), day(2023, 1, 1))),
        ("what did we cook last May", (day(2023, 5, 1), day(2023, 6, 1))),
        ("what did we cook last December", (day(2022, 12, 1), day(2023, 1, 1))),
        ("what did I say yesterday", (day(2023, 12, 19), day(2023, 12, 20))),
        ("plans made last week", (day(2023, 12, 13), day(2023, 12, 20))),
        ("the dinner 2 weeks ago", (day(2023, 12, 2), day(2023, 12, 11))),
    ],
)
def test_query_time_range_resolves_simple_expressions(query, expected):
    assert query_time_range(query, NOW) == expected


@pytest.mark.parametrize("query", ["where does she live", "31 February 2023 party", "may I ask"])
def test_query_time_range_is_none_without_a_valid_date(query):
    assert query_time_range(query, NOW) is None


def test_a_time_next_to_an_event_is_parsed_and_resolved_in_whole_days():
    relative = event_relative("What did Tom do in the week after getting braces removed?")
    assert relative == EventRelative("What did Tom do getting braces removed?", 7, after=True)
    monday_noon = day(2023, 5, 8) + timedelta(hours=12)
    assert relative.window(monday_noon) == (day(2023, 5, 9), day(2023, 5, 16))
    before = event_relative("what happened the day before the wedding?")
    assert before == EventRelative("what happened the wedding?", 1, after=False)
    assert before.window(monday_noon) == (day(2023, 5, 7), day(2023, 5, 8))
    assert event_relative("What did she do the month after?") is None
    assert event_relative("the weekend after next") is None
    assert names_time("What did Tom do in the week after the surf lessons?", NOW)
    assert names_time("notes from 2023-05-10", NOW)
    assert not names_time("What did Tom do after the surf lessons?", NOW)


# ---------------------------------------------------------------- dedupe rules


def test_same_source_needs_the_same_speaker_and_for_events_the_same_day():
    value = {"speaker": "Maya", "created_at": "2023-05-08T10:00:00.000000+00:00"}
    same_day, next_day = day(2023, 5, 8) + timedelta(hours=20), day(2023, 5, 9)
    assert same_source(value, "episodic", "Maya", same_day)
    assert not same_source(value, "episodic", "Tom", same_day)
    assert not same_source(value, "episodic", None, same_day)
    assert not same_source(value, "episodic", "Maya", next_day)
    assert same_source(value, "semantic", "Maya", next_day)
    assert same_source({"created_at": value["created_at"]}, "semantic", None, next_day)
    assert same_source({"created_at": value["created_at"]}, "semantic", "Maya", next_day)
    assert not same_source({"created_at": value["created_at"]}, "episodic", "Maya", same_day)


async def test_dedupe_keeps_different_speakers_and_days_apart(store):
    text = "Ha, same here."
    first = await memory.save_memory(store, "u", "episodic", text, speaker="Maya", now=day(2023, 5, 8))
    other = await memory.save_memory(store, "u", "episodic", text, speaker="Tom", now=day(2023, 5, 8))
    later = await memory.save_memory(store, "u", "episodic", text, speaker="Maya", now=day(2023, 5, 20))
    again = await memory.save_memory(
        store, "u", "episodic", text, speaker="Maya", now=day(2023, 5, 20) + timedelta(hours=3)
    )
    assert [r["action"] for r in (first, other, later, again)] == ["created"] * 3 + ["updated"]
    assert again["id"] == later["id"] and first["speaker"] == "Maya"
    with pytest.raises(ValueError, match="speaker"):
        await memory.save_memory(store, "u", "episodic", "x", speaker="")


# ---------------------------------------------------------------- hybrid recall (in-process)


async def _conversation(store) -> dict[str, str]:
    ids = {}
    texts = [
        ("Maya: Tell me about it.", day(2023, 4, 2)),
        ("Maya: I know what you mean.", day(2023, 4, 3)),
        ("Maya: I started at Oakwave as a junior designer, the commute is long.", day(2023, 4, 4)),
        ("Tom: The weather has been so grey lately.", day(2023, 5, 9)),
        ("Maya: We picked up a greyhound from the shelter on Saturday.", day(2023, 5, 10)),
    ]
    for text, at in texts:
        saved = await memory.record_chat_message(store, "u", "user", text, "t1", now=at)
        ids[text.split(":")[1].split()[1]] = saved["id"]
    return ids


async def test_keyword_signal_finds_a_rare_name_dense_ranks_low(store, monkeypatch):
    ids = await _conversation(store)
    query = "Where did Maya work at Oakwave?"
    monkeypatch.setenv("MEMORY_SEARCH", "dense")
    dense = await memory.recall(store, "u", query, "chat", top_k=5, scoring="plain", record_access=False)
    monkeypatch.setenv("MEMORY_SEARCH", "hybrid")
    monkeypatch.setenv("MEMORY_KEYWORD_WEIGHT", "1")
    keyword = await memory.recall(store, "u", query, "chat", top_k=5, scoring="plain", record_access=False)
    assert keyword[0]["id"] == ids["started"]
    assert keyword[0]["similarity"] == pytest.approx(next(r["similarity"] for r in dense if r["id"] == ids["started"]))
    monkeypatch.setenv("MEMORY_KEYWORD_WEIGHT", "0")
    monkeypatch.setenv("MEMORY_TIME_WEIGHT", "0")
    monkeypatch.setenv("MEMORY_NEIGHBOUR_WEIGHT", "0")
    same = await memory.recall(store, "u", query, "chat", top_k=5, scoring="plain", record_access=False)
    assert [r["id"] for r in same] == [r["id"] for r in dense]


async def test_a_date_in_the_query_lifts_what_was_written_then(store, monkeypatch):
    ids = await _conversation(store)
    monkeypatch.setenv("MEMORY_KEYWORD_WEIGHT", "0")
    query = "What was Maya up to in the week of 10 May 2023?"
    monkeypatch.setenv("MEMORY_TIME_WEIGHT", "0")
    without = await memory.recall(store, "u", query, "chat", top_k=5, scoring="plain", record_access=False, now=NOW)
    monkeypatch.setenv("MEMORY_TIME_WEIGHT", "2")
    with_dates = await memory.recall(store, "u", query, "chat", top_k=5, scoring="plain", record_access=False, now=NOW)
    assert {r["id"] for r in with_dates[:2]} == {ids["picked"], ids["weather"]}
    assert [r["id"] for r in without[:2]] != [r["id"] for r in with_dates[:2]]


async def test_the_week_after_an_event_lifts_what_the_person_did_then(store, monkeypatch):
    """The event is found by the rest of the query, then the named person's memories of the
    seven days after its day come first, however little their words share with the query."""
    monkeypatch.setenv("MEMORY_KEYWORD_WEIGHT", "0")
    turns = [
        ("Tom", "I had my first surf lesson today, so many waves.", day(2023, 5, 8) + timedelta(hours=10)),
        ("Maya", "My sister visited from Leeds.", day(2023, 5, 10)),
        ("Tom", "I repainted the kitchen a pale green.", day(2023, 5, 11)),
        ("Tom", "Another surf lesson next month, I hope the waves are smaller.", day(2023, 6, 20)),
        ("Tom", "I painted the hallway blue.", day(2023, 7, 2)),
    ]
    ids = {}
    for speaker, text, at in turns:
        saved = await memory.save_memory(store, "u", "episodic", text, speaker=speaker, now=at)
        ids[text] = saved["id"]
    query = "What did Tom do in the week after the first surf lesson?"
    found = await memory.recall(store, "u", query, "episodic", top_k=3, record_access=False, now=NOW)
    assert found[0]["id"] == ids["I repainted the kitchen a pale green."]
    monkeypatch.setenv("MEMORY_TIME_WEIGHT", "0")
    undated = await memory.recall(store, "u", query, "episodic", top_k=3, record_access=False, now=NOW)
    assert undated[0]["id"] == ids["I had my first surf lesson today, so many waves."]
    assert ids["I repainted the kitchen a pale green."] not in {r["id"] for r in undated[:2]}


def test_told_spans_count_back_from_when_a_message_was_written():
    thursday = datetime(2022, 3, 17, 15, tzinfo=UTC)

    def told(text: str) -> list[tuple[str, str]]:
        return [(a.date().isoformat(), b.date().isoformat()) for a, b in told_spans(text, thursday)]

    assert told("Yesterday I went bowling") == [("2022-03-16", "2022-03-17")]
    assert told("two days ago I hiked") == [("2022-03-15", "2022-03-16")]
    assert told("Last weekend we camped") == [("2022-03-12", "2022-03-14")]
    assert told("last Friday") == [("2022-03-11", "2022-03-12")]  # the one before, not tomorrow
    assert told("last Thursday") == [("2022-03-10", "2022-03-11")]  # a week ago, not today
    assert told("Last month was tough") == [("2022-02-01", "2022-03-01")]
    assert told("3 months ago") == [("2021-12-01", "2022-01-01")]
    assert told("I read it two weeks ago") == [("2022-02-27", "2022-03-08")]
    assert told("I love bowling, see you next week") == []
    day_window = (datetime(2022, 3, 16, tzinfo=UTC), datetime(2022, 3, 17, tzinfo=UTC))
    assert tells_of("Yesterday I went bowling", thursday, day_window)
    assert tells_of("Work was busy", datetime(2022, 3, 16, 9, tzinfo=UTC), day_window)  # written then
    assert not tells_of("Work was busy", thursday, day_window)
    assert not tells_of("Last month was tough", datetime(2022, 4, 2, tzinfo=UTC), day_window)  # a month for a day
    march = (datetime(2022, 3, 1, tzinfo=UTC), datetime(2022, 4, 1, tzinfo=UTC))
    assert tells_of("Last month was tough", datetime(2022, 4, 2, tzinfo=UTC), march)


async def test_a_message_telling_of_a_day_later_gets_that_days_bonus(store, monkeypatch):
    """ "What did Jo do on 16 March 2022?": Jo told of it the next day ("Yesterday I went
    bowling"), when nothing else was said on the 16th that answers it."""
    monkeypatch.setenv("MEMORY_KEYWORD_WEIGHT", "0")
    monkeypatch.setenv("MEMORY_NEIGHBOUR_WEIGHT", "0")
    said = [
        ("We went to the cinema with friends, such a fun evening out.", day(2022, 3, 10)),
        ("Work was so busy, I barely had lunch.", day(2022, 3, 16) + timedelta(hours=9)),
        ("Yesterday I went bowling with friends, such fun, two strikes!", day(2022, 3, 17) + timedelta(hours=10)),
        ("We spent the whole day hiking in the hills, what fun.", day(2022, 3, 20)),
        ("Last month was a fun one, lots of evenings out.", day(2022, 4, 2)),  # the whole month: no bonus
        ("Played a fun board game night with the neighbours.", day(2022, 4, 20)),
    ]
    ids = [
        (await memory.record_chat_message(store, "u", "user", text, "t", speaker="Jo", now=at))["id"]
        for text, at in said
    ]
    query = "What fun activity did Jo do on 16 March 2022?"
    found = await memory.recall(store, "u", query, "chat", top_k=6, record_access=False, now=NOW)
    assert found[0]["id"] == ids[2]  # told of that day, the day after
    last_month = next(r for r in found if r["id"] == ids[4])
    assert last_month["score"] < 0.5 + 1.0  # below the speaker and time bonuses: the whole month for a day, none
    monkeypatch.setattr("store.hybrid.tells_of", lambda text, written, window: window[0] <= written < window[1])
    dated_only = await memory.recall(store, "u", query, "chat", top_k=6, record_access=False, now=NOW)
    assert ids[2] not in [r["id"] for r in dated_only[:3]]


ACCIDENT_TALK = [
    ("John", "Hey Maria! Good to hear from you. How have you been?"),
    ("Maria", "Hey John! The kids were great. You will not believe what happened to us yesterday..."),
    ("John", "Oh no, what happened?"),
    ("Maria", "A car ran a red light and hit us, but thankfully everyone is okay."),
    ("John", "That's awful, I'm glad you're all fine."),
    ("Maria", "I got my car fixed at the garage, the mechanic was very kind."),
    ("Maria", "The roads here are so dangerous, accidents happen all the time."),
]


async def test_asked_when_a_neighbour_telling_the_time_comes_in_as_the_answer(store, monkeypatch):
    """ "When did Maria get in a car accident?": the hit tells what happened, the message before
    it when ("...what happened to us yesterday"); it comes in as the answer to a question does."""
    assert asks_when("When did Maria get in a car accident?") and asks_when("In which month did Jo move?")
    assert not asks_when("What did Maria do when the car broke down?")
    monkeypatch.setenv("MEMORY_KEYWORD_WEIGHT", "0")
    monkeypatch.setenv("MEMORY_ANSWER_WEIGHT", "0.95")
    at = day(2023, 6, 1) + timedelta(hours=9)
    ids = []
    for i, (who, text) in enumerate(ACCIDENT_TALK):
        thread, written = ("t", at + timedelta(minutes=i)) if i < 5 else (f"t{i}", at + timedelta(days=10 * i))
        ids.append((await memory.record_chat_message(store, "u", "user", text, thread, speaker=who, now=written))["id"])
    query = "When did Maria get in a car accident?"
    found = [r["id"] for r in await memory.recall(store, "u", query, "chat", top_k=4, record_access=False)]
    assert found.index(ids[1]) < found.index(ids[5]) and ids[3] in found[:2]
    monkeypatch.setattr("store.hybrid.asks_when", lambda query: False)
    found = [r["id"] for r in await memory.recall(store, "u", query, "chat", top_k=4, record_access=False)]
    assert found.index(ids[1]) > found.index(ids[5])


async def test_hybrid_recall_respects_the_role_filter(store):
    await memory.record_chat_message(store, "u", "user", "I love the Oakwave office", "t")
    answer = await memory.record_chat_message(store, "u", "assistant", "Oakwave sounds great", "t")
    results = await memory.recall(store, "u", "Oakwave", "chat", role="assistant", record_access=False)
    assert [r["id"] for r in results] == [answer["id"]]


async def test_a_speaker_named_in_the_query_lifts_what_they_said(store, monkeypatch):
    monkeypatch.setenv("MEMORY_KEYWORD_WEIGHT", "0")
    for text in ("The train was late again.", "I made soup.", "Pottery is messy.", "The weather is grey."):
        await memory.record_chat_message(store, "u", "user", text, "t")
    maya = await memory.record_chat_message(
        store, "u", "user", "I started a pottery class on Mondays.", "t", speaker="Maya"
    )
    tom = await memory.record_chat_message(
        store, "u", "assistant", "I started a pottery class on Tuesdays.", "t", speaker="Tom"
    )
    assert (maya["speaker"], tom["speaker"]) == ("Maya", "Tom")
    for name, wanted in (("Tom", tom), ("Maya", maya)):
        query = f"Which pottery class did {name} start?"
        results = await memory.recall(store, "u", query, "chat", top_k=2, record_access=False)
        assert results[0]["id"] == wanted["id"]
    monkeypatch.setenv("MEMORY_SPEAKER_WEIGHT", "0")
    plain = await memory.recall(store, "u", "Which pottery class did Maya start?", "chat", top_k=2, record_access=False)
    spoken = {r["speaker"] for r in plain}
    assert spoken == {"Maya", "Tom"} and abs(plain[0]["score"] - plain[1]["score"]) < 0.3


async def test_dedupe_never_replaces_a_different_turn_of_the_same_day(store):
    # Two different things one person said minutes apart, stored as "Name: words" the way a
    # conversation log is: vectors alike (cosine above the 0.9 threshold), words not.
    at = day(2023, 7, 10) + timedelta(hours=18)
    first = await memory.save_memory(
        store,
        "u",
        "episodic",
        "Melanie: Thanks, Caroline! This has been great for my mental health. I'm gonna keep it up.",
        speaker="Melanie",
        now=at,
    )
    later = await memory.save_memory(
        store,
        "u",
        "episodic",
        "Melanie: Caroline, thanks! Mental health is important to me, and it's made such an improvement!",
        speaker="Melanie",
        now=at + timedelta(minutes=3),
    )
    repeat = await memory.save_memory(
        store,
        "u",
        "episodic",
        "Melanie: thanks, Caroline - this has been great for my mental health. I'm gonna keep it up!",
        speaker="Melanie",
        now=at + timedelta(minutes=5),
    )
    assert [first["action"], later["action"], repeat["action"]] == ["created", "created", "updated"]
    assert repeat["id"] == first["id"]
    texts = sorted(item.value["text"] for item in await store.asearch(memory.namespace("u", "episodic"), limit=10))
    assert len(texts) == 2 and any("improvement" in text for text in texts)


def test_near_exact_repeats_only():
    assert near_exact("The user lives in Berlin.", "the user lives in Berlin")
    assert near_exact("Ha, same here.", "Ha same here!!")
    assert not near_exact(
        "Thanks, Caroline! This has been great for my mental health.", "Caroline, thanks! Mental health is important."
    )


SOURDOUGH = [
    ("Maya", "Did you ever get the sourdough starter going?", "t1"),
    ("Tom", "Yes! Three so far, and the last one finally came out right.", "t1"),
    ("Maya", "The weather has been so grey lately.", "t1"),
    ("Tom", "Work has been crazy this week.", "t1"),
    ("Maya", "I bought flour and yeast at the market.", "t2"),
    ("Tom", "The bakery on the corner closed down.", "t2"),
    ("Maya", "Bread prices went up again.", "t2"),
    ("Tom", "My starter for the quiz night was a disaster.", "t2"),
]


async def record_sourdough_chat(store) -> list[str]:
    """Maya's and Tom's messages (SOURDOUGH), a minute apart; their ids. The reply to Maya's
    question says nothing of its topic."""
    at = day(2023, 6, 1) + timedelta(hours=9)
    return [
        (
            await memory.record_chat_message(
                store,
                "u",
                "user" if who == "Maya" else "assistant",
                text,
                thread,
                speaker=who,
                now=at + timedelta(minutes=n),
            )
        )["id"]
        for n, (who, text, thread) in enumerate(SOURDOUGH)
    ]


async def test_a_reply_is_found_through_the_message_it_answers(store, monkeypatch):
    # The reply says nothing of the topic; the message before it (same thread) does. Recorded
    # without its exchange passage (the question and it), which alone would find it.
    monkeypatch.setattr("store.memory.write.exchange", lambda *args: None)
    monkeypatch.setenv("MEMORY_NEIGHBOUR_WEIGHT", "0.9")
    monkeypatch.setenv("MEMORY_ANSWER_WEIGHT", "0")
    written = await record_sourdough_chat(store)
    question = "Did the sourdough starter work out?"
    found = await memory.recall(store, "u", question, "chat", top_k=3, record_access=False)
    assert [r["id"] for r in found[:2]] == written[:2]
    monkeypatch.setenv("MEMORY_NEIGHBOUR_WEIGHT", "0")
    alone = await memory.recall(store, "u", question, "chat", top_k=3, record_access=False)
    assert written[1] not in [r["id"] for r in alone[:2]]


async def test_the_reply_to_a_question_comes_in_at_the_answer_weight(store, monkeypatch):
    """Chat messages carry their speaker in a field, not a "Name:" prefix: the reply to a hit
    asking a question is read from it and scores MEMORY_ANSWER_WEIGHT of the hit's score, however
    little the other neighbours get."""
    monkeypatch.setattr("store.memory.write.exchange", lambda *args: None)  # the reply's own words alone
    monkeypatch.setenv("MEMORY_NEIGHBOUR_WEIGHT", "0.01")
    written = await record_sourdough_chat(store)
    question = "Did the sourdough starter work out?"
    monkeypatch.setenv("MEMORY_ANSWER_WEIGHT", "0.9")
    found = await memory.recall(store, "u", question, "chat", top_k=3, record_access=False)
    assert [r["id"] for r in found[:2]] == written[:2]
    monkeypatch.setenv("MEMORY_ANSWER_WEIGHT", "0")
    alone = await memory.recall(store, "u", question, "chat", top_k=3, record_access=False)
    assert written[1] not in [r["id"] for r in alone[:2]]


async def test_a_message_sent_in_parts_takes_one_place_among_the_first_results(store):
    at = day(2023, 6, 1) + timedelta(hours=9)
    parts = [
        ("Tom", "Guess what, I finally built the oak shelf for the hallway."),
        ("Tom", "Oak shelves are heavy, that shelf took two of us to hang."),
        ("Tom", "The shelf holds all my books now."),
    ]
    later = [
        ("Maya", "My brother built a pine shelf for his kitchen last year."),
        ("Tom", "The weather has been so grey lately."),
        ("Maya", "I baked sourdough bread this morning."),
        ("Tom", "Work has been crazy this week."),
    ]

    async def recalled(user: str, gap: timedelta) -> tuple[list[str], list[str]]:
        said = [(at + i * gap, who, text) for i, (who, text) in enumerate(parts)]
        said += [(at + timedelta(hours=1 + i), who, text) for i, (who, text) in enumerate(later)]
        written = [
            (await memory.record_chat_message(store, user, "user", text, "t", speaker=who, now=when))["id"]
            for when, who, text in said
        ]
        found = await memory.recall(store, user, "Who built a shelf?", "chat", top_k=3, record_access=False)
        return written, found

    written, found = await recalled("parts", timedelta(seconds=20))  # one message of Tom's, in parts
    ids = [r["id"] for r in found]
    assert len(set(ids) & set(written[:3])) == 1 and written[3] in ids
    [message] = [r for r in found if r["id"] in written[:3]]  # shown whole, its parts in order
    assert [part["id"] for part in message["parts"]] == written[:3]
    assert [part["text"] for part in message["parts"]] == [text for _, text in parts]
    assert all(part["speaker"] == "Tom" for part in message["parts"])
    assert "parts" not in next(r for r in found if r["id"] == written[3])
    written, found = await recalled("apart", timedelta(minutes=30))  # three messages of Tom's
    assert len({r["id"] for r in found} & set(written[:3])) >= 2
    assert not any("parts" in r for r in found)


def test_a_question_naming_two_people_favours_one_speaking_about_the_other():
    speakers = {"Maya": frozenset({"Maya"}), "Tom Reed": frozenset({"Tom Reed", "Tom", "Tommy"})}
    assert speaker_share({"speaker": "Maya", "text": "Maya: Tom, you should try bouldering."}, speakers) == 1.0
    assert speaker_share({"speaker": "Maya", "text": "Maya: Tommy, you should try bouldering."}, speakers) == 1.0
    assert speaker_share({"speaker": "Maya", "text": "Maya: I went bouldering with Tommy."}, speakers) == 1.0
    # small talk said to the other person is not about them: "Thanks Tom!", "How about you Tom?"
    assert speaker_share({"speaker": "Maya", "text": "Maya: Thanks Tom!"}, speakers) == 0.5
    assert speaker_share({"speaker": "Maya", "text": "Maya: How about you Tom?"}, speakers) == 0.5
    assert speaker_share({"speaker": "Maya", "text": "Maya: I tried bouldering."}, speakers) == 0.5
    assert speaker_share({"speaker": "Ben", "text": "Ben: Tom and Maya climb."}, speakers) == 0.0
    assert speaker_share({"speaker": "Maya", "text": "Maya: I tried bouldering."}, {"Maya": frozenset({"Maya"})}) == 1.0


async def test_two_named_people_rank_the_turn_where_one_advises_the_other(store, monkeypatch):
    monkeypatch.setenv("MEMORY_KEYWORD_WEIGHT", "0")
    at = day(2023, 6, 1) + timedelta(hours=9)
    turns = [
        ("Maya", "Maya: I think I should start running, my knees feel fine these days."),
        ("Tom", "Tom: Maya, get fitted at a proper store for running shoes before you buy any."),
        ("Maya", "Maya: Any advice on running shoes? Running shoes are so confusing."),
        ("Tom", "Tom: I bought new running shoes last month, they were expensive."),
    ]
    written = [
        await memory.record_chat_message(store, "u", "user", text, "t", speaker=speaker, now=at + timedelta(minutes=i))
        for i, (speaker, text) in enumerate(turns)
    ]
    found = await memory.recall(
        store, "u", "What advice did Tom give Maya about running shoes?", "chat", top_k=2, record_access=False
    )
    assert found[0]["id"] == written[1]["id"]


def test_the_named_persons_answer_next_to_the_others_question_keeps_its_own_bonus():
    from langgraph.store.base import Item

    from store.hybrid import Policy, Signals, rank

    def turn(key: str, speaker: str, text: str) -> Item:
        value = {"speaker": speaker, "text": f"{speaker}: {text}"}
        return Item(value=value, key=key, namespace=("x",), created_at=NOW, updated_at=NOW)

    question = turn("q", "Andrew", "Do you have any pictures of the new dog beds?")
    answer = turn("a", "Audrey", "Sure! Here's a pic. Super cozy and comfy.")  # says nothing of beds
    small_talk = turn("s", "Audrey", "Haha, classic.")  # next to her own hit
    hers = [turn(f"h{i}", "Audrey", f"My dogs loved the park, day {i}.") for i in range(3)]
    beds = turn("b", "Audrey", "Last week I got new beds for the dogs.")
    dense = [(question, 0.9), (beds, 0.8), *((h, 0.5) for h in hers), (answer, 0.1), (small_talk, 0.1)]
    signals = Signals("How does Audrey describe the new beds?", dense, [], names={"Audrey"})
    signals.neighbours = {"q": [answer], "b": [small_talk]}
    policy = Policy(keyword_weight=0.0, name_weight=0.5, name_bonus="speaker", neighbour_weight=0.55, neighbour_turns=2)
    old = [r.item.key for r in rank(signals, policy)]
    new = [r.item.key for r in rank(signals, replace(policy, speaker_field="speaker"))]
    # Andrew's question scores 1.0 (no bonus); Audrey's answer: 0.55 * 1.0 + her 0.5 = 1.05 now,
    # 0.55 * 1.0 before, behind her own messages (0.5 + their similarity).
    assert new.index("a") < new.index("q") and new.index("a") < 3
    assert old.index("a") > old.index("h0")
    # A neighbour by the same person as its hit gets a share of the whole score, not her bonus again.
    assert new.index("s") > new.index("h2")


def test_small_talk_earns_less_of_the_speaker_bonus_than_what_someone_did():
    """A question about Jo worded away from her words: every message of hers earns the speaker
    bonus, but "need a holiday" says less than "learning the ukulele ...", so it earns less of it."""
    from langgraph.store.base import Item

    from store.hybrid import Policy, Signals, rank, substance

    def turn(key: str, speaker: str, text: str) -> Item:
        value = {"speaker": speaker, "text": f"{speaker}: {text}"}
        return Item(value=value, key=key, namespace=("x",), created_at=NOW, updated_at=NOW)

    assert substance("Joanna Whitfield: need a holiday", {"Jo"}) == 0.4
    assert substance("Joanna Whitfield: How was your day Marcus?", {"Marcus"}) == 0.2
    assert substance("Joanna Whitfield: learning the ukulele, only 3 chords so far lol", {"Jo"}) == 1.0
    holiday = turn("h", "Joanna Whitfield", "need a holiday")
    ukulele = turn("u", "Joanna Whitfield", "learning the ukulele, only 3 chords so far lol")
    other = turn("o", "Marcus", "gym then bed")
    signals = Signals(
        "What hobbies has Jo picked up?",
        [(holiday, 0.6), (ukulele, 0.55), (other, 0.3)],
        [],
        names={"Jo", "Joanna Whitfield"},
        people={"Joanna Whitfield": frozenset({"Jo", "Joanna Whitfield"})},
    )
    policy = Policy(keyword_weight=0.0, name_weight=0.5, name_bonus="speaker")
    assert [r.item.key for r in rank(signals, policy)] == ["u", "h", "o"]
    # without the bonus the closer vector wins: the order above is the bonus's doing
    assert [r.item.key for r in rank(signals, replace(policy, name_weight=0.0))] == ["h", "u", "o"]


# ---------------------------------------------------------------- one pipeline, one backend


def test_one_pipeline_ranks_by_the_policy_it_is_given():
    from langgraph.store.base import Item

    from store.hybrid import Policy, Signals, rank

    def item(key: str, source: str, speaker: str, text: str) -> Item:
        value = {"source": source, "speaker": speaker, "text": text}
        return Item(value=value, key=key, namespace=("x",), created_at=NOW, updated_at=NOW)

    maya = item("a", "s1", "Maya", "hi there")
    about_maya = item("b", "s1", "Tom", "Tom: Maya said hi")
    other = item("c", "s2", "Tom", "Tom: bye")
    signals = Signals("what did Maya say", [(maya, 0.9), (about_maya, 0.8), (other, 0.1)], [], names={"Maya"})
    by_speaker = Policy(keyword_weight=0.0, name_weight=1.0, name_bonus="speaker")
    by_mention = Policy(keyword_weight=0.0, name_weight=1.0, name_bonus="mention")
    assert [r.item.key for r in rank(signals, by_speaker)] == ["a", "b", "c"]
    assert [r.item.key for r in rank(signals, by_mention)] == ["b", "a", "c"]
    per_document = Policy(keyword_weight=0.0, name_weight=1.0, document_field="source")
    assert [r.item.key for r in rank(signals, per_document)] == ["b", "c", "a"]  # one per source first


def test_each_store_gets_one_backend_chosen_once():
    from langgraph.store.memory import InMemoryStore

    from store.backend import InProcessBackend, backend_for

    first, second = InMemoryStore(), InMemoryStore()
    assert isinstance(backend_for(first), InProcessBackend)
    assert backend_for(first) is backend_for(first)
    assert backend_for(first) is not backend_for(second)
    assert backend_for(first).store is first


async def test_the_two_messages_after_a_hit_come_with_it_by_default(store, monkeypatch):
    # "How did Tom take it, and what did Maya add?": the news, the reply, and the answer to it.
    monkeypatch.setenv("MEMORY_NEIGHBOUR_WEIGHT", "0.9")  # the window's default is under test
    at = day(2023, 6, 1) + timedelta(hours=9)
    said = [
        ("Maya", "The weather has been so grey lately."),
        ("Maya", "I sprained my ankle playing five-a-side football, the doctor says six weeks off."),
        ("Tom", "Oh no, that sounds rough."),
        ("Maya", "Yeah, still processing it to be honest."),
        ("Tom", "Work has been crazy this week."),
        ("Maya", "I bought flour and yeast at the market."),
        ("Tom", "The bakery on the corner closed down."),
        ("Maya", "Bread prices went up again."),
    ]
    written = [
        await memory.record_chat_message(
            store, "u", "user" if who == "Maya" else "assistant", text, "t1", speaker=who, now=at + timedelta(minutes=i)
        )
        for i, (who, text) in enumerate(said)
    ]
    question = "What happened with the football injury?"
    found = await memory.recall(store, "u", question, "chat", top_k=4, record_access=False)
    # and the message before it, which Maya sent a minute before, as a part of the same message
    assert shown(found[:3]) == {w["id"] for w in written[:4]}
    monkeypatch.setenv("MEMORY_NEIGHBOUR_TURNS", "1")
    narrow = await memory.recall(store, "u", question, "chat", top_k=4, record_access=False)
    assert written[3]["id"] not in shown(narrow)


def shown(results: list[dict]) -> set[str]:
    """The messages recall results show: their own and the parts of a message sent in parts."""
    return {r["id"] for r in results} | {part["id"] for r in results for part in r.get("parts", [])}


def test_the_keyword_floor_lifts_only_keyword_hits_that_stand_out():
    """A keyword hit far ahead of the keyword list's tail climbs into the first results of the
    bonus-ranked list; a flat list of weak matches (a paraphrased question) changes nothing there."""
    fused = [(f"b{i}", 2.0 - i / 100) for i in range(30)]  # the bonus-ranked order
    clear = [("b20", 0.4), ("b25", 0.3)] + [(f"b{i}", 0.05) for i in range(FLOOR_TAIL)]
    flat = [(f"b{i}", 0.08 - i / 1000) for i in range(20, 20 + FLOOR_TAIL)]
    assert [key for key, _ in standouts(clear)] == ["b20", "b25"]
    assert standouts(flat) == []
    lifted = [key for key, _ in with_keyword_floor(fused, [key for key, _ in standouts(clear)], 0.3)]
    assert lifted.index("b20") < 10 and lifted.index("b25") < 15
    assert [key for key, _ in with_keyword_floor(fused, [key for key, _ in standouts(flat)], 0.3)] == [
        key for key, _ in fused
    ]


async def test_memories_written_together_from_one_turn_are_not_parts_of_one_message(store):
    """The memory writer saves what it learnt from one turn at once, with the turn's thread and
    speaker: separate memories, each its own result (only chat messages are sent in parts)."""
    at = day(2023, 6, 1) + timedelta(hours=9)
    texts = ["Tom built an oak shelf for the hallway.", "Tom's oak shelf holds all his books."]
    saved = [
        (
            await memory.save_memory(
                store, "w", "episodic", text, thread_id="t", speaker="Tom", now=at + timedelta(seconds=i)
            )
        )["id"]
        for i, text in enumerate(texts)
    ]
    found = await memory.recall(store, "w", "Who built a shelf?", "episodic", top_k=3, record_access=False)
    assert {r["id"] for r in found[:2]} == set(saved) and not any("parts" in r for r in found)
