"""Prompts of the small model utilities."""

TITLE_PROMPT = """Write a short title (at most 8 words, no quotes, no final period) for the
conversation below, in the conversation's language. It names the topic, not the assistant.

Conversation:
{conversation}"""

RELATED_PROMPT = """A user asked the question below and got the answer below. Suggest {count}
follow-up questions the user is likely to ask next: each short, self-contained, in the user's
language, and different from each other and from the original question.

Question: {question}

Answer: {answer}"""

TIP_PROMPT = """Give one practical tip for today ({today}) for a user of an AI assistant with
web search, knowledge bases and long-term memory{topic}. One or two sentences, concrete and
actionable, in English unless the topic is written in another language."""

SPACE_PROMPT = """A user starts a conversation with the first message below. Write a short title
for it (at most 8 words, no quotes, no final period, in the message's language) and pick the
space it belongs in from the list (by its label exactly as written), or null when none fits.

Spaces:
{spaces}

First message:
{message}"""

SPACE_AGENT_PROMPT = """A user starts a conversation with the first message below. Write a short
title for it (at most 8 words, no quotes, no final period, in the message's language), pick the
space it belongs in from the list (by its label exactly as written) and the agent of that space
best suited to answer (by its name exactly as written); null for what does not fit.

Spaces and their agents:
{spaces}

First message:
{message}"""

AUTO_AGENT_PROMPT = """Pick the agent best suited to answer the user's message below from the
agents of the space "{space}" (by its name exactly as written), or null when none fits.

Agents:
{agents}

Message:
{message}"""
