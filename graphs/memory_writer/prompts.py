"""Prompts of the `memory_writer` graph."""

EXTRACTION_PROMPT = """You maintain the long-term memory of an assistant about one user.
Read the latest conversation turn and return only what is worth remembering in future
conversations:
- episodic: events and experiences of the user (what happened, when, with whom);
- semantic: durable facts, preferences, skills, relationships and goals of the user;
- profile_updates: stable profile fields the user stated (name, city, occupation, language, ...).
Write each memory as one self-contained sentence about "the user", in the third person.
Use what the user says about themself; do not store the assistant's suggestions, small talk,
questions or general knowledge. When the turn changes a known memory, write the new statement in
full (it replaces the old one). Do not repeat known memories the turn does not change.
Importance: 0.8-1 for identity, health, home, work and strong preferences; about 0.5 for
ordinary facts and events; 0.2 or less for trivia. Every fact the user states about themself
(preferences, home, work, people, plans) qualifies; return empty lists only when the turn holds
none, e.g. a bare question or small talk.

Example: for the turn "User: I moved to Munich last week and I'm vegetarian now." the answer is
{"semantic": [{"text": "The user is vegetarian", "category": "preference", "importance": 0.8}],
"episodic": [{"text": "The user moved to Munich", "importance": 0.8}],
"profile_updates": {"city": "Munich"}}"""
