"""LoCoMo's conversations and questions written the way people chat, for recall on messy chats
at LoCoMo's size: one speaker recorded under an account name and called by a nickname, the
other under a full name, typos, lower case, messages split into several, emoji. Never committed
as data (LoCoMo's own license; fetch it as bench/locomo_eval.py says); written before any ranking
change was tuned on it, and a check, not a tuning set.

    python -m bench.locomo_messy LOCOMO_PATH [OUT]       # default OUT /tmp/locomo_messy.json
    python -m bench.locomo_eval OUT --schema S --captions --paths chat,kb_hybrid,bm25

Per conversation (seeded by its index, so the file is the same on every machine):

- speaker A is recorded under an account name ("caroline_w92", "jcooper") and goes by a common
  short form of her name ("Caro"): every mention of her name in the turns and in the questions
  is that nickname, now and then misspelt; half the conversations have her say so once ("it's
  Caro btw, ignore the username");
- speaker B is recorded under a full name ("Melanie Ortiz") and called by the first name, which
  the questions use, now and then misspelt;
- a message of several sentences is sent as several messages, one sentence each, now and then;
  a turn's fragments have its id and ".1", ".2"... (bench/locomo_eval.py counts a fragment as
  its turn); a shared photo's caption stays with the last fragment;
- messages lose capitals, apostrophes or their final full stop, gain an emoji, and a few words
  are misspelt.

Slices (per question, besides `temporal` and `list` as LoCoMo's): `nickname` (names speaker A),
`first name` (names speaker B), `both speakers`, `no speaker named`, `misspelt name` (the
question's name is misspelt), `split turn` (an evidence turn was split). Conversations 0-4 are
`held-in`, 5-9 `held-out`.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from pathlib import Path

from bench.locomo_eval import CATEGORY_NAMES, _samples

# Speaker A of each LoCoMo conversation, by its first name: the nickname everyone uses and the
# account name the turns are recorded under. Speaker B: the surname of the full name recorded.
NICKNAMES = {
    "Caroline": "Caro",
    "Jon": "Jonny",
    "John": "Johnny",
    "Joanna": "Jo",
    "Tim": "Timmy",
    "Audrey": "Aud",
    "James": "Jamie",
    "Deborah": "Deb",
    "Evan": "Ev",
    "Calvin": "Cal",
}
SURNAMES = ("Ortiz", "Becker", "Nakamura", "Okafor", "Lindqvist", "Moreau", "Castillo", "Novak", "Haddad", "Kowalski")
EMOJI = ("😂", "🙂", "😍", "👍", "🙌", "😅", "❤️", "🔥", "😊", "🤗")
HELD_IN = 5  # conversations 0..HELD_IN-1 are held in

SPLIT_P = 0.5  # a message of several sentences sent as one message each
LOWER_P = 0.35
APOSTROPHE_P = 0.3
FULL_STOP_P = 0.5
EMOJI_P = 0.15
WORD_TYPO_P = 0.03  # per word of 5 letters or more
NAME_TYPO_P = 0.1  # per mention of a name, in the turns and in the questions


def typo(word: str, rng: random.Random) -> str:
    """`word` misspelt: two inner letters swapped, or one doubled (words of 4 letters or more)."""
    if len(word) < 4:
        return word
    i = rng.randrange(1, len(word) - 2)
    if rng.random() < 0.5 and word[i] != word[i + 1]:
        return word[:i] + word[i + 1] + word[i] + word[i + 2 :]
    return word[: i + 1] + word[i] + word[i + 1 :]


def account_name(first: str, surname: str, rng: random.Random) -> str:
    forms = (
        f"{first.lower()}_{surname[0].lower()}{rng.randrange(80, 100)}",
        f"{first[0].lower()}{surname.lower()}",
        f"{first.lower()}.{surname.lower()}",
    )
    return forms[rng.randrange(len(forms))]


def _names(text: str, name: str, replacement: str, rng: random.Random) -> str:
    """`text` with each mention of `name` (any case) as `replacement`, now and then misspelt."""
    return re.sub(
        rf"(?<!\w){re.escape(name)}(?!\w)",
        lambda m: typo(replacement, rng) if rng.random() < NAME_TYPO_P else replacement,
        text,
        flags=re.IGNORECASE,
    )


def _messy(text: str, rng: random.Random, keep: set[str]) -> str:
    """One message as typed on a phone: misspelt words (not those in `keep`), lower case, no
    apostrophes, no final full stop, an emoji."""
    text = re.sub(
        r"[A-Za-z]{5,}",
        lambda m: typo(m.group(0), rng) if m.group(0) not in keep and rng.random() < WORD_TYPO_P else m.group(0),
        text,
    )
    if rng.random() < LOWER_P:
        text = text.lower()
    if rng.random() < APOSTROPHE_P:
        text = re.sub(r"(?<=\w)['’](?=\w)", "", text)
    if rng.random() < FULL_STOP_P and text.endswith(".") and not text.endswith(".."):
        text = text[:-1]
    if rng.random() < EMOJI_P:
        text = f"{text} {EMOJI[rng.randrange(len(EMOJI))]}"
    return text


def _pieces(text: str) -> list[str]:
    """`text` as its sentences, a sentence of fewer than 3 words kept with the one before it."""
    pieces: list[str] = []
    for sentence in re.split(r"(?<=[.!?])\s+", text.strip()):
        if pieces and len(sentence.split()) < 3:
            pieces[-1] = f"{pieces[-1]} {sentence}"
        elif sentence:
            pieces.append(sentence)
    return pieces


def messy_sample(sample: dict, index: int) -> dict:
    """One LoCoMo sample rewritten (see the module's docstring)."""
    rng = random.Random(1000 + index)
    body = sample.get("conversation", sample)
    a, b = body["speaker_a"], body["speaker_b"]
    nick = NICKNAMES.get(a, a[:3])
    surname_a, surname_b = SURNAMES[index % len(SURNAMES)], SURNAMES[(index + 5) % len(SURNAMES)]
    a_recorded, b_recorded = account_name(a, surname_a, rng), f"{b} {surname_b}"
    recorded = {a: a_recorded, b: b_recorded}
    keep = {nick, b}
    out: dict = {"speaker_a": a_recorded, "speaker_b": b_recorded}
    split_turns: set[str] = set()
    introduced = index % 2 == 0
    sessions = sorted(int(m.group(1)) for key in body if (m := re.fullmatch(r"session_(\d+)", key)))
    for number in sessions:
        out[f"session_{number}_date_time"] = body[f"session_{number}_date_time"]
        turns = []
        for turn in body[f"session_{number}"]:
            text = _names(_names(turn["text"], a, nick, rng), b, b, rng)
            if introduced and turn["speaker"] == a:
                text = f"it's {nick} btw, ignore the username lol. {text}"
                introduced = False
            pieces = _pieces(text) if rng.random() < SPLIT_P else [text]
            if len(pieces) > 1:
                split_turns.add(turn["dia_id"])
            for k, piece in enumerate(pieces, 1):
                said = {
                    "speaker": recorded[turn["speaker"]],
                    "dia_id": f"{turn['dia_id']}.{k}" if len(pieces) > 1 else turn["dia_id"],
                    "text": _messy(piece, rng, keep),
                }
                if k == len(pieces) and turn.get("blip_caption"):
                    said["blip_caption"] = turn["blip_caption"]
                turns.append(said)
        out[f"session_{number}"] = turns
    qa = []
    for item in sample.get("qa", body.get("qa", [])):
        if item.get("category") not in CATEGORY_NAMES or not item.get("evidence"):
            continue
        question = item["question"]
        names_a = bool(re.search(rf"(?<!\w){re.escape(a)}(?!\w)", question))
        names_b = bool(re.search(rf"(?<!\w){re.escape(b)}(?!\w)", question))
        misspelt = rng.random() < NAME_TYPO_P and (names_a or names_b)
        question = re.sub(rf"(?<!\w){re.escape(a)}(?!\w)", typo(nick, rng) if misspelt and names_a else nick, question)
        if misspelt and names_b and not names_a:
            question = re.sub(rf"(?<!\w){re.escape(b)}(?!\w)", typo(b, rng), question)
        evidence = [e for raw in item["evidence"] for e in re.findall(r"D\d+:\d+", raw)]
        who = {(True, True): "both speakers", (True, False): "nickname", (False, True): "first name"}
        slices = [who.get((names_a, names_b), "no speaker named")]
        if misspelt:
            slices.append("misspelt name")
        if CATEGORY_NAMES[item["category"]] == "temporal":
            slices.append("temporal")
        if len(set(evidence)) >= 4:
            slices.append("list")
        if split_turns & set(evidence):
            slices.append("split turn")
        qa.append(
            {
                "question": question,
                "evidence": evidence,
                "category": item["category"],
                "split": "held-in" if index < HELD_IN else "held-out",
                "slices": sorted(slices),
            }
        )
    return {"sample_id": f"locomo-messy-{index}", "conversation": out, "qa": qa}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.locomo_messy", description=__doc__.split("\n\n")[0])
    parser.add_argument("path", help="LoCoMo's data/locomo10.json, a sample file or a folder of them")
    parser.add_argument("out", nargs="?", default="/tmp/locomo_messy.json")
    args = parser.parse_args(argv)
    samples = [messy_sample(sample, index) for index, sample in enumerate(_samples(Path(args.path)))]
    Path(args.out).write_text(json.dumps(samples, indent=1, ensure_ascii=False) + "\n")
    turns = sum(
        len(v)
        for s in samples
        for k, v in s["conversation"].items()
        if k.startswith("session_") and isinstance(v, list)
    )
    print(
        f"wrote {args.out}: {len(samples)} conversations, {turns} messages, {sum(len(s['qa']) for s in samples)} questions"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
