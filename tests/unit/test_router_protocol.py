"""The router's pure parts: the worker_name protocol, the heuristics, evidence merging, citations."""

from __future__ import annotations

import pytest

from graphs.router.citations import check_citations
from graphs.router.evidence import extractive_answer, merge_runs
from graphs.router.intent import guess_route, match_kb
from graphs.router.kb_match import KBMatch, kb_phrases, rank_kbs
from graphs.router.protocol import ParsedWorkerName, parse_worker_name, worker_name_for
from graphs.router.workers import worker_for

# The seed's table (003, 2.1 "compatibility"): empty, one, two and three segments.
PARSE_TABLE = [
    ("", ParsedWorkerName("", "", "retrieve_only")),
    ("   ", ParsedWorkerName("", "", "retrieve_only")),
    (None, ParsedWorkerName("", "", "retrieve_only")),
    ("hybrid_agent", ParsedWorkerName("", "hybrid_agent", "retrieve_only")),
    ("edu:hybrid_agent", ParsedWorkerName("edu", "hybrid_agent", "retrieve_only")),
    ("edu:hybrid_agent:retrieve_only", ParsedWorkerName("edu", "hybrid_agent", "retrieve_only")),
    (" movie : graph_agent : retrieve_only ", ParsedWorkerName("movie", "graph_agent", "retrieve_only")),
    ("edu:naive_rag_agent:", ParsedWorkerName("edu", "naive_rag_agent", "retrieve_only")),
]


@pytest.mark.parametrize("raw, parsed", PARSE_TABLE)
def test_parse_worker_name_accepts_the_seed_forms(raw, parsed):
    assert parse_worker_name(raw) == parsed


@pytest.mark.parametrize(
    "raw, message",
    [
        ("edu:hybrid_agent:generate", "unsupported agent_mode"),
        ("edu:hybrid_agent:retrieve_only:extra", "invalid worker_name format"),
        ("a:b:c:d:e", "invalid worker_name format"),
        (42, "must be a string"),
    ],
)
def test_parse_worker_name_rejects_everything_else(raw, message):
    with pytest.raises(ValueError, match=message):
        parse_worker_name(raw)


def test_worker_name_for_follows_the_v2_protocol():
    assert worker_name_for("edu", "hybrid_agent") == "edu:hybrid_agent:retrieve_only"
    assert worker_name_for("general", "hybrid_agent") == ""
    assert worker_name_for("", "hybrid_agent") == "default:hybrid_agent:retrieve_only"
    assert parse_worker_name(worker_name_for("edu", "keyword_agent")).agent_type == "keyword_agent"


def test_a_worker_name_names_a_knowledge_base_and_a_preset():
    first = worker_for("edu:hybrid_agent:retrieve_only")
    assert worker_for("edu:hybrid_agent") == first  # the two-segment form names the same worker
    assert (first.kb_prefix, first.agent_type, first.strategy) == ("edu", "hybrid_agent", "hybrid")
    assert worker_for("edu:keyword_agent:retrieve_only").strategy == "keyword"
    with pytest.raises(ValueError, match="Unknown agent_type 'movie_agent'.*fusion_agent.*graph_agent"):
        worker_for("edu:movie_agent:retrieve_only")
    with pytest.raises(ValueError, match="names no knowledge base"):
        worker_for("hybrid_agent")


KBS = [
    {"name": "garden", "description": "Greenhouse irrigation guide: drip lines and controller fault codes"},
    {"name": "hr", "description": "Staff handbook: holidays, leave requests and expenses"},
]


@pytest.mark.parametrize(
    "message, route, kb",
    [
        ("Hello!", "general", ""),
        ("What does the garden guide say about drip lines?", "retrieval", "garden"),
        ("Which controller fault codes does the greenhouse irrigation have?", "retrieval", "garden"),
        ("how do I file leave requests for holidays", "retrieval", "hr"),
        ("What is 17 * 23?", "react", ""),
        ("What is the square root of 7921?", "react", ""),
        ("what's 3 to the power of 12", "react", ""),
        ("How much is 17% of 2340?", "react", ""),
        ("what's the weather in Lisbon tomorrow", "react", ""),
        ("Research the history of lighthouses in depth and write a report", "deep_research", ""),
        ("Make a plan and then execute it: compare three laptops", "plan_execute", ""),
    ],
)
def test_heuristic_routes(message, route, kb):
    guess = guess_route(message, KBS)
    assert (guess.route, guess.kb) == (route, kb)
    assert guess.confidence >= 0.7 and guess.reason


def test_heuristics_are_unsure_without_a_cue():
    guess = guess_route("tell me something about otters", KBS)
    assert guess.confidence < 0.7
    weak = match_kb("any irrigation tips?", KBS)
    assert weak.kb == "garden" and weak.confidence < 0.7  # one shared word: ask the model


async def test_knowledge_bases_are_ranked_by_the_meaning_of_their_phrases():
    assert kb_phrases(KBS[1]) == [  # the name "hr" is too short to mean anything alone
        "Staff handbook: holidays, leave requests and expenses",
        "Staff handbook",
        "holidays",
        "leave requests",
        "expenses",
    ]
    # no word in common with either description: only the meaning says which one
    ranked = await rank_kbs("Who pays me back for the hotel on a work trip?", KBS)
    assert [match.name for match in ranked] == ["hr", "garden"]
    assert ranked[0].phrase == "expenses" and ranked[0].similarity > ranked[1].similarity + 0.1
    assert await rank_kbs("anything", []) == []


async def test_codes_in_a_message_or_a_name_never_make_a_knowledge_base_close():
    # an embedder finds two unrelated codes alike: "k48b6c1d568 ..." scored 0.43 against a
    # knowledge base named "kb_0df67dae" and was routed there
    kb = {"name": "kb_0df67dae", "description": "Greenhouse irrigation guide, staff handbook"}
    assert kb_phrases(kb)[0] == "Greenhouse irrigation guide, staff handbook"  # no name phrase left
    assert kb_phrases({"name": "hr_policies-2024", "description": ""}) == ["hr policies 2024"]
    for code in ("k48b6c1d568", "kde2359fd7f", "k3b0e4d8942"):
        [match] = await rank_kbs(f"{code} help me with my sums", [kb])
        assert match.similarity < 0.2, (code, match)


async def test_a_knowledge_base_with_nothing_to_compare_never_breaks_the_ranking():
    # a name that is only a code and no description: no phrase at all (it once raised ValueError
    # from max() of nothing, in every router run that could read it)
    bare = [{"name": "hr2024", "description": None}, {"name": "hr88693"}]
    assert [kb_phrases(kb) for kb in bare] == [[], []]
    assert await rank_kbs("What is our leave policy?", bare) == []
    ranked = await rank_kbs("Who pays me back for the hotel on a work trip?", [*bare, *KBS])
    assert [match.name for match in ranked] == ["hr", "garden"]
    assert guess_route("What is our leave policy?", bare, []).route != "retrieval"


def test_a_knowledge_base_close_in_meaning_is_chosen_only_when_clearly_first():
    message = "Who pays me back for the hotel on a work trip?"
    assert guess_route(message, KBS).confidence < 0.7  # words alone: unsure, the model would be asked
    close = [KBMatch("hr", 0.48, "expenses"), KBMatch("garden", 0.09, "drip lines")]
    guess = guess_route(message, KBS, close, 0.4)
    assert (guess.route, guess.kb) == ("retrieval", "hr") and guess.confidence >= 0.7
    assert "'expenses'" in guess.reason and "0.48" in guess.reason
    # below the threshold, or two knowledge bases about as close: the model decides
    assert guess_route(message, KBS, close, 0.5).confidence < 0.7
    tie = [KBMatch("hr", 0.48, "expenses"), KBMatch("garden", 0.41, "drip lines")]
    assert guess_route(message, KBS, tie, 0.4).confidence < 0.7
    # cues that decide the route keep deciding it
    assert guess_route("What is 17 * 23?", KBS, close, 0.4).route == "react"
    assert guess_route("Research expenses in depth", KBS, close, 0.4).route == "deep_research"


def _run(agent_type, ids):
    return {
        "kb": "garden",
        "agent_type": agent_type,
        "retrieval_results": [
            {"id": i, "content": f"text {i}", "source": f"/d/{i}.md", "title": i.upper(), "page": None, "section": None}
            for i in ids
        ],
    }


def test_merge_dedupes_by_chunk_id_and_fuses_by_rrf():
    sources = merge_runs([_run("dense_agent", ["a", "b", "c"]), _run("keyword_agent", ["c", "d", "a"])], top_k=3)
    assert [s["chunk_id"] for s in sources] == ["a", "c", "b"]  # found by both lists rank first
    assert [s["index"] for s in sources] == [1, 2, 3]
    assert sources[0]["found_by"] == ["dense_agent", "keyword_agent"]
    assert {"kb", "source", "title", "locator", "chunk_id"} <= set(sources[0])


def test_citation_check_removes_invented_numbers_and_flags_unknown_links():
    sources = [
        {"index": i, "source": src} for i, src in enumerate(["/d/a.md", "https://ok.example/page", "/d/c.md"], 1)
    ]
    text = "Fact one [1]. Fact two [2, 7]. Also [7]. See https://ok.example/page and https://evil.example/x."
    result = check_citations(text, sources)
    assert result["cited"] == [1, 2] and result["invalid"] == [7]
    assert result["unknown_urls"] == ["https://evil.example/x"]
    assert "[7]" not in result["text"] and "[2]" in result["text"] and "[1]" in result["text"]
    assert "https://evil.example/x (unverified" in result["text"]
    assert "https://ok.example/page and" in result["text"]
    assert "removed citation number(s) 7: only sources 1-3 were retrieved" in result["text"]
    clean = check_citations("All good [1][3].", sources)
    assert clean["invalid"] == [] and clean["text"] == "All good [1][3]."


def test_extractive_answer_lists_top_passages_with_sources():
    sources = merge_runs([_run("hybrid_agent", ["a", "b", "c", "d"])], top_k=4)
    text = extractive_answer(sources, "Extracted:", "nothing", limit=2)
    assert text.startswith("Extracted:") and "[1] A (/d/a.md)" in text and "[2] B" in text and "[3]" not in text
    assert extractive_answer([], "Extracted:", "nothing") == "nothing"


def test_graph_naive_rag_and_fusion_workers_exist():
    strategies = {
        agent_type: worker_for(f"movie:{agent_type}:retrieve_only").strategy
        for agent_type in ("graph_agent", "naive_rag_agent", "fusion_agent")
    }
    assert strategies == {"graph_agent": "graph", "naive_rag_agent": "dense", "fusion_agent": "fusion"}
