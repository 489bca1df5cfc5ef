"""Prompt size of react's first model call as a user's memories grow, and the prompt prefix the
first calls of a router turn's graphs share.

    python -m bench.prompt_budget [--tokenize-url http://127.0.0.1:18080] [--memories N]

Two users ask the same questions in a new conversation: a new user (nothing stored) and one
with `--memories` memories of every kind (semantic facts, episodic events, chat messages from
other conversations, some of them long, and profile fields). For each question the bench runs
react's first model call (a scripted model that records its prompt, memory recall on) and prints
the prompt's tokens: in all, of them the part before the user's message (system prompt and the
tool block, the cacheable prefix) and the recalled-memory note, and the growth from the new user
to the rich one. With `--tokenize-url` (a llama.cpp server) the tokens are exact for its model
(its chat template, `/apply-template`, and its tokenizer, `/tokenize`); else characters / 4.

Then the shared prefix: the first model call of each graph a router turn can use (the router's
classification, react, the general route (react with the memory tools), the planner), as the
model server receives it (a structured call as a `json_schema` request: its schema in the system
message, no tools), rendered with the chat template; for each the prompt's tokens and the tokens
it shares from the start with the router's classification and with react's call, the part a
server's prefix cache computes once for the turn.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import uuid

import httpx
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_openai.chat_models.base import _convert_message_to_dict
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from graphs.plan_execute.context import PlanExecuteContext
from graphs.plan_execute.graph import builder as plan_builder
from graphs.plan_execute.plan import Plan
from graphs.react.graph import builder
from graphs.router.context import RouterContext
from graphs.router.graph import GENERAL_TOOLS, RouteChoice, classify
from graphs.runtime.context import Context
from graphs.runtime.memory_recall import RECALL_NOTE
from graphs.runtime.models import register_model_provider
from graphs.runtime.structured import _with_schema
from store import memory
from store.embeddings import get_embeddings
from tests.fakes import ScriptedChatModel

PROVIDER = "promptbench"
QUESTIONS = (
    "What is my favourite colour?",
    "Which city do I live in?",
    "What did I do last weekend?",
    "What did I write about the reef survey?",
)
FACTS = [
    "The user's favourite colour is teal",
    "The user lives in Lisbon",
    "The user works as a marine biologist",
    "The user has a cat named Pixel",
    "The user is allergic to peanuts",
    "The user prefers short answers",
    "The user's sister Ana is a dentist in Madrid",
    "The user plays the cello in an amateur orchestra",
    "The user drives a blue car",
    "The user is learning Japanese",
]
EVENTS = [
    "The user hiked the Sintra trail last weekend",
    "The user ran a half marathon in October",
    "The user moved from Porto to Lisbon in May",
    "The user's cat Pixel was ill last week",
    "The user gave a talk about coral reefs at a conference",
]
PROFILE = {
    "name": "Rita",
    "city": "Lisbon",
    "occupation": "marine biologist",
    "favourite_colour": "teal",
    "pet": "cat named Pixel",
    "language": "Portuguese",
    "instrument": "cello",
    "diet": "no peanuts",
}
LONG_MESSAGE = "Here is the reef survey I wrote, about my favourite reef near Lisbon, keep it in mind: " + ", ".join(
    f"transect {n} showed bleaching on about a third of the branching corals near the shore" for n in range(30)
)
"""One sentence (the in-memory store cannot index a long message's passages) of ~2,600 characters."""


async def seed(store: InMemoryStore, user: str, count: int) -> None:
    """`count` memories of every kind for `user`."""
    space = memory.open(store, user)
    for index in range(count):
        await space.save("semantic", f"{FACTS[index % len(FACTS)]} (note {index})")
        await space.save("episodic", f"{EVENTS[index % len(EVENTS)]} (entry {index})")
        text = LONG_MESSAGE if index % 5 == 0 else f"My favourite colour is teal, and I live in Lisbon (chat {index})"
        await space.record_chat_message("user", text, f"thread-{index}")
    await space.update_profile(PROFILE)


def count_tokens(prompt: dict, url: str | None) -> int:
    """Tokens of one chat request (`messages`, `tools`) with the server's template, or chars / 4."""
    if not url:
        return len(json.dumps(prompt)) // 4
    rendered = httpx.post(f"{url}/apply-template", json=prompt, timeout=60).json()["prompt"]
    return len(httpx.post(f"{url}/tokenize", json={"content": rendered}, timeout=60).json()["tokens"])


async def first_call(store: InMemoryStore, user: str, question: str, note_tokens: int) -> tuple[list, list]:
    """The messages and tool schemas of react's first model call for `question`."""
    model = ScriptedChatModel(responses=["Noted."])
    register_model_provider(PROVIDER, lambda name, **kw: model)
    graph = builder.compile(checkpointer=InMemorySaver(), store=store)
    context = Context(
        model=f"{PROVIDER}:x",
        user_id=user,
        remember=False,
        calculation="off",
        recall_max_tokens=note_tokens,
        recall_answer_similarity=0,  # the call with the note and the tools, not the answer from notes
    )
    await graph.ainvoke(
        {"messages": [HumanMessage(question)]}, {"configurable": {"thread_id": str(uuid.uuid4())}}, context=context
    )
    call = model.calls[0]
    return call.messages, call.tools


def measure(messages: list, tools: list, url: str | None) -> dict[str, int]:
    """Tokens of the whole prompt, of its part before the user's message, and of the note."""
    as_dicts = [_convert_message_to_dict(m) for m in messages]
    whole = count_tokens({"messages": as_dicts, "tools": tools}, url)
    system = [d for m, d in zip(messages, as_dicts, strict=True) if isinstance(m, SystemMessage)]
    prefix = count_tokens({"messages": [*system, {"role": "user", "content": ""}], "tools": tools}, url)
    asked = messages[-1].text
    head = RECALL_NOTE.split("{items}")[0]
    note = asked[asked.index(head) :] if head in asked else ""
    note_tokens = count_tokens({"messages": [{"role": "user", "content": note}]}, url) if note else 0
    empty = count_tokens({"messages": [{"role": "user", "content": ""}]}, url) if note else 0
    return {"prompt": whole, "prefix": prefix, "note": note_tokens - empty, "tools": len(tools)}


TURN_MESSAGE = "I earn 4,250 a month and spend 37% on rent. How much is left each year after rent?"
KBS = [{"name": "hr_policies", "description": "Staff handbook: vacation days, parental leave, expense rules"}]


def as_served(call, schema: type | None) -> tuple[list, list]:
    """A recorded call's messages and tools as an OpenAI-compatible server receives them: a
    structured call (`schema`) as a `json_schema` request, its schema in the system message."""
    if schema is None:
        return call.messages, call.tools
    return _with_schema(call.messages, schema), []


def render(messages: list, tools: list, url: str | None) -> list[int] | str:
    """The prompt as the model reads it: token ids from the server's template and tokenizer, or
    (no server) a ChatML rendering with the tools after the system text, as Qwen's template does."""
    as_dicts = [_convert_message_to_dict(m) for m in messages]
    if url:
        rendered = httpx.post(f"{url}/apply-template", json={"messages": as_dicts, "tools": tools}, timeout=60)
        prompt = rendered.json()["prompt"]
        return httpx.post(f"{url}/tokenize", json={"content": prompt}, timeout=60).json()["tokens"]
    parts = []
    for index, message in enumerate(as_dicts):
        text = str(message.get("content") or "")
        if index == 0 and tools:
            text += "\n\n# Tools\n" + "\n".join(json.dumps(tool) for tool in tools)
        parts.append(f"<|im_start|>{message['role']}\n{text}<|im_end|>\n")
    return "".join(parts)


def shared(a: list[int] | str, b: list[int] | str) -> int:
    """The length of the common start of two renderings (tokens; characters / 4 for text)."""
    length = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        length += 1
    return length // 4 if isinstance(a, str) else length


def size(prompt: list[int] | str) -> int:
    return len(prompt) // 4 if isinstance(prompt, str) else len(prompt)


async def first_calls(store: InMemoryStore, user: str) -> dict[str, tuple[list, list]]:
    """The first model call of each graph a router turn uses, for `TURN_MESSAGE`, as served."""
    calls: dict[str, tuple[list, list]] = {}
    model = ScriptedChatModel(responses=["not a route"] * 3)
    register_model_provider(PROVIDER, lambda name, **kw: model)
    try:
        await classify(TURN_MESSAGE, KBS, RouterContext(model=f"{PROVIDER}:x", user_id=user), {})
    except ValueError:
        pass  # the scripted answers are no route: only the prompt is wanted
    calls["router classify"] = as_served(model.calls[0], RouteChoice)
    for name, tools in (("react", None), ("general (react, memory tools)", GENERAL_TOOLS)):
        model = ScriptedChatModel(responses=["Noted."])
        register_model_provider(PROVIDER, lambda name, model=model, **kw: model)
        context = Context(
            model=f"{PROVIDER}:x",
            user_id=user,
            remember=False,
            calculation="off",
            tools=tools,
            recall_answer_similarity=0,
        )
        graph = builder.compile(checkpointer=InMemorySaver(), store=store)
        thread = {"configurable": {"thread_id": str(uuid.uuid4())}}
        await graph.ainvoke({"messages": [HumanMessage(TURN_MESSAGE)]}, thread, context=context)
        calls[name] = as_served(model.calls[0], None)
    model = ScriptedChatModel(responses=["no plan"] * 5)
    register_model_provider(PROVIDER, lambda name, **kw: model)
    plan_graph = plan_builder.compile(checkpointer=InMemorySaver(), store=store)
    plan_context = PlanExecuteContext(model=f"{PROVIDER}:x", user_id=user, remember=False)
    thread = {"configurable": {"thread_id": str(uuid.uuid4())}}
    await plan_graph.ainvoke({"messages": [HumanMessage(TURN_MESSAGE)]}, thread, context=plan_context)
    calls["plan_execute planner"] = as_served(model.calls[0], Plan)
    return calls


async def print_shared_prefix(store: InMemoryStore, user: str, url: str | None) -> None:
    """The first calls' sizes and the prefix they share with the classification and react's call."""
    rendered = {name: render(*call, url) for name, call in (await first_calls(store, user)).items()}
    print()
    print(f"First calls of a router turn ({TURN_MESSAGE!r}), tokens; shared = common prefix")
    print("| graph's first call | prompt | shared with router classify | shared with react |")
    print("|---|---|---|---|")
    for name, prompt in rendered.items():
        print(
            f"| {name} | {size(prompt):,} | {shared(prompt, rendered['router classify']):,} "
            f"| {shared(prompt, rendered['react']):,} |"
        )


async def main(url: str | None, count: int, note_tokens: int) -> None:
    embeddings = get_embeddings()
    dims = len(embeddings.embed_query("dimension probe"))
    store = InMemoryStore(index={"dims": dims, "embed": embeddings, "fields": ["text"]})
    rich = "rich-user"
    await seed(store, rich, count)
    print(
        f"react's first call, tokens ({'exact: ' + url if url else 'characters / 4'}); rich user: {count} of each kind"
    )
    print("| question | user | prompt | system + tools | recalled note | tools offered |")
    print("|---|---|---|---|---|---|")
    for question in QUESTIONS:
        rows = {}
        for who in ("new-user", rich):
            rows[who] = measure(*(await first_call(store, who, question, note_tokens)), url)
            row = rows[who]
            label = "new" if who == "new-user" else "rich"
            print(
                f"| {question} | {label} | {row['prompt']:,} | {row['prefix']:,} | {row['note']:,} | {row['tools']} |"
            )
        print(f"| | growth | {rows[rich]['prompt'] - rows['new-user']['prompt']:+,} | | | |")
    await print_shared_prefix(store, rich, url)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokenize-url", default=None, help="a llama.cpp server for exact token counts")
    parser.add_argument("--memories", type=int, default=30, help="memories of each kind for the rich user")
    parser.add_argument("--recall-max-tokens", type=int, default=300, help="the note's budget (recall_max_tokens)")
    args = parser.parse_args()
    asyncio.run(main(args.tokenize_url, args.memories, args.recall_max_tokens))
