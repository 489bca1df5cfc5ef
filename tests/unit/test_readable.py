"""Tool results rendered for people, and error lists summed up."""

import json

from graphs.runtime.readable import readable, summarize_errors

CURRENT_TIME = {
    "timezone": "Europe/Berlin",
    "time": "2025-07-01T20:15:03+02:00",
    "date": "2025-07-01",
    "weekday": "Tuesday",
    "utc_offset": "+02:00",
    "abbreviation": "CEST",
    "dst": True,
}


def test_a_json_object_becomes_labelled_lines():
    text = readable(json.dumps(CURRENT_TIME))
    assert text.splitlines() == [
        "timezone: Europe/Berlin",
        "time: 2025-07-01T20:15:03+02:00",
        "date: 2025-07-01",
        "weekday: Tuesday",
        "utc offset: +02:00",
        "abbreviation: CEST",
        "dst: yes",
    ]
    assert readable(CURRENT_TIME) == text


def test_lists_and_nesting_become_items_without_json_punctuation():
    results = [
        {"rank": 1, "title": "Kettles", "url": "https://a.example", "tags": ["solar", "camping"]},
        {"rank": 2, "title": "Stoves", "url": "https://b.example", "extra": None, "meta": {"lang": "en"}},
    ]
    text = readable(json.dumps(results))
    assert text.splitlines() == [
        "- rank: 1",
        "  title: Kettles",
        "  url: https://a.example",
        "  tags: solar, camping",
        "- rank: 2",
        "  title: Stoves",
        "  url: https://b.example",
        "  meta:",
        "    lang: en",
    ]
    assert not set('{}[]"') & set(text)


def test_other_text_is_kept_and_long_text_is_cut():
    assert readable("397.8") == "397.8"
    assert readable("{not json at all") == "{not json at all"
    assert readable("Paris is sunny") == "Paris is sunny"
    assert readable("x" * 50, limit=10) == "x" * 9 + "…"


def test_errors_are_summed_up_as_the_first_and_a_count():
    dns = [f"search {q!r} failed: [Errno -3] Temporary failure in name resolution" for q in "abcde"]
    assert summarize_errors(dns) == dns[0] + " (and 4 more errors)"
    assert summarize_errors(dns[:2]).endswith("(and 1 more error)")
    assert summarize_errors(["only one"]) == "only one"
    assert summarize_errors([]) == summarize_errors(["", "  "]) == ""
    assert len(summarize_errors(["e" * 5000, "f"], limit=100)) < 130
