"""bench/locomo_writer.py: the part of a conversation the writer reads and the questions asked on it."""

from datetime import UTC, datetime

from bench.locomo_eval import Conversation, Question, Turn
from bench.locomo_writer import part_of, words

AT = datetime(2023, 5, 8, tzinfo=UTC)


def conversation() -> Conversation:
    turns = [
        Turn("D1:1", 1, AT, "Jo", "user", "Jo: I signed up for pottery."),
        Turn("D1:2", 1, AT, "Sam", "assistant", "Sam: Nice!"),
        Turn("D2:1", 2, AT, "Jo", "user", "Jo: We went camping."),
    ]
    questions = [
        Question("q0", "single-hop", "What class did Jo sign up for?", ("D1:1",)),
        Question("q1", "multi-hop", "What activities does Jo do?", ("D1:1", "D2:1")),
    ]
    return Conversation(0, ("Jo", "Sam"), turns, questions)


def test_part_keeps_the_first_sessions_and_only_questions_answered_inside_them():
    part = part_of(conversation(), 1)
    assert [t.id for t in part.turns] == ["D1:1", "D1:2"]
    assert [q.id for q in part.questions] == ["q0"]
    assert [q.id for q in part_of(conversation(), 2).questions] == ["q0", "q1"]


def test_words_drop_the_stored_speaker_prefix_only():
    assert words("Jo: I signed up for pottery.", "Jo") == "I signed up for pottery."
    assert words("Sam: Jo: hi", "Jo") == "Sam: Jo: hi"
