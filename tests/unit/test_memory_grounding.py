"""The memory writer stores only what the user states: what a small model extracted from real
turns (questions as facts, the prompt's own example, another attribute's value, a wrong
calculation, the assistant's words) is dropped before anything is written; each memory keeps the
chat messages it came from."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from graphs.memory_writer.extract import extract_and_save, prompt_texts
from graphs.memory_writer.grounding import Evidence, field_cues, in_the_users_voice, statements
from store import memory
from tests.fakes import ScriptedChatModel

OLD_PROMPT_EXAMPLE = "The user's brother Tom is a pilot in Oslo"


def extraction(**args) -> dict:
    return {"tool_calls": [{"name": "MemoryExtraction", "args": args}]}


async def stored(store, user_id: str) -> list[dict]:
    return [
        item.value
        for kind in memory.MEMORY_KINDS
        for item in await store.asearch(memory.namespace(user_id, kind), limit=50)
    ]


async def profile(store, user_id: str) -> dict:
    return (await memory.get_profile(store, user_id))["fields"]


async def test_a_question_is_never_stored_as_a_fact_about_the_user(store):
    """What the small model saved for "What is a hash map?": the question, importance 0.8."""
    model = ScriptedChatModel(
        responses=[
            extraction(
                semantic=[
                    {"text": "What is a hash map?", "category": "fact", "importance": 0.8},
                    {"text": "The user asked what a hash map is", "category": "other", "importance": 0.5},
                    {"text": "A hash map stores key-value pairs", "category": "fact", "importance": 0.5},
                ]
            )
        ]
    )
    turn = [HumanMessage("What is a hash map?"), AIMessage("A hash map stores key-value pairs by hashing keys.")]
    counts = await extract_and_save(store, "ann", turn, model, "t1")
    assert counts == {"created": 0, "updated": 0, "profile_fields": 0, "dropped": 3}
    assert await stored(store, "ann") == []


async def test_the_prompts_example_is_never_stored(store):
    """What the small model saved for a turn that had nothing of it: the example of its own
    prompt (brother Tom, the pilot in Oslo; the city Munich), and the new prompt's placeholders."""
    model = ScriptedChatModel(
        responses=[
            extraction(
                people=["brother Tom"],
                semantic=[
                    {"about": "brother Tom", "text": OLD_PROMPT_EXAMPLE, "category": "relationship"},
                    {
                        "about": "<relative> <name>",
                        "text": "The user's <relative> <name> is a <job>",
                        "category": "fact",
                    },
                ],
                episodic=[
                    {"text": "The user moved to Munich", "importance": 0.8},
                    {"text": "The user moved house last week", "importance": 0.6},
                ],
                profile_updates={"city": "Munich", "occupation": "<job>"},
            )
        ]
    )
    turn = [HumanMessage("I moved house last week."), AIMessage("Congratulations on the move!")]
    counts = await extract_and_save(store, "ben", turn, model, "t1")
    assert [v["text"] for v in await stored(store, "ben")] == ["The user moved house last week"]
    assert await profile(store, "ben") == {}
    # the placeholder job is given to the placeholder person by the extraction itself: not the user's
    assert counts["dropped"] == 4


def test_the_prompt_holds_no_example_that_could_pass_for_data():
    """The example and the schema's descriptions use placeholders only: the old example's words
    are gone, and a memory repeating a sentence of the prompt is caught even when the user's words
    would bear it out."""
    texts = " ".join(prompt_texts())
    for word in ("Tom", "Oslo", "Munich", "pilot", "vegetarian", "Alice", "Berlin", "Ana"):
        assert word not in texts
    evidence = Evidence.of(["I know that a fact about another person is a memory about that person."], prompt_texts())
    assert evidence.copies_prompt("A fact about another person is a memory about that person")
    assert not evidence.copies_prompt("The user knows about memories")


async def test_another_attributes_value_never_replaces_a_profile_field_or_a_fact(store):
    """The favourite colour went from teal to blue, the colour of the user's new car."""
    await memory.update_profile(store, "cai", {"favourite_colour": "teal"})
    await memory.save_memory(store, "cai", "semantic", "The user's favourite colour is teal", category="preference")
    model = ScriptedChatModel(
        responses=[
            extraction(
                semantic=[
                    {"text": "The user's favourite colour is blue", "category": "preference", "importance": 0.8},
                    {"text": "The user bought a new blue car", "category": "fact", "importance": 0.5},
                ],
                profile_updates={"favourite_colour": "blue", "favorite_color": "blue"},
            )
        ]
    )
    turn = [HumanMessage("I bought a new car yesterday, it's blue."), AIMessage("Enjoy your new car!")]
    counts = await extract_and_save(store, "cai", turn, model, "t1")
    assert await profile(store, "cai") == {"favourite_colour": "teal"}
    texts = sorted(v["text"] for v in await stored(store, "cai"))
    assert texts == ["The user bought a new blue car", "The user's favourite colour is teal"]
    assert counts == {"created": 1, "updated": 0, "profile_fields": 0, "dropped": 3}


async def test_the_same_attribute_stated_in_the_users_words_does_update(store):
    await memory.update_profile(store, "dee", {"favourite_colour": "teal", "city": "Porto"})
    model = ScriptedChatModel(responses=[extraction(profile_updates={"favourite_colour": "blue", "city": "Lisbon"})])
    turn = [HumanMessage("My favourite colour is blue these days, and I moved to Lisbon."), AIMessage("Noted!")]
    await extract_and_save(store, "dee", turn, model, "t1")
    assert await profile(store, "dee") == {"favourite_colour": "blue", "city": "Lisbon"}


async def test_a_city_named_in_a_question_is_not_the_users_city(store):
    model = ScriptedChatModel(
        responses=[
            extraction(
                semantic=[{"text": "The user lives in Lisbon", "category": "fact", "importance": 0.8}],
                profile_updates={"city": "Lisbon"},
            )
        ]
    )
    turn = [HumanMessage("Will it rain in Lisbon tomorrow?"), AIMessage("Light rain is expected in Lisbon.")]
    await extract_and_save(store, "eve", turn, model, "t1")
    assert await profile(store, "eve") == {} and await stored(store, "eve") == []


async def test_a_wrong_calculation_is_never_stored_as_profile_fields(store):
    """What the small model saved after answering a word problem wrongly (0 left each year)."""
    model = ScriptedChatModel(
        responses=[
            extraction(
                semantic=[
                    {"text": "The user earns 4,250 a month and spends 37% on rent", "category": "fact"},
                    {"text": "The user has 0 left each year after rent", "category": "fact"},
                    {"text": "The user's rent is 1607.50 a month", "category": "fact"},
                ],
                profile_updates={"monthly_rent": "1607.50", "yearly_savings": "0", "annual_income": "51000"},
            )
        ]
    )
    turn = [
        HumanMessage("I earn 4,250 a month and spend 37% on rent. How much is left each year after rent?"),
        AIMessage("After rent you have 1607.50 a month, so 0 left each year."),
    ]
    counts = await extract_and_save(store, "fay", turn, model, "t1")
    assert [v["text"] for v in await stored(store, "fay")] == ["The user earns 4,250 a month and spends 37% on rent"]
    assert await profile(store, "fay") == {}
    assert counts["dropped"] == 5


async def test_the_assistants_words_are_not_the_users_facts(store):
    model = ScriptedChatModel(
        responses=[
            extraction(
                semantic=[{"text": "The user is a software engineer in Berlin", "category": "fact"}],
                profile_updates={"occupation": "software engineer", "city": "Berlin"},
            )
        ]
    )
    turn = [HumanMessage("Thanks, that helps."), AIMessage("Glad to help! As a software engineer in Berlin ...")]
    await extract_and_save(store, "gus", turn, model, "t1")
    assert await stored(store, "gus") == [] and await profile(store, "gus") == {}


async def test_each_memory_keeps_the_turns_it_came_from(store):
    model = ScriptedChatModel(
        responses=[
            extraction(
                semantic=[{"text": "The user is allergic to peanuts", "category": "fact", "importance": 0.9}],
                profile_updates={"city": "Porto"},
            ),
            extraction(semantic=[{"text": "The user is allergic to peanuts.", "category": "fact"}]),
        ]
    )
    first = [HumanMessage("I live in Porto and I'm allergic to peanuts."), AIMessage("Noted.")]
    await extract_and_save(store, "hal", first, model, "t1", turn_ids=["m1", "m2"])
    [saved] = await stored(store, "hal")
    assert saved["turn_ids"] == ["m1", "m2"]
    profile_value = (await store.aget(memory.namespace("hal", "profile"), "profile")).value
    assert profile_value["field_turns"] == {"city": ["m1", "m2"]}

    again = [HumanMessage("Remember: I am allergic to peanuts."), AIMessage("I will.")]
    counts = await extract_and_save(store, "hal", again, model, "t2", turn_ids=["m3", "m4"])
    assert counts["updated"] == 1
    [saved] = await stored(store, "hal")
    assert saved["turn_ids"] == ["m1", "m2", "m3", "m4"]
    with pytest.raises(ValueError, match="turn_ids"):
        await memory.save_memory(store, "hal", "semantic", "x", category="fact", turn_ids="m1")


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        (["What is a hash map?"], []),
        (["what is a hash map"], []),
        (["Please write me a haiku about autumn."], []),
        (["Translate 'good morning' into Spanish."], []),
        (["Can you compute 17% of 2340"], []),
        (["Thanks, that helps."], []),
        (
            ["Please always answer me in Portuguese from now on."],
            ["Please always answer me in Portuguese from now on."],
        ),
        (
            ["I earn 4,250 a month. How much is left?"],
            ["I earn 4,250 a month."],
        ),
        (["I have a sister. She is a dentist in Madrid."], ["I have a sister.", "She is a dentist in Madrid."]),
    ],
)
def test_which_sentences_state_something(messages, expected):
    assert statements(messages) == expected


def test_a_fields_own_words_and_cues_say_what_it_is_about():
    assert {"favourite", "favorite", "colour", "color"} <= field_cues("favourite_colour")
    assert "live" in field_cues("city") and "work" in field_cues("occupation")
    evidence = Evidence.of(["I bought a new car, it's blue. I live in Porto and work as a nurse."])
    assert not evidence.supports_field("favourite_colour", "blue")
    assert evidence.supports_field("city", "Porto") and evidence.supports_field("occupation", "nurse")
    assert not evidence.supports_field("city", "Porto, Portugal")  # not the user's words
    earning = Evidence.of(["I earn 4,250 a month and spend 37% on rent. How much is left?"])
    assert earning.supports_field("salary", "4,250") and not earning.supports_field("savings", "4,250")


async def test_another_persons_fact_written_as_the_users_is_not_stored(store):
    """What the small model also wrote for "My sister Ana is a dentist in Madrid": the sister's job
    and city as a memory about the user."""
    model = ScriptedChatModel(
        responses=[
            extraction(
                people=["sister Ana"],
                semantic=[
                    {"about": "user", "text": "The user is a dentist in Madrid", "category": "fact"},
                    {
                        "about": "sister Ana",
                        "text": "The user's sister Ana is a dentist in Madrid",
                        "category": "relationship",
                    },
                ],
            )
        ]
    )
    turn = [HumanMessage("My sister Ana is a dentist in Madrid."), AIMessage("Nice!")]
    counts = await extract_and_save(store, "ida", turn, model, "t1")
    assert [(v["text"], v.get("subject")) for v in await stored(store, "ida")] == [
        ("The user's sister Ana is a dentist in Madrid", "sister Ana")
    ]
    assert counts["dropped"] == 1


async def test_a_person_the_user_only_speaks_to_is_given_none_of_the_users_facts(store):
    """What the small model wrote for LoCoMo's John answering Maria: his own plans and sport as
    Maria's ("Maria is a kickboxer"). A name said to someone bears out nothing about them."""
    model = ScriptedChatModel(
        responses=[
            extraction(
                people=["Maria"],
                semantic=[
                    {"about": "Maria", "text": "Maria is a kickboxer", "category": "fact"},
                    {"about": "user", "text": "Maria is hoping to get into local politics", "category": "goal"},
                    {"about": "user", "text": "The user is doing kickboxing", "category": "fact"},
                ],
            )
        ]
    )
    turn = [
        HumanMessage(
            "Woah, Maria, that sounds cool! I'm doing kickboxing. Yeah Maria, I'm hoping to get into local politics."
        ),
        AIMessage("Cool, John."),
    ]
    counts = await extract_and_save(store, "john", turn, model, "t1", speaker="John")
    assert [v["text"] for v in await stored(store, "john")] == ["The user is doing kickboxing"]
    assert counts["dropped"] == 2


def test_a_name_the_statements_speak_of_still_bears_out_a_memory():
    evidence = Evidence.of(["Thanks Maria for the book, I loved it. I went climbing with Maria."])
    assert evidence.only_addressed("The user went climbing with Maria") == []
    assert evidence.supports("The user went climbing with Maria")
    thanked = Evidence.of(["Thanks, Maria! I finished the book."])
    assert thanked.only_addressed("Maria finished the book") == ["Maria"]
    assert not thanked.supports("Maria finished the book")


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        (
            "We made pizza! We had so much fun making them together",
            'The user said: "We made pizza! We had so much fun making them together"',
        ),
        (
            "They've opened my eyes to new perspectives.",
            'The user said: "They\'ve opened my eyes to new perspectives."',
        ),
        ("\u201cI\u2019m off to do some taekwondo!\u201d", 'The user said: "I\u2019m off to do some taekwondo!"'),
        ("The user made pizza with family", "The user made pizza with family"),
        ("The user says good food helps us stay close", "The user says good food helps us stay close"),
        ("John is brainstorming ways to help", "John is brainstorming ways to help"),
    ],
)
def test_a_memory_copied_in_the_first_person_is_stored_as_the_users_words(text, kept):
    assert in_the_users_voice(text) == kept


async def test_the_writer_stores_first_person_copies_as_quoted_words(store):
    """The real small model on LoCoMo copied statements verbatim ("We made pizza!"); shown in a
    later note, a model reads "we" as itself and the person it speaks to."""
    model = ScriptedChatModel(
        responses=[extraction(episodic=[{"text": "We made pizza! We had so much fun making them together"}])]
    )
    turn = [HumanMessage("We made pizza! We had so much fun making them together."), AIMessage("Yum!")]
    await extract_and_save(store, "jon", turn, model, "t1")
    assert [v["text"] for v in await stored(store, "jon")] == [
        'The user said: "We made pizza! We had so much fun making them together"'
    ]


@pytest.mark.parametrize(
    ("said", "memory", "kept"),
    [
        ("I wanna start a dance studio so I can teach others.", "The user started a dance studio", False),
        ("I wanna start a dance studio so I can teach others.", "The user wants to start a dance studio", True),
        ("I wanna start a dance studio so I can teach others.", "The user is starting a dance studio", True),
        ("We're going to buy a house next spring.", "The user bought a house", False),
        ("I'd like to visit Japan someday.", "The user visited Japan", False),
        ("I started a dance studio and I want to start a podcast.", "The user started a dance studio", True),
        ("I like to cook for friends.", "The user cooked for friends", True),
    ],
)
def test_what_the_user_means_to_do_is_not_stored_as_done(said, memory, kept):
    """The real small model on LoCoMo wrote "The user started a dance studio" from "I wanna start a
    dance studio": a plan stored as a fact."""
    assert Evidence.of([said]).supports(memory) is kept


async def test_the_writer_drops_a_plan_reported_as_done(store):
    model = ScriptedChatModel(
        responses=[
            extraction(
                episodic=[{"text": "The user started a dance studio"}],
                semantic=[{"text": "The user wants to start a dance studio", "category": "goal"}],
            )
        ]
    )
    turn = [HumanMessage("Dancing is my passion. I wanna start a dance studio."), AIMessage("Go for it!")]
    counts = await extract_and_save(store, "jon", turn, model, "t1")
    assert [v["text"] for v in await stored(store, "jon")] == ["The user wants to start a dance studio"]
    assert counts["dropped"] == 1
