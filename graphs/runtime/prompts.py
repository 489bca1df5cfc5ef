"""Prompts of the shared runtime (history summaries, used by every graph that keeps a thread)."""

SUMMARY_SYSTEM = "You write faithful, compact conversation summaries."

SUMMARY_PROMPT = """Summarize the conversation below for the assistant's own later use.
Keep user facts, goals and preferences, decisions made, tool results that still matter
(numbers, names, URLs) and open questions. Be concise; write in the conversation's language.

{previous}Conversation:
{conversation}"""

TOOL_CALL_RETRY = """Your tool call could not be used: {errors}.
Call the tool again through tool calling with arguments that match its schema, or answer in plain
text without a tool call."""

ANSWER_WITHOUT_TOOLS = """Your tool calls could not be used ({errors}). Answer my message now in plain
text, without calling any tool, from what you know and the notes you were given; say so if you
cannot."""

JSON_SCHEMA_PROMPT = """Answer with exactly one `{schema}` JSON object and nothing else. Its JSON schema
(field meanings in "description"):
{json_schema}"""

STRUCTURED_RETRY = """Your previous answer could not be used: {error}.
Answer again with exactly one `{schema}` JSON object that matches its schema, and nothing else."""

DEADLINE_MESSAGE = """I ran out of time for this request (the run's deadline of {deadline:g} s was
reached) before I could finish. Please ask again, perhaps with a narrower request."""

NOTE_ANSWER_SYSTEM = """You check whether notes about the user answer the user's question.
The notes come from earlier conversations with the user. Answer only from what a note states;
if no note states what the question asks, set answered to false."""

NOTE_ANSWER_PROMPT = """Notes about the user:
{notes}

The user's question: {question}"""
