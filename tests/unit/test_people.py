"""People rather than name strings (store/people.py, store/names.py): who a chat's messages are
said to, the names people go by, misspellings, and memory recall through the registry."""

import re
from datetime import UTC, datetime, timedelta

import pytest

from store import memory
from store.names import about, named, without_names
from store.people import introductions, learn, people, resolve, sounds_alike, vocatives

JO, MARCUS = "Joanna Whitfield", "Marcus"


@pytest.mark.parametrize(
    "text",
    [
        "How about you Jo?",
        "Thanks Jo!",
        "Thanks, Jo!",
        "Looks incredible Jo.",
        "Looks incredible Jo",
        "so proud of you Jo",
        "Miss you Jo 😘",
        "haha classic Jo",
        "Jo, look at this",
        "Jo!",
        "aww congrats! Jo",
        "Amazing Jo!",
        "Happy Birthday Jo!",
        "Good Job Jo",
    ],
)
def test_a_name_said_to_someone_is_not_about_them(text):
    assert not about(text, ["Jo"])
    assert vocatives(text) == ["Jo"]


@pytest.mark.parametrize(
    "text",
    [
        "I went climbing with Jo.",
        "Jo went home early.",
        "I told Jo about it",
        "Jo: I'm home",
        "we met Jo",
        "How did you come to have Jo?",
        "the new fantasy novel by Patrick Jo.",
        "my little brother Jo!",
        "I named it Jo.",
        "We took Scout, Jo, and Buddy to the park",
    ],
)
def test_a_name_the_sentence_is_about_counts(text):
    assert about(text, ["Jo"])
    assert vocatives(text) == []


@pytest.mark.parametrize(
    "text",
    ["Cool, see you then", "Plus, it was cheap", "Awesome, that sounds great!", "Woah, that's huge", "Agreed!"],
)
def test_a_word_opening_a_sentence_before_a_comma_is_no_name(text):
    assert vocatives(text) == []


def test_self_introductions():
    assert introductions("btw everyone calls me Jo, nobody says Joanna 😂") == ["Jo"]
    assert introductions("I'm Katie btw, kat_b92 is just my old gamer tag lol") == ["Katie"]
    assert introductions("call me Shiv, literally no one can spell Siobhan") == ["Shiv"]
    assert introductions("I'm so tired today") == []
    assert introductions("im OK thanks") == []
    assert introductions("same, I'm allergic to cats too") == []
    assert introductions("im Rae btw") == ["Rae"]


def test_the_registry_learns_introductions_and_the_names_someone_is_addressed_by():
    registry: dict = {}
    speakers = {JO, MARCUS}
    messages = [
        (JO, "btw everyone calls me Jo, nobody says Joanna 😂"),
        (MARCUS, "Looks incredible Jo."),
        (JO, "thanks Marc!"),
        (MARCUS, "How about you Jo?"),
        (MARCUS, "I went with Sam."),
    ]
    for speaker, text in messages:
        learn(registry, speaker, text, speakers)
    found = {person.name: person.aliases for person in people(speakers, registry)}
    # Jo: introduced, addressed twice, first name; Marc: addressed once only (one "Thanks Mom!"
    # does not rename anyone); Sam is no one's
    assert found == {JO: frozenset({"Jo", "Joanna"}), MARCUS: frozenset()}


def test_a_word_typed_with_letters_held_down_is_no_name():
    registry: dict = {}
    speakers = {JO, MARCUS}
    for _ in range(2):
        learn(registry, MARCUS, "Thaanks Jo!", speakers)
        learn(registry, MARCUS, "Awww Jo, so cute", speakers)
        learn(registry, JO, "Sooo glad, Ann!", speakers)  # a real name with a double letter stays one
    found = {person.name: person.aliases for person in people(speakers, registry)}
    assert found == {JO: frozenset({"Jo", "Joanna"}), MARCUS: frozenset({"Ann"})}
    # a registry learned before such words were told apart reads back without them
    learned = {"people": {JO: {"addressed": {"Thaanks": 3, "Jo": 2}}}}
    assert {p.name: p.aliases for p in people(speakers, learned)}[JO] == frozenset({"Jo", "Joanna"})


def test_misspellings_sound_alike_but_other_names_do_not():
    for word, name in [
        ("Joe", "Jo"),
        ("Katy", "Katie"),
        ("Dimitri", "Dmitri"),
        ("Pirya", "Priya"),
        ("Markus", "Marcus"),
    ]:
        assert sounds_alike(word, name), (word, name)
    for word, name in [("Sam", "Ham"), ("Tom", "Jo"), ("Ana", "Dima"), ("Jo", "Jo")]:
        assert not sounds_alike(word, name), (word, name)


def test_a_query_names_people_by_any_of_their_names():
    registry: dict = {"people": {JO: {"introduced": {"Jo": 1}}, "Hamid": {"addressed": {"Ham": 3}}}}
    persons = people({JO, "Hamid"}, registry)
    assert set(resolve("What did Jo say about the puppy?", persons)) == {JO}
    assert set(resolve("what was jo up to last week", persons)) == {JO}
    assert set(resolve("What did Joanna say?", persons)) == {JO}
    assert set(resolve("When was Joe's niece born?", persons)) == {JO}
    assert "Joe" in resolve("When was Joe's niece born?", persons)[JO]
    assert set(resolve("Which city have Jo and Hamed both visited?", persons)) == {JO, "Hamid"}
    # a word the messages hold is a name of its own, not a misspelling ("Sam" next to "Ham")
    assert resolve("Who is moving in with Sam?", persons, known_words={"sam"}) == {}
    assert resolve("What did Jo eat?", people({"Jo", "Joe"}, None)) == {"Jo": frozenset({"Jo"})}


async def test_recall_finds_a_speaker_by_the_name_everyone_calls_her(store):
    """Joanna's account name is in the records, everyone says Jo; Marcus's replies say "Jo" to
    her. Asking about Jo (or Joe) finds what Joanna said, not what was said to her."""
    start = datetime(2024, 3, 1, 18, 0, tzinfo=UTC)
    lines = [
        (MARCUS, "heyy"),
        (JO, "btw everyone calls me Jo, nobody says Joanna"),
        (MARCUS, "Looks incredible Jo."),
        (MARCUS, "How about you Jo?"),
        (JO, "we finally picked up the puppy from the shelter, his name is Biscuit"),
        (MARCUS, "Thanks Jo!"),
        (MARCUS, "so proud of you Jo"),
        (MARCUS, "my cousin got a puppy too, a beagle"),
        (MARCUS, "Night Jo"),
        (JO, "work was a lot today"),
    ]
    ids = []
    for minute, (speaker, text) in enumerate(lines):
        role = "user" if speaker == JO else "assistant"
        written = await memory.record_chat_message(
            store, "u", role, text, "t1", speaker=speaker, now=start + timedelta(minutes=minute)
        )
        ids.append(written["id"])
    puppy = ids[4]
    for question in ("Which dog did Jo bring home?", "Which dog did Joe bring home?"):
        found = await memory.recall(store, "u", question, "chat", top_k=3, record_access=False, now=start)
        assert found[0]["id"] == puppy, (question, [r["text"] for r in found])
    # the registry was learnt as the messages were recorded, and can be rebuilt from them
    rebuilt = await memory.rebuild_people(store, "u")
    assert rebuilt["people"][JO]["introduced"] == {"Jo": 1}
    assert rebuilt["people"][JO]["addressed"]["Jo"] >= 4
    assert not any(re.fullmatch("Jo", name) for name in rebuilt["people"].get(MARCUS, {}).get("addressed", {}))


async def test_a_rebuilt_registry_is_the_one_recorded(store):
    """Marcus greets Jo before she has written anything: recorded, he speaks to nobody known yet
    and the greeting counts for no one; the rebuilt registry (bench.locomo_eval --reuse) is the
    same, so a rebuild ranks as the load did."""
    start = datetime(2024, 3, 1, 18, 0, tzinfo=UTC)
    lines = [(MARCUS, "Hey Jojo, how was the trip?"), (JO, "great, thanks Marc!"), (MARCUS, "Welcome back Jojo")]
    for minute, (speaker, text) in enumerate(lines):
        await memory.record_chat_message(
            store, "u", "user", text, "t1", speaker=speaker, now=start + timedelta(minutes=minute)
        )
    recorded = (await store.aget(memory.namespace("u", "profile"), "people")).value
    assert recorded["people"][JO]["addressed"] == {"Jojo": 1}
    assert await memory.rebuild_people(store, "u") == recorded


def test_account_names_recorded_in_lower_case_count_as_written():
    assert named("What has kat_b92 tried lately?", ["kat_b92"]) == {"kat_b92"}
    assert named("Whose birthday did rlindqvist's family celebrate?", ["rlindqvist"]) == {"rlindqvist"}
    assert without_names("Whose birthday did rlindqvist's family celebrate?", ["rlindqvist"]) == (
        "Whose birthday did their family celebrate?"
    )
    # a capitalised name still needs its capital in a mixed-case query, a short lower-case one too
    assert named("What did the family celebrate?", ["Family"]) == set()
    assert named("What will Tom do?", ["will"]) == set()


async def test_a_knowledge_base_of_chat_logs_finds_a_speaker_by_the_name_everyone_calls_her(store):
    """The same chat as one document per message "Name: words": the KB learns who is who at
    ingest, so "Jo" and "Joe" find Joanna's message rather than the ones said to her."""
    from store import knowledge
    from store.knowledge import people as kb_people

    start = datetime(2024, 3, 1, 18, 0, tzinfo=UTC)
    lines = [
        (MARCUS, "heyy"),
        (JO, "btw everyone calls me Jo, nobody says Joanna"),
        (MARCUS, "Looks incredible Jo."),
        (MARCUS, "How about you Jo?"),
        (JO, "we finally picked up the puppy from the shelter, his name is Biscuit"),
        (MARCUS, "Thanks Jo!"),
        (MARCUS, "so proud of you Jo"),
        (MARCUS, "my cousin got a puppy too, a beagle"),
        (MARCUS, "Night Jo"),
        (JO, "work was a lot today"),
    ]
    await knowledge.create_kb(store, "chat", "a chat log")
    documents = [
        {"text": f"{speaker}: {text}", "source": f"turn:{i}", "date": start + timedelta(minutes=i)}
        for i, (speaker, text) in enumerate(lines)
    ]
    await knowledge.ingest_texts(store, "chat", documents)
    for question in ("Which dog did Jo bring home?", "Which dog did Joe bring home?"):
        found = await knowledge.retrieve(store, "chat", question, strategy="hybrid", top_k=3)
        assert found["retrieval_results"][0]["source"] == "turn:4", [r["content"] for r in found["retrieval_results"]]
    # a knowledge base of chat logs: graph and fusion rank as hybrid, without a walk
    handle = await knowledge.open(store, "chat")
    gathered = await handle.gather("Which dog did Jo bring home?", top_k=5, strategies=("hybrid", "graph", "fusion"))
    assert gathered.conversation and gathered.graph is None
    orders = {
        s: [r["id"] for r in knowledge.rank(gathered, s)["retrieval_results"]] for s in ("hybrid", "graph", "fusion")
    }
    assert orders["graph"] == orders["hybrid"] == orders["fusion"]
    alone = await handle.gather("Which dog did Jo bring home?", top_k=5, strategies=("graph",))
    assert [r["id"] for r in knowledge.rank(alone, "graph")["retrieval_results"]] == orders["hybrid"]
    again = knowledge.Gathered.from_data(gathered.as_data())
    assert again.conversation and again.signals.people == gathered.signals.people
    persons = {p.name: p.aliases for p in await kb_people.persons(store, "chat")}
    assert persons[JO] >= {"Jo", "Joanna"}
    assert (await kb_people.rebuild(store, "chat"))["people"][JO]["introduced"] == {"Jo": 1}
    await knowledge.delete_kb(store, "chat")
    assert await kb_people.registry(store, "chat") is None


FAQ = [
    "Q: How do I reset my password?\nA: Open Settings, then Security, then Reset password.\n"
    "Note: the link in the email expires after an hour.",
    "Q: Can I change my username?\nA: Yes, once a month, under Profile.",
    "Q: Where are invoices kept?\nA: Under Billing, one per month.\nQ1: Are they PDFs?\nA1: Yes.",
    "Q: Is there a mobile app?\nA: For iOS and Android.\nStep 1: install it.\nStep 2: sign in.",
    "Q: How do I delete my account?\nA: Write to support from the address you signed up with.",
]


def test_a_faq_is_not_a_chat_log():
    """ "Q:", "A:", "Note:", "Step 1:" open many lines of a FAQ but name nobody; a few "Name:
    words" lines in a document knowledge base do not make it a chat log either."""
    from store.people import learn_lines, recorded_speakers, speaker_like

    assert not any(speaker_like(p) for p in ("Q", "A", "Note", "Step 1", "Q1", "A1", "Answer", "Subject"))
    assert all(speaker_like(p) for p in (JO, MARCUS, "kat_b92", "Dr Okafor"))
    registry: dict = {}
    for text in FAQ:
        learn_lines(registry, text)
    assert recorded_speakers(registry) == set()
    # an interview quoted in a long document: its speakers' lines are a small part of it
    document: dict = {}
    prose = "\n".join(f"Paragraph {i} of the report on the harbour works." for i in range(20))
    learn_lines(document, prose + "\nMaya: we start in May.\nTom: and end in June.\n" * 2 + "Maya: on budget.\n")
    assert recorded_speakers(document) == set()
    log: dict = {}
    for speaker, text in [(MARCUS, "heyy"), (JO, "call me Jo"), (MARCUS, "ok Jo"), (JO, "lol")] * 2:
        learn_lines(log, f"{speaker}: {text}")
    assert recorded_speakers(log) == {JO, MARCUS}
    assert recorded_speakers({"speakers": {JO: 3, MARCUS: 4}}) == {JO, MARCUS}  # written before lines were counted


async def test_a_faq_knowledge_base_keeps_its_graph_and_fusion_rankings(store):
    """A knowledge base of FAQ pages is no conversation: graph and fusion are not ranked as hybrid."""
    from store import knowledge

    await knowledge.create_kb(store, "faq", "help pages")
    await knowledge.ingest_texts(store, "faq", [{"text": t, "source": f"faq:{i}"} for i, t in enumerate(FAQ)])
    handle = await knowledge.open(store, "faq")
    gathered = await handle.gather("How do I reset my password?", top_k=3, strategies=("hybrid", "graph", "fusion"))
    assert not gathered.conversation and gathered.graph is not None  # the walk ranks graph and fusion
    from store.knowledge.config import REGISTRY_NAMESPACE

    assert not (await store.aget(REGISTRY_NAMESPACE, "faq")).value.get("people")  # its searches read no people


@pytest.mark.parametrize(
    "text",
    [
        "Phew, glad it all worked out!",
        "Oof, that's tough.",
        "Ouch, bummer about the injury.",
        "Thnaks, Cal!",
        "Impressive!",
        "any good resources for learning Spanish?",
        "I love Harry Potter",
    ],
)
def test_interjections_languages_typos_and_the_last_part_of_a_name_address_no_one(text):
    assert [name for name in vocatives(text) if name != "Cal"] == []


def test_a_pets_name_is_no_introduction():
    assert introductions("Guess what, I got a puppy! Her name's Coco and she's adorable.") == []
    assert introductions("His name's Ned.") == []
    assert introductions("Name's Jo, nice to meet you") == ["Jo"]
