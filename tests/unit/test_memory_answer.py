"""A question a recalled memory answers is answered from it, citing it (graphs/runtime/memory_answer.py),
in react with a scripted model: the check runs without tools only when a memory is very close,
its answer ends the turn, and a "no" or an invalid answer leaves the turn as it was."""

from __future__ import annotations

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from graphs.react.graph import builder
from graphs.runtime.context import Context
from graphs.runtime.memory_answer import NOT_ANSWERED_NOTE
from store import memory
from tests.fakes import ScriptedChatModel

MEMORIES = ("The user's favourite colour is teal", "The user lives in Lisbon")


def note_answer(answered: bool, answer: str = "", note: int = 1) -> dict:
    return {"tool_calls": [{"name": "NoteAnswer", "args": {"answered": answered, "answer": answer, "note": note}}]}


async def run(model_slot, store, responses, question, **context):
    for text in MEMORIES:
        await memory.open(store, "ana").save("semantic", text)
    model = ScriptedChatModel(responses=responses)
    model_slot["model"] = model
    graph = builder.compile(checkpointer=InMemorySaver(), store=store)
    config = {"configurable": {"thread_id": "t"}}
    events, streamed = [], []
    async for mode, chunk in graph.astream(
        {"messages": [HumanMessage(question)]},
        config,
        context=Context(model="scripted:test", user_id="ana", remember=False, **{"tools": ["calculator"], **context}),
        stream_mode=["custom", "messages"],
    ):
        (events if mode == "custom" else streamed).append(chunk)
    state = (await graph.aget_state(config)).values
    state["streamed"] = [message for message, _ in streamed]
    return state, [e for e in events if e["event"] == "memory_answer"], model


async def test_a_question_a_close_memory_answers_is_answered_from_it_citing_it(model_slot, store):
    state, checks, model = await run(
        model_slot, store, [note_answer(True, "You live in Lisbon.")], "Which city do I live in?"
    )
    answer = state["messages"][-1]
    assert (
        answer.content
        == 'You live in Lisbon.\n\n(From my notes of our earlier conversations: "The user lives in Lisbon")'
    )
    assert answer.response_metadata["memories_used"] == ["The user lives in Lisbon"]
    # A `messages` stream shows the answer, never the structured call's JSON.
    assert [m.text for m in state["streamed"]] == [answer.content]
    assert [(c["answered"], c["memory"]) for c in checks] == [(True, "The user lives in Lisbon")]
    # One short call: the notes and the question, no tool but the answer's schema, no tool block.
    [call] = model.calls
    assert call.tool_names == ["NoteAnswer"]
    asked = call.messages[-1].text
    assert "1. The user lives in Lisbon" in asked and asked.endswith("The user's question: Which city do I live in?")
    assert "teal" not in asked  # only memories close to the question are recalled


async def test_the_note_that_answers_is_the_one_cited(model_slot, store):
    state, _, _ = await run(
        model_slot,
        store,
        [note_answer(True, "Teal, and you live in Lisbon.", note=2)],
        "What is my favourite colour and which city do I live in?",
        recall_answer_similarity=0.3,
    )
    assert state["messages"][-1].response_metadata["memories_used"] == ["The user lives in Lisbon"]


async def test_when_the_memories_do_not_answer_the_turn_goes_on_without_the_memory_lookups(model_slot, store):
    calculation = {"tool_calls": [{"name": "calculator", "args": {"expression": "2+2"}, "id": "c1"}]}
    state, checks, model = await run(
        model_slot,
        store,
        [note_answer(False), calculation, "I don't know where your sister lives."],
        "Which city does my sister live in?",  # 0.49 close to "The user lives in Lisbon"
        recall_answer_similarity=0.4,
        tools=["calculator", "get_user_profile", "search_semantic_memory", "save_memory"],
    )
    assert [c["answered"] for c in checks] == [False]
    assert model.calls[0].tool_names == ["NoteAnswer"] and len(model.calls) == 3
    # The memories were searched with this question and do not answer it: no lookup finds more,
    # on any call of the turn; the note is still shown, saying it does not answer.
    for call in model.calls[1:]:
        assert sorted(call.tool_names) == ["calculator", "save_memory"]
        asked = call.messages[-1].text if call is model.calls[1] else call.messages[-3].text
        assert "- The user lives in Lisbon" in asked and asked.endswith(NOT_ANSWERED_NOTE)
    assert state["messages"][-1].content == "I don't know where your sister lives."
    assert "memories_used" not in state["messages"][-1].response_metadata


async def test_without_a_check_the_memory_lookups_stay_offered(model_slot, store):
    _, checks, model = await run(
        model_slot,
        store,
        ["You live in Lisbon."],
        "Which city do I live in?",
        recall_answer_similarity=0,
        tools=["get_user_profile", "save_memory"],
    )
    assert not checks and sorted(model.calls[0].tool_names) == ["get_user_profile", "save_memory"]
    assert not model.calls[0].messages[-1].text.endswith(NOT_ANSWERED_NOTE)


async def test_an_invalid_check_leaves_the_turn_as_it_was(model_slot, store):
    state, checks, model = await run(
        model_slot,
        store,
        [note_answer(True, ""), note_answer(True, "Lisbon", note=7), "You live in Lisbon."],
        "Which city do I live in?",
    )
    assert not checks and len(model.calls) == 3
    assert model.calls[2].tool_names == ["calculator"]
    assert state["messages"][-1].content == "You live in Lisbon."


async def test_a_check_that_contradicts_itself_is_asked_again(model_slot, store):
    """Seen from a real small model: "answered" false beside an answer from a valid note. It is
    asked again with the contradiction named; its second answer decides."""
    contradiction = note_answer(False, "You live in Lisbon.", note=1)
    state, checks, model = await run(
        model_slot, store, [contradiction, note_answer(True, "You live in Lisbon.")], "Which city do I live in?"
    )
    assert [(c["answered"], c["memory"]) for c in checks] == [(True, "The user lives in Lisbon")]
    assert len(model.calls) == 2 and model.calls[1].tool_names == ["NoteAnswer"]
    assert (
        "answered is false, but the answer 'You live in Lisbon.' comes from note 1" in model.calls[1].messages[-1].text
    )
    assert state["messages"][-1].response_metadata["memories_used"] == ["The user lives in Lisbon"]


async def test_a_check_that_contradicts_itself_twice_leaves_the_turn_as_it_was(model_slot, store):
    """Not taken as a "no": the memory lookups stay offered and the note says nothing against it."""
    contradiction = note_answer(False, "You live in Lisbon.", note=1)
    state, checks, model = await run(
        model_slot,
        store,
        [contradiction, contradiction, "You live in Lisbon."],
        "Which city do I live in?",
        tools=["calculator", "get_user_profile"],
    )
    assert not checks and len(model.calls) == 3
    assert sorted(model.calls[2].tool_names) == ["calculator", "get_user_profile"]
    assert not model.calls[2].messages[-1].text.endswith(NOT_ANSWERED_NOTE)
    assert state["messages"][-1].content == "You live in Lisbon."


def test_an_answer_saying_the_notes_are_silent_is_a_no():
    from graphs.runtime.memory_answer import NoteAnswer, gives_answer

    for answer in ("", "The notes do not say where your sister lives.", "I don't know.", "Unknown", "None of them."):
        assert not gives_answer(NoteAnswer(answered=False, answer=answer, note=1), 2), answer
    assert not gives_answer(NoteAnswer(answered=False, answer="You live in Lisbon.", note=0), 2)
    assert not gives_answer(NoteAnswer(answered=False, answer="You live in Lisbon.", note=3), 2)
    assert gives_answer(NoteAnswer(answered=False, answer="You work as a marine biologist.", note=1), 2)


async def test_no_check_below_the_similarity_or_when_turned_off_or_a_tool_is_forced(model_slot, store):
    for question, context in (
        ("What is the weather like in Paris?", {}),  # nothing close: no note, no check
        ("Forget that I live in Lisbon.", {}),  # a request about the memory, not a question
        ("Which city do I live in?", {"recall_answer_similarity": 0}),
        ("Which city do I live in?", {"recall_answer_similarity": 0.9}),
        ("Which city do I live in?", {"tool_choice": "calculator"}),
    ):
        state, checks, model = await run(model_slot, store, ["Answer."], question, **context)
        assert not checks and len(model.calls) == 1 and model.calls[0].tool_names == ["calculator"], (question, context)
        assert state["messages"][-1].content == "Answer."


async def test_a_chat_message_of_another_conversation_alone_starts_no_check(model_slot, store):
    """The user's own messages are shown in the note but answer nothing by being alike: the same
    question asked in another conversation is as close as can be."""
    await memory.record_chat_message(store, "ana", "user", "What is the weather like in Paris?", "t0")
    state, checks, model = await run(model_slot, store, ["Sunny."], "What is the weather like in Paris?")
    assert "- What is the weather like in Paris?" in model.calls[0].messages[-1].text  # in the note
    assert not checks and len(model.calls) == 1 and model.calls[0].tool_names == ["calculator"]


def test_only_a_question_is_checked_against_the_notes():
    from graphs.runtime.memory_answer import is_question

    for text in ("Which city do I live in?", "what's my job", "Tell me my favourite colour.", "My city? "):
        assert is_question(text), text
    for text in ("Forget that I live in Lisbon.", "Remember that I moved to Porto", "Update my city to Porto."):
        assert not is_question(text), text
