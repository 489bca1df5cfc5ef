"""Prompts of the `memory_writer` graph.

The example shows the answer's shape with `<...>` placeholders, never words a real turn could
hold: a small model that copies it copies placeholders, which are never stored
(graphs/memory_writer/grounding.py drops anything holding one, or repeating the prompt).
"""

EXTRACTION_PROMPT = """You maintain the long-term memory of an assistant about one user.
Read the latest conversation turn and return only what the USER STATES about themself or the
people in their life that is worth remembering in future conversations:
- people: everyone other than the user the turn speaks of, as the user calls them;
- semantic: durable facts, preferences, skills, relationships and goals of the user, and facts
  about the people in their life;
- episodic: events and experiences of the user or of those people (what happened, when, with whom);
- profile_updates: the user's OWN stable profile fields (name, city, occupation, language, ...),
  each only when the user's own words state that very field: a city only when the user says they
  live there or moved there; a value of one thing never fills another field (the colour of their
  car is not their favourite colour).
Each memory says who it is about: "about": "user" for the user, else the person as in `people`.
A fact about another person is a memory about that person, never a profile field: "my sister is a
doctor" does not make the user a doctor.
Write each memory as one self-contained sentence in the third person, in the user's own words.
Never store: the user's questions or requests (asking about something is not a fact about the
user), anything the assistant says, results of calculations, general knowledge, small talk.
When the turn changes a known memory, write the new statement in full (it replaces the old one).
Do not repeat known memories the turn does not change.
Importance: 0.8-1 for identity, health, home, work and strong preferences; about 0.5 for
ordinary facts and events; 0.2 or less for trivia. Return empty lists when the user states
nothing about themself or their people, e.g. a bare question, a request or small talk.

Format of the answer. The example below is NOT data: <...> are placeholders, never facts about
this user; never copy it. For a turn "User: I moved to <place> last week. My <relative> <name> is
a <job>. What is <topic>?" the answer is
{"people": ["<relative> <name>"],
"semantic": [{"about": "<relative> <name>", "text": "The user's <relative> <name> is a <job>", "category": "relationship", "importance": 0.6}],
"episodic": [{"about": "user", "text": "The user moved to <place>", "importance": 0.8}],
"profile_updates": {"city": "<place>"}}
(the question "What is <topic>?" is not stored)."""
