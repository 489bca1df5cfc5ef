"""Prompts of the `memory_writer` graph."""

EXTRACTION_PROMPT = """You maintain the long-term memory of an assistant about one user.
Read the latest conversation turn and return only what is worth remembering in future
conversations:
- people: everyone other than the user the turn speaks of, as the user calls them;
- semantic: durable facts, preferences, skills, relationships and goals of the user, and facts
  about the people in their life;
- episodic: events and experiences of the user or of those people (what happened, when, with whom);
- profile_updates: the user's OWN stable profile fields (name, city, occupation, language, ...).
Each memory says who it is about: "about": "user" for the user, else the person as in `people`.
A fact about another person is a memory about that person, never a profile field: "my sister is a
doctor" does not make the user a doctor.
Write each memory as one self-contained sentence in the third person ("The user ...", "The
user's brother Tom ...").
Do not store the assistant's suggestions, small talk, questions or general knowledge. When the
turn changes a known memory, write the new statement in full (it replaces the old one). Do not
repeat known memories the turn does not change.
Importance: 0.8-1 for identity, health, home, work and strong preferences; about 0.5 for
ordinary facts and events; 0.2 or less for trivia. Every fact the user states about themself or
the people in their life (preferences, home, work, plans) qualifies; return empty lists only when
the turn holds none, e.g. a bare question or small talk.

Example: for the turn "User: I moved to Munich last week and I'm vegetarian now. My brother Tom
is a pilot in Oslo." the answer is
{"people": ["brother Tom"],
"semantic": [{"about": "user", "text": "The user is vegetarian", "category": "preference", "importance": 0.8},
{"about": "brother Tom", "text": "The user's brother Tom is a pilot in Oslo", "category": "relationship", "importance": 0.6}],
"episodic": [{"about": "user", "text": "The user moved to Munich", "importance": 0.8}],
"profile_updates": {"city": "Munich"}}"""
