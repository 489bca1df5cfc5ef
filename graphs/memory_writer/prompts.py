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
ordinary facts and events; 0.2 or less for trivia. Return empty lists when nothing qualifies."""
