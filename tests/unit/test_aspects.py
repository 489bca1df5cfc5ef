"""The deterministic person/attribute consolidation (store/aspects.py): a turn's aspects and
their values, the aspects a list question asks for, each person's index of turn ids, one turn
per item first, and the merge with the first stage's order."""

from __future__ import annotations

from store import aspects


def test_a_turn_speaks_of_aspects_by_their_words_and_of_places_by_name():
    found = aspects.turn_aspects("Mel: I just signed up for a pottery class and took the kids swimming.")
    assert "pottery" in found["activity"] and "swim" in found["sport"]  # values are stems
    assert found["family"] == ["kid"]  # the plural counts as its word
    assert aspects.turn_aspects("Jo: I painted a sunset")["art"] == ["paint"]
    assert aspects.stem("movies") == aspects.stem("movie") and aspects.stem("hiking") == aspects.stem("hike")
    trip = aspects.turn_aspects("John: Back from a trip to New York, then a week in Paris!")
    assert trip["place"] == ["New York", "Paris"] and "trip" in trip["travel"]
    assert aspects.turn_aspects("Sam: Haha, so true. Talk soon!") == {}
    assert "Monday" not in aspects.turn_aspects("Sam: See you in Monday's meeting").get("place", [])


def test_a_title_in_quotes_is_an_item_of_the_books_films_songs_or_games_asked_for():
    """LoCoMo's "What books has John read?": the turns naming the books say no kind word ("I'm
    reading \"Dune\" by Frank Herbert", "Just finished \"A Dance with Dragons\"")."""
    assert aspects.turn_aspects('Tim: Just finished "A Dance with Dragons" and loved it.')["title"] == [
        "A Dance with Dragons"
    ]
    assert aspects.turn_aspects("Nate: I play \u201cXenoblade Chronicles\u201d and \u201cCyberpunk 2077\u201d")[
        "title"
    ] == [
        "Xenoblade Chronicles",
        "Cyberpunk 2077",
    ]
    # a quoted sentence, a quoted little word, lower case: no title
    assert "title" not in aspects.turn_aspects('Jo: She said "Turn on the light, happiness hides in the dark."')
    assert "title" not in aspects.turn_aspects('Jo: "That" was the word he used, "whatever"')
    indexes = aspects.build([("John", "t1", 'John: I\'m reading "Dune" by Frank Herbert.')])
    assert aspects.items_for(indexes.values(), aspects.asked("What books has John read?"))["title:Dune"] == ["t1"]


def test_a_list_question_asks_for_aspects_a_question_for_one_thing_does_not():
    assert aspects.asked("What activities does Melanie partake in?")[0] == "activity"
    assert aspects.asked("Which cities has John been to?") == ("place", "travel")
    assert aspects.asked("What books has Tim read?") == ("book", "title")
    assert aspects.asked("What video games does Nate play?") == ("game", "sport", "title")
    assert aspects.asked("What has John cooked?") == ("food",)
    assert aspects.asked("What is Tim's favourite book?") == ()
    assert aspects.asked("Did Jo enjoy the concert?") == ()


def test_each_person_index_keeps_the_ids_of_the_turns_that_said_each_value():
    indexes = aspects.build(
        [
            ("Jo", "t1", "Jo: I went hiking on Sunday."),
            ("Sam", "t2", "Sam: Hiking is not for me, I paint."),
            ("Jo", "t3", "Jo: More hiking, and my first pottery class!"),
            (None, "t4", "Hiking again"),
            ("Jo", "t5", "Jo: lol"),
        ]
    )
    assert set(indexes) == {"Jo", "Sam"}  # a turn of no speaker is nobody's
    assert indexes["Jo"]["activity"]["hik"] == ["t1", "t3"]
    assert indexes["Jo"]["activity"]["pottery"] == ["t3"]
    assert "t2" not in str(indexes["Jo"]) and indexes["Sam"]["art"]["paint"] == ["t2"]
    index: dict = {}
    for number in range(aspects.MAX_TURNS_PER_VALUE + 3):
        aspects.add_turn(index, f"k{number}", "Jo: yoga again")
    assert index["sport"]["yoga"] == [f"k{n}" for n in range(3, aspects.MAX_TURNS_PER_VALUE + 3)]


def test_spread_takes_one_turn_per_item_before_a_second():
    items = {"activity:hiking": ["h1", "h2", "h3"], "activity:pottery": ["p1"], "sport:yoga": ["y1", "h2"]}
    score = {"h1": 0.9, "h2": 0.8, "h3": 0.7, "p1": 0.3, "y1": 0.5}
    picked = aspects.spread([], items, lambda key: score[key])
    assert picked[:3] == ["h1", "h2", "p1"]  # yoga's best is h2 (0.8 > y1's 0.5): taken once
    assert sorted(picked) == ["h1", "h2", "h3", "p1", "y1"]


def test_titles_said_with_a_word_of_the_kind_asked_come_first():
    """ "What books has Tim read?": the turns using "book" or "read" rank above the titles by
    similarity, but a title said with such a word names one book; a title said without one (a
    film's) comes last."""
    indexes = aspects.build(
        [
            ("Tim", "generic", "Tim: I love reading, books are my escape."),
            ("Tim", "novel", 'Tim: I\'m reading a fantasy novel called "The Name of the Wind".'),
            ("Tim", "finished", 'Tim: Just finished "A Dance with Dragons", what a read!'),
            ("Tim", "film", 'Tim: We always watch "Home Alone" at Christmas.'),
        ]
    )
    items = aspects.items_for(indexes.values(), aspects.asked("What books has Tim read?"))
    score = {"generic": 0.9, "novel": 0.5, "finished": 0.4, "film": 0.3}
    picked = aspects.items_first([], items, lambda key: score[key])
    assert picked == ["novel", "finished", "generic", "film"]
    assert aspects.spread([], items, lambda key: score[key])[0] == "generic"  # by similarity alone


def test_interleaved_puts_one_of_the_second_after_every_n_of_the_first_each_once():
    assert aspects.interleaved(["a", "b", "c", "d"], ["x", "b", "y"], 1) == ["a", "x", "b", "c", "y", "d"]
    assert aspects.interleaved(["a", "b", "c"], ["x", "y", "z"], 2) == ["a", "b", "x", "c", "y", "z"]


def test_a_reported_turn_tells_what_its_writer_did():
    assert aspects.reported("Mel: I'm off to go swimming with the kids")
    assert aspects.reported("Mel: we went camping two weekends ago")
    assert not aspects.reported("Caroline: Camping sounds lovely, how was it?")


def test_speaker_lines_are_a_logs_lines_of_people_not_of_labels():
    text = "Jo: I went hiking.\nNote: bring water\nSam: nice!\nno speaker here"
    assert aspects.speaker_lines(text) == [("Jo", "Jo: I went hiking."), ("Sam", "Sam: nice!")]
