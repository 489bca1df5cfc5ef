"""The committed messy-chat sets are what their generators write, so a change to a generator
cannot silently leave a stale dataset (or a hand edit to the data go unnoticed)."""

import json
from datetime import UTC, datetime

import pytest

from bench import chat_dataset, chat_fresh_dataset
from bench.chat_sample import Sample, write_or_check


@pytest.mark.parametrize("module", [chat_dataset, chat_fresh_dataset], ids=["chat_recall", "chat_recall_fresh"])
def test_the_committed_set_is_what_its_generator_writes(module, capsys):
    assert write_or_check(["--check"], module.PATH, module.build_all, module.__name__) == 0
    assert "up to date" in capsys.readouterr().out


def test_check_fails_when_the_file_differs(tmp_path, capsys):
    path = tmp_path / "set.json"
    path.write_text("[]\n")
    assert write_or_check(["--check"], path, chat_dataset.build_all, "bench.chat_dataset") == 1
    assert "differs" in capsys.readouterr().out
    assert path.read_text() == "[]\n"  # --check never writes


def test_a_sample_counts_a_question_as_recorded_only_if_all_its_names_are():
    sample = Sample(2, "held-in")
    first = sample.say(0, "Joanna", "hi")
    second = sample.say(1, "Sam", "look", caption="a dog on a beach")
    sample.ask("What did Jo and Sam share?", [first, second], 1, "paraphrase", ["name recorded", "name not recorded"])
    out = sample.finish("s", "Joanna", "Sam", [datetime(2024, 1, 1, tzinfo=UTC), datetime(2024, 1, 2, tzinfo=UTC)])
    assert [first, second] == ["D1:1", "D2:1"]
    assert out["conversation"]["session_2"][0]["blip_caption"] == "a dog on a beach"
    assert out["qa"][0]["slices"] == ["name not recorded"]
    assert json.loads(json.dumps(out)) == out


LOCOMO_LIKE = {
    "sample_id": "x",
    "conversation": {
        "speaker_a": "Caroline",
        "speaker_b": "Melanie",
        "session_1_date_time": "1:47 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Caroline", "dia_id": "D1:1", "text": "Hey Melanie! I adopted a cat. She is called Luna."},
            {"speaker": "Melanie", "dia_id": "D1:2", "text": "Wow Caroline, lovely! What breed is she?"},
            {
                "speaker": "Caroline",
                "dia_id": "D1:3",
                "text": "A tabby from the shelter. She sleeps all day long. Here she is.",
                "blip_caption": "a photo of a cat on a sofa",
            },
        ],
    },
    "qa": [
        {"question": "What did Caroline adopt?", "evidence": ["D1:1"], "category": 4},
        {"question": "What breed is the cat Caroline and Melanie talked about?", "evidence": ["D1:3"], "category": 1},
        {"question": "Adversarial?", "evidence": ["D1:1"], "category": 5},
    ],
}


def test_the_messy_locomo_renames_splits_and_keeps_every_turn_findable(tmp_path, monkeypatch):
    from bench import locomo_messy
    from bench.locomo_eval import read_conversations, turn_of

    monkeypatch.setattr(locomo_messy, "SPLIT_P", 1.0)  # every message of several sentences split
    out = locomo_messy.messy_sample(LOCOMO_LIKE, 0)
    body = out["conversation"]
    assert body["speaker_a"] != "Caroline" and body["speaker_b"].startswith("Melanie ")  # account / full name
    said = body["session_1"]
    assert {t["speaker"] for t in said} == {body["speaker_a"], body["speaker_b"]}
    assert not any("caroline" in t["text"].lower() for t in said)  # called Caro, not by the recorded name
    assert any("caro" in t["text"].lower() for t in said[1:])
    ids = [t["dia_id"] for t in said]
    assert (
        "D1:3.1" in ids
        and "D1:3.2" in ids
        and [turn_of(i) for i in ids if i.startswith("D1:3")]
        == ["D1:3"] * (len([i for i in ids if i.startswith("D1:3")]))
    )
    assert [t.get("blip_caption") for t in said if t["dia_id"].startswith("D1:3")][-1] == "a photo of a cat on a sofa"
    assert [q["question"] for q in out["qa"]][0] == "What did Caro adopt?" or "misspelt name" in out["qa"][0]["slices"]
    assert [q["slices"] for q in out["qa"]][1][:1] == ["both speakers"] and "split turn" in out["qa"][1]["slices"]
    assert len(out["qa"]) == 2 and {q["split"] for q in out["qa"]} == {"held-in"}
    path = tmp_path / "messy.json"
    path.write_text(json.dumps([out]))
    (conv,) = read_conversations(path, captions=True)
    assert [q.evidence for q in conv.questions] == [("D1:1",), ("D1:3",)]  # a split turn's fragments count as it
    assert conv.turns[-1].text.endswith("and shared a photo of a cat on a sofa")
    assert locomo_messy.messy_sample(LOCOMO_LIKE, 0) == locomo_messy.messy_sample(LOCOMO_LIKE, 0)  # seeded
