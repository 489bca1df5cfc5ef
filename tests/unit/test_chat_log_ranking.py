"""The keyword floor's standouts per part of a question listing several things (store/hybrid.py,
`standouts`, `lists_several`): each thing's own first keyword hit stands out, not only the whole
question's first."""

from __future__ import annotations

from store.hybrid import FLOOR_TAIL, held_words, lists_several, standouts


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
