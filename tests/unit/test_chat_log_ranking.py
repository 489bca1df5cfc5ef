"""Knowledge-base hybrid ranking on chat logs (store/hybrid.py with `kb_policy`): the keyword
floor's standouts per part of a question listing several things, and the neighbours of a hit
written by someone else than its hit, told apart by the "Name: " prefix of a chat log's line."""

from __future__ import annotations

from dataclasses import replace

from store import knowledge
from store.hybrid import FLOOR_TAIL, Policy, Signals, held_words, rank, speaker_of, standouts
from store.knowledge.search import Hit, kb_policy


def line(key: str, text: str, score: float = 0.0) -> Hit:
    return Hit(key, {"content": text, "source": key}, score)


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


def test_the_speaker_of_a_chat_logs_line_is_its_prefix():
    policy = Policy(keyword_weight=0.5, text_field="content", speaker_prefix=True)
    assert speaker_of({"content": "Lily Chen: off to Oslo"}, policy) == "Lily Chen"
    assert speaker_of({"content": "Lily: hi\nTom: hey"}, policy) is None  # two speakers
    assert speaker_of({"content": "Q: What is it?"}, policy) is None  # a label, not a name
    assert speaker_of({"content": "no prefix here"}, policy) is None
    assert speaker_of({"content": "Lily: hi"}, replace(policy, speaker_prefix=False)) is None
    assert kb_policy(knowledge.knowledge_config()).speaker_prefix


def test_another_speakers_small_talk_next_to_a_hit_does_not_take_the_named_persons_bonus():
    """A question about Lily: the other speaker's "ttyl" next to her hit shares its place in the
    chat, not her name bonus; her message two turns away from any hit ranks above it."""
    hit = line("hit", "Lily: we hired a camper van for the Highlands", 0.9)
    small_talk = line("ttyl", "Tobias: ttyl")
    answer = line("answer", "Tobias: wait the Highlands?? that's where I proposed")
    hers = line("hers", "Lily: a long weekend in Oslo, pricey but gorgeous", 0.5)
    far = line("far", "Omar: the weather is grey", 0.1)
    signals = Signals("Where did Lily travel?", [(hit, 0.9), (hers, 0.5), (far, 0.1)], [], names={"Lily"})
    signals.neighbours = {"hit": [small_talk, answer]}
    policy = kb_policy(knowledge.knowledge_config(), keyword_weight=0.0)
    now = [r.item.key for r in rank(signals, policy)]
    before = [r.item.key for r in rank(signals, replace(policy, speaker_prefix=False))]
    assert before.index("ttyl") < before.index("hers")
    assert now.index("hers") < now.index("ttyl") and now[:2] == ["hit", "hers"]


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


def test_a_persons_small_talk_next_to_her_hit_does_not_carry_its_name_bonus():
    """Lily's "lol" next to her best hit carries a share of the hit's score, but of its name bonus
    only as much as it says (little), so her other message of substance ranks above it; a
    neighbour continuing her story (as much said as the hit) keeps the whole share."""
    hit = line("hit", "Lily: we hired a camper van for the Highlands", 0.9)
    lol = line("lol", "Lily: lol")
    hers = line("hers", "Lily: the conference in Lisbon was so boring", 0.7)
    far = line("far", "Omar: the weather is grey", 0.1)
    signals = Signals("What did Lily do?", [(hit, 0.9), (hers, 0.7), (far, 0.1)], [], names={"Lily"})
    signals.neighbours = {"hit": [lol]}
    policy = kb_policy(knowledge.knowledge_config(), keyword_weight=0.0)
    assert policy.neighbour_substance
    now = [r.item.key for r in rank(signals, policy)]
    before = [r.item.key for r in rank(signals, replace(policy, neighbour_substance=False))]
    assert before.index("lol") < before.index("hers")
    assert now.index("hers") < now.index("lol")
    story = line("story", "Lily: we drove the whole north coast in five days, loved every minute")
    signals.neighbours = {"hit": [story]}
    scores = {r.item.key: r.score for r in rank(signals, policy)}
    old = {r.item.key: r.score for r in rank(signals, replace(policy, neighbour_substance=False))}
    assert scores["story"] == old["story"] > scores["hers"]
