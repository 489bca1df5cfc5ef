"""The knowledge graph of a knowledge base on InMemoryStore: extraction (offline and by a scripted
model), entity resolution, the walk, graph and fusion retrieval with entity paths, consistency
after re-ingest and delete, your own triples, and documents (not chunks) competing."""

from __future__ import annotations

import pytest
from langgraph.store.memory import InMemoryStore

from store import knowledge
from store.backend import backend_for
from store.embeddings import get_embeddings
from store.knowledge.extract import ChunkText, ModelExtractor, entity_key, offline_extract
from store.knowledge.graph_search import _graph, entity_paths, personalized_pagerank
from store.knowledge.parse import prepare_text
from store.sentences import heading_title, sentences
from tests.fakes import ScriptedChatModel

# Two hops: the question names the company; the founder's page never names it.
DOCUMENTS = [
    {
        "source": "doc:company",
        "title": "Prajor Dynamics",
        "text": "Prajor Dynamics is a manufacturer of precision sensors. Prajor Dynamics was founded in 1964 "
        "by Edda Delkel. The company later opened a training school for machinists.",
    },
    {
        "source": "doc:founder",
        "title": "Edda Delkel",
        "text": "Edda Delkel (born 1931) is an entrepreneur and engineer. Edda Delkel was born in Morvenholm "
        "and studied chemistry at the Ostvel Institute. Colleagues remember a patient manager.",
    },
    *[
        {
            "source": f"doc:person-{i}",
            "title": name,
            "text": f"{name} (born 19{40 + i}) is an entrepreneur and engineer. {name} was born in {town} and "
            f"studied law at the {school} Institute. Colleagues remember a patient manager.",
        }
        for i, (name, town, school) in enumerate(
            [
                ("Tomas Vorkel", "Sarford", "Belmar"),
                ("Ingrid Halnor", "Zanburg", "Quelros"),
                ("Oskar Mokdel", "Ulstad", "Tovar"),
            ]
        )
    ],
]


def new_store() -> InMemoryStore:
    return InMemoryStore(index={"dims": 384, "embed": get_embeddings(), "fields": ["content"]})


async def ingested(**kwargs) -> InMemoryStore:
    store = new_store()
    await knowledge.create_kb(store, "kg")
    await knowledge.ingest_texts(store, "kg", DOCUMENTS, **kwargs)
    return store


def test_offline_extraction_finds_names_title_and_co_occurrences():
    extraction = offline_extract(
        ChunkText(
            "k",
            "Arquel Mills",
            "Arquel Mills makes barges. Colleagues remember Jarek Marost of the Bank of England. "
            "Marost moved to Sarford. Several workshops closed.",
        )
    )
    # the title is an entity; "Colleagues" and "Several" open sentences and name nothing;
    # the lone "Marost" resolves to the full name it shortens
    assert extraction.entities == ["Arquel Mills", "Jarek Marost", "Bank of England", "Sarford"]
    assert ("Jarek Marost", "co_occurs", "Bank of England") in extraction.triples
    assert ("Jarek Marost", "co_occurs", "Sarford") in extraction.triples
    assert ("Arquel Mills", "mentions", "Sarford") in extraction.triples


@pytest.mark.parametrize(
    ("text", "title", "entity"),
    [
        (
            "Teutberga\nTeutberga( died 875) was a queen of Lotharingia. She married Lothair II.",
            "Teutberga",
            "Teutberga",
        ),
        (
            "Lambert, Margrave of Tuscany\nLambert( died after 938) was the Margrave of Tuscany.",
            "Lambert, Margrave of Tuscany",
            "Lambert, Margrave of Tuscany",
        ),
        ("## Arquel Mills\n\nArquel Mills makes barges in Sarford.", "Arquel Mills", "Arquel Mills"),
    ],
)
def test_a_document_opening_with_a_heading_line_is_titled_by_it_and_never_merges_it(text, title, entity):
    # the heading line was read as the start of the first sentence: "Teutberga Teutberga" became
    # an entity and "Lambert" was lost (MuSiQue graph R@5 74.1 -> 64.8 with the title in the text)
    first, *_ = sentences(text)
    assert first == title
    document = prepare_text(text, "doc:1", None, "text", {"chunk_size": 800, "chunk_overlap": 120})
    assert document.title == title
    assert "\n" not in document.chunks[0].content.split(".")[0]  # the heading is the title, not text
    extraction = offline_extract(ChunkText("k", document.title, document.chunks[0].content))
    assert extraction.entities[0] == entity
    assert not [e for e in extraction.entities if e.count(title.split(",")[0]) > 1]


@pytest.mark.parametrize(
    "text",
    [
        "The treaty was signed in the city of\nParis by the two kings. It ended the war.",  # ends on "of"
        "These sensors were built by\nPrajor Dynamics in a small plant.",
        "Colleagues remember a patient manager and a fair one who\nwas liked by everyone.",
    ],
)
def test_a_line_break_inside_wrapped_prose_ends_no_sentence(text):
    assert sentences(text)[0].startswith(text.split("\n")[0]) and "\n" in sentences(text)[0]
    assert heading_title(text) is None


def test_entity_resolution_merges_surface_forms():
    forms = ["Lilu (mythology)", "lilu", "LILU", "The Lilu", "Lilu's"]
    assert {entity_key(form) for form in forms} == {"lilu"}
    assert entity_key("Café Zürich") == entity_key("Cafe Zurich")
    assert entity_key("Lilu") != entity_key("Lilith")


async def test_model_extraction_is_batched_bounded_cached_and_reports_progress():
    graph_call = {
        "name": "_BatchGraph",
        "args": {
            "chunks": [
                {
                    "index": 0,
                    "entities": ["Prajor Dynamics", "Edda Delkel"],
                    "triples": [{"head": "Edda Delkel", "relation": "founded", "tail": "Prajor Dynamics"}],
                },
                {"index": 1, "entities": ["Morvenholm"], "triples": []},
            ]
        },
    }
    model = ScriptedChatModel(responses=[{"tool_calls": [graph_call]}])
    extractor = ModelExtractor(model, batch_size=2, max_chunks=2)
    chunks = [
        ChunkText("a", "Prajor Dynamics", "Prajor Dynamics was founded by Edda Delkel."),
        ChunkText("b", "Morvenholm", "Morvenholm is a town."),
        ChunkText("c", "Sarford", "Sarford lies on the Belmar river."),  # over the bound: offline
    ]
    seen: list[tuple[int, int]] = []
    results = await extractor.extract(chunks, lambda done, total: seen.append((done, total)))
    assert len(model.calls) == 1  # one batch of two, the third chunk beyond max_chunks
    # the model's facts, and (as offline) the title entity mentions each entity of the chunk
    assert results[0].triples == [("Edda Delkel", "founded", "Prajor Dynamics")] + [
        ("Prajor Dynamics", "mentions", "Edda Delkel")
    ]
    assert results[1].entities == ["Morvenholm"]
    assert results[2].entities == offline_extract(chunks[2]).entities
    assert seen[-1] == (3, 3)
    again = await extractor.extract(chunks[:2])  # cached by chunk hash: no second call
    assert len(model.calls) == 1 and again[0].triples == results[0].triples


async def test_ingest_with_a_model_extractor_builds_the_graph_from_its_triples():
    store = new_store()
    await knowledge.create_kb(store, "kg")
    call = {
        "name": "_BatchGraph",
        "args": {
            "chunks": [
                {
                    "index": 0,
                    "entities": ["Zorbel"],
                    "triples": [{"head": "Zorbel", "relation": "invented", "tail": "the Quillon Engine"}],
                }
            ]
        },
    }
    extractor = ModelExtractor(ScriptedChatModel(responses=[{"tool_calls": [call]}]))
    await knowledge.ingest_text(store, "kg", "zorbel built an engine.", "doc:z", "Notes", extractor=extractor)
    data = await backend_for(store).graph.load("kg")
    assert ("zorbel", "invented", "quillon engine") in [(h, r, t) for _, h, r, t in data.relations]
    assert {"notes", "zorbel", "quillon engine"} <= set(data.names)


async def test_graph_walk_reaches_the_second_document_and_shows_the_path():
    store = await ingested()
    question = "In which town was the founder of Prajor Dynamics born?"
    graph = await knowledge.retrieve(store, "kg", question, strategy="graph", top_k=2)
    by_source = {r["source"]: r for r in graph["retrieval_results"]}
    assert set(by_source) == {"doc:company", "doc:founder"}
    assert by_source["doc:founder"]["path"] == ["Prajor Dynamics", "Edda Delkel"]
    dense = await knowledge.retrieve(store, "kg", question, strategy="dense", top_k=2)
    assert "doc:founder" not in {r["source"] for r in dense["retrieval_results"]}
    fusion = await knowledge.retrieve(store, "kg", question, strategy="fusion", top_k=3)
    assert "doc:founder" in {r["source"] for r in fusion["retrieval_results"]}
    assert set(fusion["retrieval_results"][0]["ranks"]) == {"dense", "keyword", "graph"}


async def test_personalized_pagerank_spreads_from_the_seed_along_edges():
    store = await ingested()
    graph = await _graph(store, "kg")
    seed = graph.index["prajor dynamics"]
    scores = personalized_pagerank(graph, {seed: 1.0})
    assert scores.sum() == pytest.approx(1.0, abs=1e-3)
    founder_chunk = next(
        i
        for key, i in graph.index.items()
        if key.startswith("chunk:")
        and i in graph.neighbours[graph.index["edda delkel"]]
        and i not in graph.neighbours[seed]
    )
    other_chunks = [graph.index[k] for k in graph.index if k.startswith("chunk:")]
    assert scores[founder_chunk] > min(scores[i] for i in other_chunks)
    paths = entity_paths(graph, [seed], {founder_chunk})
    assert paths[founder_chunk] == ["Prajor Dynamics", "Edda Delkel"]


async def test_reingest_and_delete_keep_the_graph_consistent():
    store = await ingested()
    graph = backend_for(store).graph
    assert "morvenholm" in (await graph.load("kg")).names
    changed = {**DOCUMENTS[1], "text": "Edda Delkel was born in Quarnby and studied law."}
    await knowledge.ingest_texts(store, "kg", [changed])
    names = (await graph.load("kg")).names
    assert "quarnby" in names and "morvenholm" not in names and "ostvel institute" not in names
    # fewer chunks on re-ingest: the stale chunk's links go with it
    await knowledge.ingest_texts(
        store,
        "kg",
        [{**DOCUMENTS[0], "text": " ".join(f"Filler{i} word{i}." for i in range(120))}],
        chunk_size=200,
        chunk_overlap=0,
    )
    await knowledge.ingest_texts(store, "kg", [{**DOCUMENTS[0], "text": "Prajor Dynamics makes sensors."}])
    data = await graph.load("kg")
    chunk_keys = {item.key for item in await store.asearch(("kb", "kg"), limit=100)}
    assert {chunk for chunk, _ in data.mentions} <= chunk_keys
    await knowledge.delete_kb(store, "kg")
    assert (await graph.load("kg")).names == {}


async def test_inserted_triples_link_entities_the_walk_crosses():
    store = await ingested()
    with pytest.raises(ValueError, match="three non-empty strings"):
        await knowledge.insert_triples(store, "kg", [("Tomas Vorkel", "mentored")])
    with pytest.raises(knowledge.KBUnknownError):
        await knowledge.insert_triples(store, "nope", [("a", "b", "c")])
    question = "Who did the mentor of Oskar Mokdel study with?"
    before = await knowledge.retrieve(store, "kg", question, strategy="graph", top_k=2)
    assert not any("Tomas Vorkel" in r["path"] for r in before["retrieval_results"])
    assert await knowledge.insert_triples(store, "kg", [("Tomas Vorkel", "mentored", "Oskar Mokdel")]) == {
        "entities": 2,
        "relations": 1,
    }
    after = await knowledge.retrieve(store, "kg", question, strategy="graph", top_k=2)
    found = {r["source"]: r["path"] for r in after["retrieval_results"]}
    assert found.get("doc:person-0") == ["Oskar Mokdel", "Tomas Vorkel"]


async def test_documents_not_chunks_compete_in_every_strategy():
    store = new_store()
    await knowledge.create_kb(store, "long")
    long_text = " ".join(f"Section {i}: the pressure valve of the pump is checked weekly." for i in range(60))
    await knowledge.ingest_texts(
        store,
        "long",
        [
            {"source": "doc:long", "title": "Pump manual", "text": long_text},
            {"source": "doc:short", "title": "Valve note", "text": "The pump's pressure valve is replaced yearly."},
        ],
        chunk_size=200,
        chunk_overlap=0,
    )
    for strategy in knowledge.STRATEGIES:
        result = await knowledge.retrieve(store, "long", "pressure valve of the pump", strategy=strategy, top_k=2)
        assert {r["source"] for r in result["retrieval_results"]} == {"doc:long", "doc:short"}, strategy


def test_offline_extraction_ends_names_at_punctuation_dates_and_lists():
    extraction = offline_extract(
        ChunkText(
            "k",
            "Leland",
            'Movies such as "Maximum Overdrive" (1986) and "We\'re the Millers" (2013) were shot in Leland. '
            "She is the daughter of fellow actors Martha Burns and Paul Gross. "
            "The album is by singer-songwriter M. Ward, a friend of Vincent O'Brien. "
            "Her novel was published by Two Dollar Radio in September 2010. "
            "He played for the Philadelphia Eagles (1941, 1945–1949) as an end.",
        )
    )
    names = set(extraction.entities)
    # each name whole, as the documents about them are titled
    assert {
        entity_key(title)
        for title in (
            "Maximum Overdrive",
            "We're the Millers",
            "Martha Burns",
            "Paul Gross",
            "M. Ward",
            "Two Dollar Radio",
            "Philadelphia Eagles",
        )
    } <= {entity_key(name) for name in names}
    # a date or a year is no part of a name; "Ward" after the initial opens no sentence
    assert not any(any(part in name for part in ("1986", "September", "1941")) for name in names)
    assert "Ward" not in names


async def test_the_page_about_a_linked_entity_ranks_above_pages_that_only_mention_it():
    store = new_store()
    await knowledge.create_kb(store, "people")
    haig = (
        "Sid Haig (born 1939) was an actor with a long career in cinema. He appeared in Spider Baby, Coffy, "
        "Foxy Brown, The Big Doll House, Jackie Brown, Galaxy of Terror and House of 1000 Corpses, working with "
        "Jack Hill, Pam Grier, Quentin Tarantino and Rob Zombie."
    )
    documents = [
        {"source": "doc:haig", "title": "Sid Haig", "text": haig},
        {"source": "doc:vic", "title": "Vic Darchinyan", "text": "Vic Darchinyan (born 1976) is a boxer from Armenia."},
        {
            "source": "doc:boxing",
            "title": "Boxing in Armenia",
            "text": "Boxing in Armenia grew popular. Vic Darchinyan won several titles for Armenia.",
        },
        *[
            {"source": f"doc:film-{i}", "title": film, "text": f"{film} is a film. Sid Haig played a part in {film}."}
            for i, film in enumerate(["Spider Baby", "Coffy", "Foxy Brown"])
        ],
    ]
    await knowledge.ingest_texts(store, "people", documents)
    question = "Who is the oldest, Sid Haig or Vic Darchinyan?"
    result = await knowledge.retrieve(store, "people", question, strategy="graph", top_k=6)
    order = [r["source"] for r in result["retrieval_results"]]
    assert order.index("doc:vic") < order.index("doc:boxing")
    assert all(order.index("doc:haig") < order.index(f"doc:film-{i}") for i in range(3))


async def test_model_extraction_that_fails_twice_falls_back_to_offline_and_is_not_cached():
    prose = {"content": "Here are the entities: Prajor Dynamics, Edda Delkel."}
    model = ScriptedChatModel(responses=[prose, prose, prose, prose])
    extractor = ModelExtractor(model, batch_size=2)
    chunks = [ChunkText("a", "Prajor Dynamics", "Prajor Dynamics was founded by Edda Delkel.")]
    results = await extractor.extract(chunks)
    assert len(model.calls) == 2  # asked again once, then offline
    assert results[0].entities == offline_extract(chunks[0]).entities
    assert extractor.failures == 1
    await extractor.extract(chunks)  # not cached: the model is asked again
    assert len(model.calls) == 4


async def test_model_extraction_asks_again_after_a_failed_call():
    call = {"name": "_BatchGraph", "args": {"chunks": [{"index": 0, "entities": ["Edda Delkel"], "triples": []}]}}
    model = ScriptedChatModel(responses=[{"content": "no idea"}, {"tool_calls": [call]}])
    extractor = ModelExtractor(model)
    chunk = ChunkText("a", "Prajor Dynamics", "Prajor Dynamics was founded by Edda Delkel.")
    [result] = await extractor.extract([chunk])
    assert len(model.calls) == 2 and extractor.failures == 0
    assert result.entities == ["Prajor Dynamics", "Edda Delkel"]
    assert result.triples == [("Prajor Dynamics", "mentions", "Edda Delkel")]


async def test_a_name_whose_chunks_do_not_match_the_question_does_not_steer_the_walk():
    # "Maya" speaks in every turn ("Maya: ..."), but the graph knows her only from one turn that
    # names her in passing; that turn matches nothing else of the question, so it stays out
    store = new_store()
    await knowledge.create_kb(store, "chat")
    turns = [
        {
            "source": "doc:answer",
            "title": "turn-a",
            "text": "Maya: I first worked as a designer at a print shop in Lyon.",
        },
        {
            "source": "doc:mention",
            "title": "turn-m",
            "text": "Tom: Yesterday I saw Maya at the market buying apples and pears, and we talked about the "
            "weather, the price of fruit and the new bakery on the corner.",
        },
        *[
            {
                "source": f"doc:t{i}",
                "title": f"turn-{i}",
                "text": f"Maya: the first work meeting of week {i} was about the budget.",
            }
            for i in range(120)
        ],
    ]
    await knowledge.ingest_texts(store, "chat", turns)
    question = "Where did Maya first work as a designer?"
    dense = await knowledge.retrieve(store, "chat", question, strategy="dense", top_k=1)
    assert dense["retrieval_results"][0]["source"] == "doc:answer"
    for strategy in ("graph", "fusion"):
        result = await knowledge.retrieve(store, "chat", question, strategy=strategy, top_k=1)
        assert result["retrieval_results"][0]["source"] == "doc:answer", strategy


async def test_a_speaker_the_graph_knows_from_one_turn_does_not_steer_the_walk():
    # every turn of Leo opens with his name, which the graph does not take for a name (it opens
    # a sentence); only Aisha's reply names him. His name is common in the chat, so it seeds nothing
    store = new_store()
    await knowledge.create_kb(store, "chat")
    topics = ["the weather", "a new bike", "the garden", "a concert", "the bakery", "a long walk", "the budget"]
    turns = [
        {"source": "doc:answer", "title": "t-a", "text": "Leo: I'm reading my way through every novel this year."},
        {"source": "doc:reply", "title": "t-r", "text": "Aisha: No way, that's amazing Leo!"},
        *[
            {"source": f"doc:t{i}", "title": f"t-{i}", "text": f"Leo: we talked about {topics[i % 7]} on day {i}."}
            for i in range(20)
        ],
    ]
    await knowledge.ingest_texts(store, "chat", turns)
    question = "What did Leo say about reading every novel this year?"
    for strategy in ("dense", "graph", "fusion"):
        result = await knowledge.retrieve(store, "chat", question, strategy=strategy, top_k=1)
        assert result["retrieval_results"][0]["source"] == "doc:answer", strategy
