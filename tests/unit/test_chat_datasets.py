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
