"""Seed 000's space and agent pickers (the Qurio client's `title-and-space`, `title-space-agent`,
`agent-for-auto`): a conversation's title with the space it belongs in, and the agent that should
answer. The model's choices are constrained to the labels and names the client sent (a JSON-schema
enum of them); a choice that is not one of them comes back as null."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, create_model

from graphs.runtime.context import Context
from graphs.utilities.prompts import AUTO_AGENT_PROMPT, SPACE_AGENT_PROMPT, SPACE_PROMPT
from graphs.utilities.tasks import MAX_CONVERSATION_CHARS, ask, clean_title


def _one_of(names: list[str]) -> Any:
    """The type of a choice among `names`, or null (only null when there are none)."""
    if not names:
        return type(None)
    return Literal[tuple(dict.fromkeys(names))] | None  # type: ignore[valid-type]


def _line(name: str, description: str | None) -> str:
    """One option of a list in a prompt: its name and description on one line."""
    return " ".join((f"{name} - {description}" if description else name).split())


async def title_and_space(message: str, spaces: list[dict], context: Context) -> dict:
    """`{"title", "space"}`: a title for a conversation that starts with `message` and the space
    (one of `spaces`, each `{"label", "description"?, ...}`, returned as sent) it belongs in, or null."""
    labels = [space["label"] for space in spaces]
    schema = create_model(
        "TitleAndSpace",
        title=(str, Field(min_length=1, max_length=120)),
        space=(_one_of(labels), None),
    )
    listing = "\n".join(f"- {_line(space['label'], space.get('description'))}" for space in spaces)
    prompt = SPACE_PROMPT.format(spaces=listing, message=message[:MAX_CONVERSATION_CHARS])
    answer = (await ask(context, schema, prompt)).model_dump()
    return {
        "title": clean_title(answer["title"]),
        "space": next((space for space in spaces if space["label"] == answer["space"]), None),
    }


async def title_space_agent(message: str, spaces: list[dict], context: Context) -> dict:
    """`{"title", "spaceLabel", "agentName"}`: a title, the space (by label) and one of that
    space's agents (by name) for a conversation that starts with `message`; null where none fits."""
    labels = [space["label"] for space in spaces]
    names = [agent["name"] for space in spaces for agent in space.get("agents", [])]
    schema = create_model(
        "TitleSpaceAgent",
        title=(str, Field(min_length=1, max_length=120)),
        space=(_one_of(labels), None),
        agent=(_one_of(names), None),
    )
    listing = "\n".join(
        f"- {_line(space['label'], space.get('description'))}\n"
        + "".join(f"  - agent {_line(a['name'], a.get('description'))}\n" for a in space.get("agents", []))
        for space in spaces
    )
    prompt = SPACE_AGENT_PROMPT.format(spaces=listing, message=message[:MAX_CONVERSATION_CHARS])
    answer = (await ask(context, schema, prompt)).model_dump()
    space = next((s for s in spaces if s["label"] == answer["space"]), None)
    agent = answer["agent"]
    in_space = space is not None and agent in [a["name"] for a in space.get("agents", [])]
    return {
        "title": clean_title(answer["title"]),
        "spaceLabel": space["label"] if space else None,
        "agentName": agent if in_space else None,
    }


async def agent_for_auto(message: str, space: dict, context: Context) -> dict:
    """`{"agentName"}`: the agent of `space` (`{"label", "agents": [{"name", "description"?}]}`)
    best suited to answer `message`, or null (also when the space has no agents)."""
    names = [agent["name"] for agent in space.get("agents", [])]
    if not names:
        return {"agentName": None}
    schema = create_model("AgentForAuto", agent=(_one_of(names), None))
    listing = "\n".join(f"- {_line(a['name'], a.get('description'))}" for a in space.get("agents", []))
    prompt = AUTO_AGENT_PROMPT.format(space=space["label"], agents=listing, message=message[:MAX_CONVERSATION_CHARS])
    return {"agentName": (await ask(context, schema, prompt)).model_dump()["agent"]}
