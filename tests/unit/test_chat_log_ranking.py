"""The keyword floor's standouts per part of a question listing several things (store/floor.py,
`standouts`, `lists_several`): each thing's own first keyword hit stands out, not only the whole
question's first; what the floor reads and weighs (`floor_hits`, `small_talk_to`); the reply to
a hit asking a question (`reply_to`, `Policy.answer_weight`)."""

from __future__ import annotations

from dataclasses import replace

from store.floor import FLOOR_TAIL, LIST_FLOOR, held_words, lists_several, small_talk_to, standouts, with_keyword_floor
from store.hybrid import Policy, Signals, floor_hits, rank, reply_to
from store.knowledge.search import Hit


def test_each_part_of_a_question_listing_several_things_has_its_own_first_keyword_hit():
    """Asked "What did Jo say about the camper van, the long weekend and the ski week?", the
    message holding only "weekend" scores a share of the one holding "camper van", yet is the best
    of its part."""
    words = {"camper", "van", "long", "weekend", "ski", "week"}
    texts = {
        "van": "Jo: we hired a camper van for the Highlands",
        "weekend": "Jo: a weekend in Oslo, pricey but gorgeous",
        "ski": "Jo: ski trip in the Alps",
        "ski2": "Jo: the ski pass was so pricey",
        "van2": "Sam: the van was late",
        **{f"t{i}": f"Jo: lol {i}" for i in range(FLOOR_TAIL)},
    }
    ranked = [("van", 0.08), ("weekend", 0.04), ("ski", 0.035), ("ski2", 0.034), ("van2", 0.03)]
    ranked += [(f"t{i}", 0.015) for i in range(FLOOR_TAIL)]
    whole = [key for key, _ in standouts(ranked)]
    by_part = [key for key, _ in standouts(ranked, lambda key: held_words(texts[key], words))]
    assert whole == ["van"]  # two thirds of the whole question's first score
    # a part's first, and a hit as good as its part's first; not a runner-up of "camper van"
    assert by_part == ["van", "weekend", "ski", "ski2"]


def test_a_question_quoting_one_message_keeps_one_standout_by_part():
    """Runners-up holding some of the quoted message's words share its part: far below it, they
    are not lifted (they would push out the replies around it)."""
    words = {"flatmate", "moving"}
    texts = {"win": "Jo: my flatmate is moving out", "run": "Jo: moving the sofa", "run2": "Sam: my flatmate lol"}
    texts |= {f"t{i}": f"Jo: ok {i}" for i in range(FLOOR_TAIL)}
    ranked = [("win", 0.3), ("run", 0.12), ("run2", 0.1)] + [(f"t{i}", 0.02) for i in range(FLOOR_TAIL)]
    assert [key for key, _ in standouts(ranked, lambda key: held_words(texts[key], words))] == ["win"]


def test_only_a_question_listing_several_things_has_parts():
    assert lists_several("What did Jo say about back pain, hay fever, insomnia and a sprained wrist?")
    assert not lists_several("What does Gina say to Jon about the grand opening?")
    assert not lists_several("What did Jo say about the van and the conference?")


def test_the_tail_of_a_question_naming_someone_is_at_most_a_names_only_match():
    """A question listing many things, one of them a common word ("work"): the tenth keyword hit
    already holds it, so a thing's own message scores less than 1.5 times it; it still stands out
    from the messages matching the names only ("Jo: lol")."""
    words = {"camper", "van", "conference", "work"}
    texts = {
        "van": "Jo: we hired a camper van",
        "conference": "Jo: the conference in Lisbon",
        **{f"w{i}": f"Jo: work again {i}" for i in range(FLOOR_TAIL)},
        **{f"t{i}": f"Jo: lol {i}" for i in range(3)},
    }
    ranked = [("van", 0.08), ("conference", 0.045)] + [(f"w{i}", 0.035 - i / 10000) for i in range(FLOOR_TAIL)]
    ranked += [(f"t{i}", 0.016) for i in range(3)]
    by_part = [key for key, _ in standouts(ranked, lambda key: held_words(texts[key], words))]
    assert by_part[:2] == ["van", "conference"]
    assert [key for key, _ in standouts(ranked)] == ["van"]  # 1.5 times the tenth score and 2/3 of the first
    without_names_only = [pair for pair in ranked if not pair[0].startswith("t")]
    assert "conference" not in dict(standouts(without_names_only, lambda key: held_words(texts[key], words)))


def test_a_keyword_list_shorter_than_the_tail_stands_out_by_its_first_score_when_someone_is_named():
    """Few messages share the question's words ("Which city have both Jean and John visited?":
    one holds "visited"): the list is all there is, and its hits near the first stand out when
    the question names someone (whose name bonus sinks them). A paraphrased question about a
    document shares a common word with a few passages: nothing stands out there."""
    assert standouts([("visited", 0.08)], short=True) == [("visited", 0.08)]
    assert [key for key, _ in standouts([("a", 0.3), ("b", 0.25), ("c", 0.1)], short=True)] == ["a", "b"]
    assert standouts([("a", 0.3), ("b", 0.25)]) == []
    assert standouts([], short=True) == []
    said = [("visited", "Gina: Paris?! I visited it last year", 0.08)]
    texts = {key: text for key, text, _ in said}
    query = "Which city have both Jean and John visited?"
    assert floor_hits(_signals(query, said, {"John"}), texts, 0.3)[0] == ["visited"]
    assert floor_hits(_signals(query, said, set()), texts, 0.3)[0] == []
    # a question naming a time by an event matches the event's message: the answer is dated after it
    dated = _signals("What did John do in the week after he visited the city?", said, {"John"})
    dated.dated = [(Hit("later", {"content": "John: I repainted the kitchen"}, 0.5), 0.5)]
    assert floor_hits(dated, texts, 0.3)[0] == []


def test_small_talk_said_to_a_named_person_is_told_apart():
    names = {"Tibo", "Thibault"}
    assert small_talk_to("Ines: love you Tibo", names)
    assert small_talk_to("Ines: gn Tibo", names)
    assert small_talk_to("Ines: u ok Tibo?", names)
    assert not small_talk_to("Ines: Tibo and I lived in Madrid", names)  # about him
    assert not small_talk_to("Ines: thanks Tibo, the semester in Vienna was amazing", names)  # says something
    assert not small_talk_to("Ines: love you", names)  # to no one named
    assert not small_talk_to("Ines: love you Tibo", set())


def _signals(query: str, said: list[tuple[str, str, float]], names: set[str]) -> Signals:
    keyword = [(Hit(key, {"content": text}, score), score) for key, text, score in said]
    return Signals(query, [], keyword, names=names)


def test_the_floor_reads_no_small_talk_and_weighs_a_listing_question_more():
    """Asked which cities two people lived in, loved or spent christmas in, "love you Tibo"
    matches "loved" and the name: left out, it neither takes the floor's first place nor sets
    the part's first score that "I lived in Madrid" must reach. The listing question's floor
    weighs LIST_FLOOR; a question about one thing keeps the policy's weight."""
    said = [
        ("small", "Ines: love you Tibo", 0.091),
        ("semester", "Ines: I did a semester in Vienna", 0.059),
        ("lived", "Tibo: I lived in Madrid for a year", 0.044),
        ("christmas", "Tibo: Vienna at christmas was magic", 0.043),
    ]
    said += [(f"t{i}", f"Ines: ok {i} 😂", 0.02) for i in range(FLOOR_TAIL)]
    texts = {key: text for key, text, _ in said}
    listing = "Which cities did Tibo and Ines both say they lived in, loved, or spent christmas or a semester in?"
    lifted, weight = floor_hits(_signals(listing, said, {"Tibo", "Ines"}), texts, 0.3)
    assert lifted == ["semester", "lived", "christmas"] and weight == LIST_FLOOR
    one = "Where did Tibo spend christmas?"
    lifted, weight = floor_hits(_signals(one, said, {"Tibo", "Ines"}), texts, 0.3)
    assert "small" not in lifted and weight == 0.3


def test_the_listing_floor_brings_each_thing_into_the_first_ten():
    """A thing's message that the bonuses left 40th comes back among the first ten at
    LIST_FLOOR, not at the policy's 0.3."""
    fused = [(f"b{i}", 2.0 - i / 100) for i in range(60)]
    lifted = ["b0", "b1", "b40"]
    assert [key for key, _ in with_keyword_floor(fused, lifted, LIST_FLOOR)].index("b40") < 10
    assert [key for key, _ in with_keyword_floor(fused, lifted, 0.3)].index("b40") >= 10


def _message(key: str, at: str, text: str) -> Hit:
    return Hit(key, {"content": text, "date": at, "source": f"turn:{key}", "position": 0}, 0.0)


def test_the_reply_to_a_question_is_the_next_message_by_someone_else():
    policy = Policy(keyword_weight=0.8, text_field="content", date_field="date", document_field="source")
    asked = _message("q", "2023-05-08T13:00:30", "Melanie: Books are great! Which one has been your favorite guide?")
    before = _message("b", "2023-05-08T13:00:00", "Caroline: Books guided me a lot.")
    reply = _message("r", "2023-05-08T13:01:00", 'Caroline: I loved "Becoming Nicole" by Amy Ellis Nutt.')
    later = _message("l", "2023-05-08T13:01:30", "Melanie: Sounds like a great read!")
    assert reply_to(asked.value, [later, before, reply], policy) == "r"
    assert reply_to(asked.value, [before, later], policy) is None  # her own next message answers nothing
    told = _message("t", "2023-05-08T13:00:30", "Melanie: Books are great, I read a lot.")
    assert reply_to(told.value, [before, reply], policy) is None  # no question asked
    short = _message("s", "2023-05-08T13:01:00", "Caroline: Honestly relatable.")
    assert reply_to(asked.value, [short], policy) is None  # says nothing asked about
    log = _message("g", "2023-05-08T13:00:30", "Melanie: Which one?\nCaroline: This one.")
    assert reply_to(log.value, [reply], policy) is None  # a chunk of many messages


def test_a_chat_messages_author_is_its_speaker_field():
    """Chat memory keeps the speaker (else the role) in a field and the words alone as text."""
    policy = Policy(keyword_weight=0.35, speaker_field="speaker")

    def said(key: str, at: str, text: str, **who: str) -> Hit:
        return Hit(key, {"text": text, "created_at": at, **who}, 0.0)

    asked = said("q", "2023-05-08T13:00:30", "Books are great! Which one has been your favorite guide?", speaker="Mel")
    reply = said("r", "2023-05-08T13:01:00", 'I loved "Becoming Nicole" by Amy Ellis Nutt.', speaker="Caroline")
    later = said("l", "2023-05-08T13:01:30", "Sounds like a great read, I will look for it!", speaker="Mel")
    assert reply_to(asked.value, [later, reply], policy) == "r"
    assert reply_to(asked.value, [later], policy) is None  # her own next message
    assert reply_to(asked.value, [reply], Policy(keyword_weight=0.35)) is None  # no "Name:" to read
    question = said("u", "2023-05-08T13:00:30", "Which pasta shape holds sauce best?", role="user")
    answer = said("a", "2023-05-08T13:00:40", "Rigatoni and penne hold thick sauces best.", role="assistant")
    assert reply_to(question.value, [answer], policy) == "a"


def test_the_answer_to_a_question_about_the_asker_comes_in_next_to_it():
    """Asked what book Melanie read on Caroline's suggestion, hybrid search finds Melanie's
    question about books first; Caroline's reply naming the book shares none of the question's
    words and, at the neighbour weight, falls behind Melanie's other messages about books."""
    asked = _message("q", "2023-05-08T13:00:30", "Melanie: Books are great! Which one has been your favorite guide?")
    reply = _message("r", "2023-05-08T13:01:00", 'Caroline: I loved "Becoming Nicole" by Amy Ellis Nutt.')
    hers = [
        _message(f"h{i}", f"2023-06-0{i + 1}T10:00:00", f"Melanie: I read a lovely book about painting on day {i}.")
        for i in range(4)
    ]
    other = _message("o", "2023-07-01T10:00:00", "Caroline: nice weather")
    # Melanie's messages score 0.5 of name bonus and their similarity, the question 0.5 + 1.0
    dense = [(asked, 0.9), *((h, 0.72 - i / 1000) for i, h in enumerate(hers)), (other, 0.1)]
    signals = Signals("What book did Melanie read from Caroline's suggestion?", dense, [], names={"Melanie"})
    signals.neighbours = {"q": [reply]}
    policy = Policy(
        keyword_weight=0.0,
        name_weight=0.5,
        neighbour_weight=0.8,
        neighbour_turns=2,
        text_field="content",
        date_field="date",
        document_field="source",
    )
    without = [r.item.key for r in rank(signals, policy)]
    with_answers = [r.item.key for r in rank(signals, replace(policy, answer_weight=0.9))]
    assert without.index("r") > without.index("h3")
    assert with_answers.index("r") == 1
