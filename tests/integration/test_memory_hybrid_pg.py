"""Hybrid memory search and weighted KB fusion on the real Postgres store: the project-owned
`memory_fulltext` table is written with each embedded memory and deleted with it, its BM25 ranks
a rare word the vectors miss, respects the role filter, user isolation and expiry, dates named in
the query lift what was written then, and KB hybrid
with weight 0 / 1 is exactly dense / keyword. `memory_speakers` follows writes, is rebuilt from the
stored memories and emptied by `forget_user`; the vector searches leave out the speakers a query
names (memory) and the names most chunks hold (KB, counted in `kb_fulltext`). A long chat message
has a vector per passage beside its text's, is found by its best one, once, and loses them all
when deleted."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bench import bench_sql
from store import knowledge, memory
from store.postgres import store
from tests.integration.conftest import sql
from tests.unit.test_memory_hybrid import LONG_NEWS, PET_TALK

pytestmark = pytest.mark.integration

TURNS = [
    ("Maya: Tell me about it.", datetime(2023, 4, 2, 9, tzinfo=UTC)),
    ("Maya: I know what you mean.", datetime(2023, 4, 3, 9, tzinfo=UTC)),
    ("Maya: I started at Oakwave as a junior designer, the commute is long.", datetime(2023, 4, 4, 9, tzinfo=UTC)),
    ("Tom: The weather has been so grey lately.", datetime(2023, 5, 9, 9, tzinfo=UTC)),
    ("Maya: We picked up a greyhound from the shelter on Saturday.", datetime(2023, 5, 10, 9, tzinfo=UTC)),
]


def fulltext_keys(pg_uri: str, schema: str) -> set[str]:
    return {row[0] for row in sql(pg_uri, f"SELECT key FROM {schema}.memory_fulltext")}


async def test_memory_fulltext_follows_writes_and_deletes(pg_schema, pg_uri):
    async with store() as s:
        chat = await memory.record_chat_message(s, "alice", "user", "I adore Oakwave", "t1")
        saved = await memory.save_memory(s, "alice", "episodic", "Went to the Oakwave party", speaker="alice")
        updated = await memory.save_memory(s, "alice", "episodic", "Went to the Oakwave party!", speaker="alice")
        assert updated["action"] == "updated" and updated["id"] == saved["id"]
        assert fulltext_keys(pg_uri, pg_schema) == {chat["id"], saved["id"]}
        tsv = sql(pg_uri, f"SELECT tsv::text FROM {pg_schema}.memory_fulltext WHERE key = %s", (saved["id"],))
        assert "'parti'" in tsv[0][0]
        await memory.delete_memory(s, "alice", saved["id"])
        assert fulltext_keys(pg_uri, pg_schema) == {chat["id"]}
        await memory.record_chat_message(s, "bob", "user", "Oakwave too", "t2")
        await memory.forget_user(s, "alice")
        remaining = sql(pg_uri, f"SELECT prefix FROM {pg_schema}.memory_fulltext")
        assert remaining == [("memories.bob.chat",)]


async def test_hybrid_recall_on_postgres(pg_schema, pg_uri, monkeypatch):
    async with store() as s:
        ids = {}
        for text, at in TURNS:
            ids[text] = (await memory.record_chat_message(s, "alice", "user", text, "t", now=at))["id"]
        other = await memory.record_chat_message(s, "bob", "user", "Maya: I started at Oakwave too", "t")
        answer = await memory.record_chat_message(s, "alice", "assistant", "Oakwave is a design studio", "t")
        query = "Where did Maya work at Oakwave?"

        monkeypatch.setenv("MEMORY_SEARCH", "dense")
        dense = await memory.recall(s, "alice", query, "chat", top_k=6, scoring="plain", record_access=False)
        monkeypatch.setenv("MEMORY_SEARCH", "hybrid")
        monkeypatch.setenv("MEMORY_KEYWORD_WEIGHT", "1")
        keyword = await memory.recall(s, "alice", query, "chat", top_k=6, scoring="plain", record_access=False)
        assert {r["id"] for r in keyword[:2]} == {ids[TURNS[2][0]], answer["id"]}
        assert other["id"] not in {r["id"] for r in keyword}  # another user's row never comes back
        by_id = {r["id"]: r["similarity"] for r in dense}
        assert keyword[0]["similarity"] == pytest.approx(by_id[keyword[0]["id"]])

        only_user = await memory.recall(
            s, "alice", query, "chat", role="user", top_k=6, scoring="plain", record_access=False
        )
        assert answer["id"] not in {r["id"] for r in only_user}
        assert only_user[0]["id"] == ids[TURNS[2][0]]

        monkeypatch.setenv("MEMORY_KEYWORD_WEIGHT", "0")
        monkeypatch.setenv("MEMORY_TIME_WEIGHT", "0")
        monkeypatch.setenv("MEMORY_NEIGHBOUR_WEIGHT", "0")  # no thread neighbours: the dense order
        same = await memory.recall(s, "alice", query, "chat", top_k=6, scoring="plain", record_access=False)
        assert [r["id"] for r in same] == [r["id"] for r in dense]

        monkeypatch.setenv("MEMORY_TIME_WEIGHT", "1")
        dated = await memory.recall(
            s,
            "alice",
            "What was Maya up to in the week of 10 May 2023?",
            "chat",
            top_k=3,
            scoring="plain",
            record_access=False,
            now=datetime(2023, 12, 1, tzinfo=UTC),
        )
        assert {r["id"] for r in dated[:2]} == {ids[TURNS[3][0]], ids[TURNS[4][0]]}


async def test_expired_memories_are_not_found_by_full_text(pg_schema, pg_uri, monkeypatch):
    monkeypatch.setenv("MEMORY_TTL_DAYS", "1")
    monkeypatch.setenv("MEMORY_KEYWORD_WEIGHT", "1")
    async with store() as s:
        old = await memory.save_memory(
            s, "alice", "episodic", "Visited Zanzibar", now=datetime.now(UTC) - timedelta(days=3)
        )
        fresh = await memory.save_memory(s, "alice", "episodic", "Planning Zanzibar again")
        found = await memory.recall(s, "alice", "Zanzibar", "episodic", record_access=False)
        assert [r["id"] for r in found] == [fresh["id"]]
        assert old["id"] in fulltext_keys(pg_uri, pg_schema)  # the row stays until the sweep


async def test_kb_hybrid_weights_zero_and_one_are_dense_and_keyword(pg_schema):
    async with store() as s:
        await knowledge.create_kb(s, "hyb")
        docs = [
            {"text": "The Oakwave studio designs furniture.", "source": "a"},
            {"text": "A greyhound was adopted from the shelter.", "source": "b"},
            {"text": "Furniture design studios in Portland.", "source": "c"},
        ]
        await knowledge.ingest_texts(s, "hyb", docs)
        query = "Oakwave furniture"
        dense = await knowledge.retrieve(s, "hyb", query, strategy="dense", top_k=3)
        keyword = await knowledge.retrieve(s, "hyb", query, strategy="keyword", top_k=3)
        zero = await knowledge.hybrid_search(s, "hyb", query, top_k=3, keyword_weight=0.0)
        one = await knowledge.hybrid_search(s, "hyb", query, top_k=3, keyword_weight=1.0)
        ids = lambda result: [r["id"] for r in result["retrieval_results"]]  # noqa: E731
        assert ids(zero) == ids(dense)
        assert ids(one)[: len(ids(keyword))] == ids(keyword)


async def test_explain_memory_search_shows_both_plans(pg_schema):
    async with store() as s:
        saved = await memory.save_memory(s, "alice", "episodic", "Visited the Oakwave studio")
        vector = await s.embeddings.aembed_query("Oakwave")
        plans = await bench_sql.explain_memory_search(
            s.sql, ".".join(memory.namespace("alice", "episodic")), vector, "Oakwave studio", "english"
        )
        assert "store_vectors" in plans["vector"] and "rows=1" in plans["vector"]
        assert "memory_fulltext" in plans["keyword"] and "Execution Time" in plans["keyword"]
        assert saved["action"] == "created"


CHAT = [
    ("Maya", "Haha, classic."),
    ("Maya", "Tell me about it."),
    ("Maya", "Same here, honestly."),
    ("Maya", "Oh no, Maya strikes again."),
    ("Tom", "The weather has been so grey lately."),
    ("Tom", "We finally adopted a kitten from the rescue, she hides under the sofa."),
    ("Maya", "We picked up a greyhound from the shelter on Saturday."),
]


async def test_speakers_are_listed_backfilled_and_forgotten(pg_schema, pg_uri):
    async with store() as s:
        for speaker, text in CHAT[:2] + CHAT[4:5]:
            await memory.record_chat_message(s, "alice", "user", f"{speaker}: {text}", "t", speaker=speaker)
        await memory.save_memory(s, "alice", "episodic", "Tom moved to Lisbon", speaker="Tom")
        await memory.record_chat_message(s, "bob", "user", "Hi", "t", speaker="Ann")
        chat_prefix = ".".join(memory.namespace("alice", "chat"))
        assert sorted(await s.sql.memory_speakers(chat_prefix)) == ["Maya", "Tom"]
        assert await s.sql.memory_speakers(".".join(memory.namespace("alice", "episodic"))) == ["Tom"]
    sql(pg_uri, f"DROP TABLE {pg_schema}.memory_speakers")  # as before the table existed:
    sql(pg_uri, f"DELETE FROM {pg_schema}.agent_schema_version WHERE component = 'store'")  # nor migrations
    async with store() as s:
        assert sorted(await s.sql.memory_speakers(chat_prefix)) == ["Maya", "Tom"]  # rebuilt from the rows
        await memory.forget_user(s, "alice")
        assert sql(pg_uri, f"SELECT prefix, speaker FROM {pg_schema}.memory_speakers") == [("memories.bob.chat", "Ann")]


async def test_vector_search_leaves_out_the_speakers_a_query_names(pg_schema, monkeypatch):
    async with store() as s:
        ids = {}
        for speaker, text in CHAT:
            saved = await memory.record_chat_message(s, "alice", "user", f"{speaker}: {text}", "t", speaker=speaker)
            ids[text] = saved["id"]
        searched: list[str] = []
        search = s.backend.vector_search

        async def spy(ns, query, *args, **kwargs):  # the vector searches
            searched.append(query)
            return await search(ns, query, *args, **kwargs)

        monkeypatch.setattr(s.backend, "vector_search", spy)
        query = "Which breed of dog did Maya bring home from the rescue center?"
        found = await memory.recall(s, "alice", query, "chat", top_k=3, record_access=False)
        assert searched == ["Which breed of dog did they bring home from the rescue center?"]
        assert found[0]["id"] == ids[CHAT[-1][1]]

        monkeypatch.setenv("MEMORY_SPEAKER_WEIGHT", "0")  # no speaker bonus: the name stays in the vector
        searched.clear()
        await memory.recall(s, "alice", query, "chat", top_k=3, record_access=False)
        assert searched == [query]


async def test_kb_counts_common_names_in_postgres_and_leaves_them_out_of_the_vector(pg_schema):
    async with store() as s:
        await knowledge.create_kb(s, "log")
        texts = [f"{speaker}: {text}" for speaker, text in CHAT] + ["Tom: Berlin was lovely in spring."]
        texts += ["Ann: My phone screen cracked again.", "Ann: I made soup.", "Ann: The train was late."]
        await knowledge.ingest_texts(s, "log", [{"text": t, "source": f"turn-{i}"} for i, t in enumerate(texts)])
        counts = await s.sql.kb_document_frequencies("log", ["Maya", "Tom", "Berlin", "I", "Nobody"], "english")
        assert counts == {"Maya": 5, "Tom": 3, "Berlin": 1, "Nobody": 0}  # "I" is a stop word
        entry = await knowledge.get_kb(s, "log")
        assert await knowledge.common_names(s, "log", entry, "Did Maya and Tom visit Berlin?") == {"Maya", "Tom"}
        found = await knowledge.retrieve(s, "log", "Which breed of dog did Maya bring home from the rescue center?")
        assert found["retrieval_results"][0]["source"] == "turn-6"


async def test_kb_hybrid_ranks_the_chunks_of_the_person_a_query_names_first(pg_schema, monkeypatch):
    """Maya's turn matches the words of the question best; with the name bonus Tom's turns, the
    person it asks about, come first."""
    async with store() as s:
        await knowledge.create_kb(s, "log")
        texts = [f"{speaker}: {text}" for speaker, text in CHAT]
        texts += ["Maya: Which pet would you adopt from the rescue? I adopted a kitten.", "Tom: I got a parrot."]
        await knowledge.ingest_texts(s, "log", [{"text": t, "source": f"turn-{i}"} for i, t in enumerate(texts)])
        query = "Which pet did Tom adopt from the rescue?"

        async def speakers(weight: str) -> list[str]:
            monkeypatch.setenv("KB_NAME_WEIGHT", weight)
            found = await knowledge.retrieve(s, "log", query, top_k=5)
            return [r["content"].split(":")[0] for r in found["retrieval_results"]]

        assert (await speakers("0"))[0] == "Maya"
        assert (await speakers("0.5"))[0] == "Tom"


SURF_WEEK = [
    ("Tom", "I had my first surf lesson today, so many waves.", datetime(2023, 5, 8, 10, tzinfo=UTC)),
    ("Maya", "My sister visited from Leeds.", datetime(2023, 5, 10, 9, tzinfo=UTC)),
    # six words beside little words: the whole speaker bonus (`store.hybrid.substance`)
    ("Tom", "I repainted the kitchen a pale green over the weekend.", datetime(2023, 5, 11, 9, tzinfo=UTC)),
    ("Tom", "Another surf lesson next month, I hope the waves are smaller.", datetime(2023, 6, 20, 9, tzinfo=UTC)),
    ("Tom", "I painted the hallway blue.", datetime(2023, 7, 2, 9, tzinfo=UTC)),
]
WEEK_AFTER = "What did Tom do in the week after the first surf lesson?"


async def test_the_week_after_an_event_on_postgres_memory_and_kb(pg_schema, monkeypatch):
    """The event is found by the rest of the query; the named person's memories (chunks) of the
    seven days after its day come first; without the time bonus the event itself does."""
    later = datetime(2023, 12, 1, tzinfo=UTC)
    async with store() as s:
        ids = {}
        for speaker, text, at in SURF_WEEK:
            saved = await memory.save_memory(s, "alice", "episodic", text, speaker=speaker, now=at)
            ids[text] = saved["id"]
        await knowledge.create_kb(s, "log")
        documents = [
            {"text": f"{speaker}: {text}", "source": f"turn-{i}", "date": at.isoformat()}
            for i, (speaker, text, at) in enumerate(SURF_WEEK)
        ]
        await knowledge.ingest_texts(s, "log", documents)

        async def first(time_weight: str) -> tuple[str, str]:
            monkeypatch.setenv("MEMORY_TIME_WEIGHT", time_weight)
            monkeypatch.setenv("KB_TIME_WEIGHT", time_weight)
            found = await memory.recall(s, "alice", WEEK_AFTER, "episodic", top_k=3, record_access=False, now=later)
            chunks = await knowledge.hybrid_search(s, "log", WEEK_AFTER, top_k=3, now=later)
            return found[0]["id"], chunks["retrieval_results"][0]["source"]

        assert await first("1") == (ids[SURF_WEEK[2][1]], "turn-2")
        assert await first("0") == (ids[SURF_WEEK[0][1]], "turn-0")


async def test_thread_neighbours_on_postgres_are_the_messages_just_before_and_after(pg_schema, monkeypatch):
    from store.backend import backend_for

    monkeypatch.setenv("MEMORY_NEIGHBOUR_WEIGHT", "0.9")
    at = datetime(2023, 6, 1, 9, tzinfo=UTC)
    async with store() as s:
        written = [
            await memory.record_chat_message(
                s, "nb", "user", f"message {i}", "t1" if i < 5 else "t2", speaker="Maya", now=at + timedelta(minutes=i)
            )
            for i in range(7)
        ]
        ids = [w["id"] for w in written]
        ns = memory.namespace("nb", "chat")
        found = await backend_for(s).neighbours(ns, [ids[2], ids[4], ids[5]], 1)
        assert {key: [item.key for item in items] for key, items in found.items()} == {
            ids[2]: [ids[1], ids[3]],
            ids[4]: [ids[3]],  # the last of its thread
            ids[5]: [ids[6]],  # another thread: message 4 is not its neighbour
        }
        wider = await backend_for(s).neighbours(ns, [ids[2]], 2)
        assert sorted(item.key for item in wider[ids[2]]) == sorted([ids[0], ids[1], ids[3], ids[4]])
        results = await memory.recall(s, "nb", "message 2", "chat", top_k=3, record_access=False)
        assert results and results[0]["id"] == ids[2]


async def test_a_reply_on_postgres_is_embedded_with_the_question_it_answers(pg_schema, pg_uri, monkeypatch):
    from store.backend import backend_for
    from store.dates import stamp
    from tests.unit.test_knowledge import SOURDOUGH
    from tests.unit.test_memory_hybrid import PAINTING_TALK

    monkeypatch.setenv("MEMORY_KEYWORD_WEIGHT", "0")  # the vectors alone
    monkeypatch.setenv("MEMORY_NEIGHBOUR_WEIGHT", "0")
    at = datetime(2023, 6, 1, 9, tzinfo=UTC)
    async with store() as s:
        said = [
            (await memory.record_chat_message(s, "ex", "user", text, "t", speaker=who, now=at + timedelta(minutes=i)))[
                "id"
            ]
            for i, (who, text) in enumerate(PAINTING_TALK)
        ]
        await memory.record_chat_message(s, "ex", "user", "Other thread", "t2", speaker="Melanie", now=at)
        last = await backend_for(s).thread_last(memory.namespace("ex", "chat"), "t", stamp(at + timedelta(minutes=2)))
        assert last is not None and last.key == said[1]  # its own thread's, the latest before the stamp
        fields = sql(pg_uri, f"SELECT field_name FROM {pg_schema}.store_vectors WHERE key = %s ORDER BY 1", (said[1],))
        assert [f for (f,) in fields] == [*(f"passages[*].{i}" for i in range(3)), "text"]  # 2 sentences + exchange
        found = await memory.recall(s, "ex", "What inspired Caroline's painting?", "chat", top_k=3, record_access=False)
        assert found[0]["id"] == said[1] and "passages" not in found[0]
        await knowledge.create_kb(s, "log")
        documents = [
            {"text": text, "source": f"turn-{i}", "date": at + timedelta(minutes=i)} for i, text in enumerate(SOURDOUGH)
        ]
        await knowledge.ingest_texts(s, "log", documents)
        fields = sql(
            pg_uri,
            f"SELECT v.field_name FROM {pg_schema}.store_vectors v JOIN {pg_schema}.store t USING (prefix, key) "
            "WHERE t.value->>'source' = 'turn-1' ORDER BY 1",
        )
        assert [f for (f,) in fields] == ["content", "exchange"]
        # ingested again alone (nothing before it), in other words: the old exchange vector goes
        await knowledge.ingest_texts(s, "log", [{**documents[1], "text": "Tom: No, it went mouldy."}])
        fields = sql(
            pg_uri,
            f"SELECT v.field_name FROM {pg_schema}.store_vectors v JOIN {pg_schema}.store t USING (prefix, key) "
            "WHERE t.value->>'source' = 'turn-1' ORDER BY 1",
        )
        assert [f for (f,) in fields] == ["content"]
        found = await knowledge.retrieve(s, "log", "mouldy", strategy="keyword", top_k=1)
        assert [r["source"] for r in found["retrieval_results"]] == ["turn-1"]


async def test_kb_neighbours_on_postgres_are_a_documents_chunks_and_the_documents_dated_next_to_it(pg_schema):
    from store.backend import backend_for

    at = datetime(2023, 6, 1, 9, tzinfo=UTC)
    long = " ".join(f"Paragraph {i} talks about topic number {i} at some length." for i in range(60))
    async with store() as s:
        await knowledge.create_kb(s, "mixed")
        await knowledge.ingest_texts(
            s,
            "mixed",
            [
                {"text": long, "source": "manual"},
                {"text": "The first dated note.", "source": "b-note", "date": at},
                {"text": "The second dated note.", "source": "a-note", "date": at + timedelta(minutes=1)},
                {"text": "The third dated note.", "source": "c-note", "date": at + timedelta(minutes=2)},
            ],
            chunk_size=200,
            chunk_overlap=0,
        )
        ns = knowledge.chunk_namespace("mixed")
        items = await s.asearch(ns, limit=1000)
        chunks = {(item.value["source"], item.value["position"]): item.key for item in items}
        assert ("manual", 11) in chunks  # positions past 9: ordered as numbers, not text
        keys = [chunks[("manual", 1)], chunks[("manual", 9)], chunks[("a-note", 0)], chunks[("manual", 0)]]
        found = await backend_for(s).kb_neighbours(ns, keys, 1)
        assert {key: [item.key for item in items] for key, items in found.items()} == {
            chunks[("manual", 1)]: [chunks[("manual", 0)], chunks[("manual", 2)]],
            chunks[("manual", 9)]: [chunks[("manual", 8)], chunks[("manual", 10)]],
            chunks[("a-note", 0)]: [chunks[("b-note", 0)], chunks[("c-note", 0)]],  # by date, not by name
            chunks[("manual", 0)]: [chunks[("manual", 1)]],  # undated: its own document only
        }


async def test_a_long_chat_message_has_a_vector_per_passage_and_is_found_by_its_best_one(
    pg_schema, pg_uri, monkeypatch
):
    monkeypatch.setenv("MEMORY_KEYWORD_WEIGHT", "0")  # the vectors alone
    monkeypatch.setenv("MEMORY_NEIGHBOUR_WEIGHT", "0")
    at = datetime(2023, 6, 1, 9, tzinfo=UTC)
    async with store() as s:
        written = [
            await memory.record_chat_message(
                s, "alice", "user", text, "t", speaker="Alice", now=at + timedelta(minutes=i)
            )
            for i, text in enumerate([LONG_NEWS, *PET_TALK])
        ]
        fields = sql(
            pg_uri, f"SELECT field_name FROM {pg_schema}.store_vectors WHERE key = %s ORDER BY 1", (written[0]["id"],)
        )
        assert [f for (f,) in fields] == [*(f"passages[*].{i}" for i in range(4)), "text"]
        assert sql(pg_uri, f"SELECT count(*) FROM {pg_schema}.store_vectors WHERE key = %s", (written[1]["id"],)) == [
            (1,)
        ]
        found = await memory.recall(s, "alice", "Did they get a new pet turtle?", "chat", top_k=4, record_access=False)
        assert found[0]["id"] == written[0]["id"] and "passages" not in found[0]
        assert len({r["id"] for r in found}) == 4  # each message once, whatever its number of vectors
        await memory.delete_memory(s, "alice", written[0]["id"])
        assert sql(pg_uri, f"SELECT count(*) FROM {pg_schema}.store_vectors WHERE key = %s", (written[0]["id"],)) == [
            (0,)
        ]


GIG_LOG = [
    ("Joanna Whitfield", "hiya! btw everyone calls me Jo"),
    ("Marcus", "Looks incredible Jo."),
    ("Joanna Whitfield", "I spent the whole weekend repainting the hallway a deep forest green"),
    ("Marcus", "How about you Jo?"),
    ("Joanna Whitfield", "my sister finally booked her flights to Lisbon for the summer holidays"),
    ("Joanna Whitfield", "started a pottery class on Tuesday evenings, my first bowl looks wonky"),
    ("Marcus", "Thanks Jo!"),
    ("Joanna Whitfield", "the landlord is finally fixing the boiler next week after three months"),
    ("Joanna Whitfield", "ran my first ten kilometre race on Sunday morning in the rain"),
    ("Marcus", "so the Roundhouse gig last night: Wet Leg played for two hours, you'd have loved it"),
    ("Joanna Whitfield", "adopted a rescue greyhound called Biscuit, he sleeps all day long"),
    ("Marcus", "Night Jo"),
    ("Marcus", "miss you Jo"),
    ("Marcus", "good luck Jo"),
    ("Marcus", "haha classic Jo"),
    ("Marcus", "congrats Jo"),
    ("Marcus", "ok Jo"),
    ("Marcus", "sure thing Jo"),
    ("Marcus", "we played cards all evening"),
]


async def test_kb_hybrid_keeps_what_keyword_search_ranks_first_among_the_name_bonus_hits(pg_schema, monkeypatch):
    """A question naming Jo by her nickname, worded like the other person's message that answers
    it: her own messages earn the name bonus and, without the keyword floor, fill the first three
    results; plain keyword search ranks the answer first, far ahead of the messages that only say
    "Jo" (said to her: no name bonus, and no word the question asks about), and hybrid keeps it
    among the three."""
    async with store() as s:
        await knowledge.create_kb(s, "gig")
        start = datetime(2024, 3, 1, 18, tzinfo=UTC)
        documents = [
            {"text": f"{speaker}: {text}", "source": f"turn-{i}", "date": start + timedelta(days=i)}
            for i, (speaker, text) in enumerate(GIG_LOG)
        ]
        await knowledge.ingest_texts(s, "gig", documents)
        query = "Which band played the Roundhouse gig Jo missed?"
        keyword = await knowledge.retrieve(s, "gig", query, strategy="keyword", top_k=3)
        assert keyword["retrieval_results"][0]["source"] == "turn-9"

        async def first_three(floor: str) -> list[str]:
            monkeypatch.setenv("KB_KEYWORD_FLOOR", floor)
            found = await knowledge.retrieve(s, "gig", query, strategy="hybrid", top_k=3)
            return [r["source"] for r in found["retrieval_results"]]

        assert "turn-9" not in await first_three("0")  # the name bonus alone
        assert "turn-9" in await first_three("0.3")
