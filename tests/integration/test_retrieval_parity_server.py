"""Retrieval by meaning through the HTTP API, the same on `langgraph dev` and on the production
stack (`--server aegra`): eight documents and five questions worded differently from them
(knowledge-base dense and hybrid search, the router's knowledge-base answer), three facts told in
one conversation and asked about in another (the memory recall note), three facts through the
store API. Each row prints its top 3 (`-s` shows the table), so the two servers' runs can be set
side by side; the assertions hold on both."""

from __future__ import annotations

import uuid

import httpx
import numpy as np
import pytest

from tests.integration.conftest import ADMIN_USER, API_KEYS, key, user

pytestmark = pytest.mark.integration

DOCUMENTS = {
    "sourdough.md": "# Sourdough starter\n\nFeed the culture of wild yeast and lactobacilli with equal weights of "
    "flour and water every day, and keep it at room temperature until it doubles in volume.\n",
    "bicycle.md": "# Bicycle maintenance\n\nLubricate the chain every few hundred kilometres, check the tyre "
    "pressure weekly and replace worn brake pads before they squeal.\n",
    "orchids.md": "# Orchid care\n\nWater orchids once a week, let the roots dry out between waterings, and keep "
    "the pots in bright but indirect light.\n",
    "tax.md": "# Filing a tax return\n\nSubmit the annual income declaration to the revenue office by 30 April; "
    "a late filing pays a penalty of five percent.\n",
    "insomnia.md": "# Insomnia\n\nAvoid caffeine after noon, keep the bedroom dark and cool, and go to bed at the "
    "same hour every night.\n",
    "venv.md": "# Python virtual environments\n\nA virtual environment isolates a project's packages: create one "
    "with python -m venv and activate it before installing anything.\n",
    "whales.md": "# Humpback whales\n\nHumpback whales migrate thousands of kilometres each year between cold "
    "feeding grounds and warm breeding waters.\n",
    "chess.md": "# The Sicilian Defence\n\nThe Sicilian Defence is a chess opening in which Black answers 1.e4 "
    "with c5, fighting for the centre asymmetrically.\n",
}
# question -> the document that answers it (few words in common)
QUESTIONS = {
    "How do I keep my bread leaven alive?": "sourdough.md",
    "What upkeep does my bike need?": "bicycle.md",
    "How often should I give my flowering houseplants a drink?": "orchids.md",
    "By when must I declare my earnings to the government?": "tax.md",
    "What can I do when I lie awake for hours?": "insomnia.md",
}
# fact told -> a question about it, worded differently
FACTS = {
    "My daughter Lena plays the cello in the school orchestra.": "What instrument does my kid practise?",
    "I'm allergic to shellfish, so no shrimp for me.": "Which seafood must I avoid eating?",
    "Last autumn we moved house to the city of Ghent in Belgium.": "Where is our new home?",
}


def row(server: str, path: str, query: str, top3: list[str]) -> None:
    """One line of the parity table (shown with `-s`)."""
    print(f"PARITY | {server} | {path} | {query} | {' ; '.join(top3)}")


@pytest.fixture(scope="module")
def parity_kb(dev_server) -> str:
    """The eight documents in a knowledge base, uploaded through /api/v1/kb by the administrator."""
    name = f"parity_{uuid.uuid4().hex[:8]}"
    files = [("files", (source, text.encode(), "text/markdown")) for source, text in DOCUMENTS.items()]
    with httpx.Client(base_url=dev_server.url, headers={"x-api-key": API_KEYS[ADMIN_USER]}, timeout=300) as http:
        created = http.post("/api/v1/kb", json={"name": name, "description": "household and hobby notes"})
        assert created.status_code == 201, created.text
        uploaded = http.post(f"/api/v1/kb/{name}/documents", files=files)
        assert uploaded.status_code == 200, uploaded.text
        entry = http.get(f"/api/v1/kb/{name}").json()
    assert entry["chunks"] == len(DOCUMENTS)
    return name


def cosine_order(query: str, texts: list[str]) -> list[int]:
    """Indexes of `texts` by cosine similarity to `query` under the package's embeddings, best first."""
    from store.embeddings import get_embeddings

    vectors = np.array(get_embeddings().embed_documents([query, *texts]))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return [int(i) for i in np.argsort(-(vectors[1:] @ vectors[0]), kind="stable")]


def test_kb_dense_and_hybrid_search_rank_the_answering_document_first(dev_server, parity_kb):
    with httpx.Client(base_url=dev_server.url, headers={"x-api-key": API_KEYS["alice"]}, timeout=120) as http:
        for question, source in QUESTIONS.items():
            for strategy in ("dense", "hybrid"):
                answer = http.post(
                    f"/api/v1/kb/{parity_kb}/search", json={"query": question, "strategy": strategy, "top_k": 3}
                )
                assert answer.status_code == 200, answer.text
                results = answer.json()["retrieval_results"]
                top3 = [r["source"] for r in results]
                row(dev_server.kind, f"kb {strategy}", question, top3)
                assert top3[0] == source, (strategy, question, results)
                assert all(r["score"] > 0 for r in results)
            # dense ranks every chunk by the embeddings' cosine similarity, as computed here
            everything = http.post(
                f"/api/v1/kb/{parity_kb}/search", json={"query": question, "strategy": "dense", "top_k": 8}
            ).json()["retrieval_results"]
            assert len(everything) == len(DOCUMENTS)
            expected = cosine_order(question, [r["content"] for r in everything])
            assert [everything[i]["source"] for i in expected[:3]] == [r["source"] for r in everything[:3]]


async def test_the_router_answers_from_the_answering_document_first(dev_server, openai_server, parity_kb):
    alice = dev_server.client("alice")
    # The scripted model's key is in the question the router searches with: the same on every
    # run (a random one would move the runners-up), unique in the session.
    k = "parity-router"
    openai_server.script(k, [{"content": "From your notes [1]."}] * len(QUESTIONS))
    for question, source in QUESTIONS.items():
        thread = await alice.threads.create()
        final = await alice.runs.wait(
            thread["thread_id"], "router", input=user(f"{question} ({k})"), context={"kb": parity_kb}
        )
        sources = [s["source"] for s in final["sources"]]
        row(dev_server.kind, "router kb answer", question, sources[:3])
        assert sources[0] == source, (question, final["sources"])


async def test_the_recall_note_brings_facts_told_in_another_conversation(dev_server, openai_server):
    admin = dev_server.client()  # acting for a fresh user of this test only
    person = f"user-{key()}"
    context = {"user_id": person, "recall_answer_similarity": 0}  # the note as the model sees it, no short check first
    told, asked = "parity-told", "parity-asked"  # the scripted model's keys, the same on every run
    openai_server.script(told, ["Noted."] * len(FACTS))
    openai_server.script(asked, ["Hello.", *(["Sure."] * len(FACTS))])
    first = await admin.threads.create()
    for index, fact in enumerate(FACTS):
        text = f"{fact} ({told})" if index == 0 else fact  # the scripted model's key, in the first message
        await admin.runs.wait(first["thread_id"], "react", input=user(text), context=context)
    second = await admin.threads.create()
    await admin.runs.wait(second["thread_id"], "react", input=user(f"Hi ({asked})"), context=context)
    for fact, question in FACTS.items():
        await admin.runs.wait(second["thread_id"], "react", input=user(question), context=context)
        note = (await admin.threads.get_state(second["thread_id"]))["values"]["turn_recall"]
        recalled = [line[2:] for line in note.splitlines() if line.startswith("- ")]
        row(dev_server.kind, "memory recall note", question, recalled[:3])
        assert recalled and recalled[0].startswith(fact), (question, note)


async def test_store_api_search_ranks_by_meaning(dev_server):
    admin = dev_server.client()  # may write any namespace (Aegra files it under the administrator's own)
    ns = ["parity", key()]
    for index, fact in enumerate(FACTS):
        await admin.store.put_item(ns, f"fact{index}", {"text": fact})
    for index, question in enumerate(FACTS.values()):
        found = (await admin.store.search_items(ns, query=question, limit=3))["items"]
        row(dev_server.kind, "store api search", question, [item["value"]["text"] for item in found])
        assert found[0]["key"] == f"fact{index}", (question, found)
        if dev_server.kind == "dev":  # Aegra's store API answers key, value and namespace only, no score
            scores = [item["score"] for item in found]
            assert all(score is not None for score in scores) and scores == sorted(scores, reverse=True)
