"""Prompts of the shared runtime (history summaries, used by every graph that keeps a thread)."""

SUMMARY_SYSTEM = "You write faithful, compact conversation summaries."

SUMMARY_PROMPT = """Summarize the conversation below for the assistant's own later use.
Keep user facts, goals and preferences, decisions made, tool results that still matter
(numbers, names, URLs) and open questions. Be concise; write in the conversation's language.

{previous}Conversation:
{conversation}"""
