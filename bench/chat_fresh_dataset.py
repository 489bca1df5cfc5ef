"""A second messy-chat evaluation set, all held out, deterministic, committed as data
(`evals/datasets/chat_recall_fresh.json`).

    python -m bench.chat_fresh_dataset            # rewrite evals/datasets/chat_recall_fresh.json
    python -m bench.chat_fresh_dataset --check    # exit 1 when the committed file differs from it

Written before any ranking change was tried on it, and never tuned on: every question is
`held-out`. It has other people, names and storylines than bench/chat_dataset.py's set, in the
same LoCoMo sample shape (`bench.locomo_eval` reads it; give it `--captions`). Four two-person
chats over twelve dated sessions each:

- one speaker is recorded under an account or full name and goes by a nickname: introduced by
  her ("it's Lily lol, ignore the username") or never introduced, only used by the other person
  ("thanks Seun!"); the other speaker has a full name or a nickname of his own, and both are
  misspelt now and then ("Suen", "Tobais");
- most messages are a few words or an emoji; photos come as their caption, and some turns say
  nothing but "look what I made 😁" beside a photo whose caption holds the fact;
- some facts are a short answer to the other person's question ("what did you end up calling
  the cat??" / "Mochi 🍡"): the evidence is the answer alone;
- list questions ask about one person's hobbies, trips or health over five sessions ("What are
  Lily's hobbies?"), where the other person talks about the same topics too;
- both-speaker questions ask what two people share, one of them over four turns in four
  sessions ("Which cities have Tibo and Ines both been to?").

Slices, besides bench/chat_dataset.py's (`name recorded` / `name not recorded`, `misspelt`,
`temporal`, `both speakers`, `list`): `answer in reply` (the evidence answers the turn before
it) and `photo` (the fact is in the photo's caption only). Each question has a `worded` form
(the evidence's words) and a `paraphrase`.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.chat_sample import Sample, write_or_check

PATH = Path(__file__).resolve().parent.parent / "evals" / "datasets" / "chat_recall_fresh.json"
SESSIONS = 12


@dataclass(frozen=True)
class Pair:
    """Who is in one chat: `a` is recorded as `a_recorded` and called `a_nick` (introduced by her
    in `a_intro`, or, when that is empty, only by the other person addressing her), misspelt
    `a_typo`; `b` is recorded as `b_recorded`, called `b_nick` now and then, misspelt `b_typo`."""

    a_recorded: str
    a_nick: str
    a_typo: str
    a_intro: str
    b_recorded: str
    b_nick: str
    b_typo: str

    def a_forms(self) -> list[tuple[str, list[str]]]:
        forms = [(self.a_nick, ["name not recorded"]), (self.a_recorded, ["name recorded"])]
        forms.append((self.a_typo, ["name not recorded", "misspelt"]))
        return forms

    def b_forms(self) -> list[tuple[str, list[str]]]:
        forms = [(self.b_recorded, ["name recorded"]), (self.b_typo, ["name not recorded", "misspelt"])]
        if " " in self.b_recorded:
            forms.append((self.b_recorded.split()[0], ["name not recorded"]))
        else:
            forms.append((self.b_nick, ["name not recorded"]))
        return forms


PAIRS = (
    Pair("Oluwaseun Adeyemi", "Seun", "Suen", "", "Grace", "Gracie", "Grase"),
    Pair("xx_lily_xx", "Lily", "Lilly", "it's Lily lol, ignore the username", "Tobias Brandt", "Tobi", "Tobais"),
    Pair("Thibault Marchand", "Tibo", "Thibaut", "everyone here calls me Tibo", "Ines", "Nessa", "Inez"),
    Pair("mchen_88", "Mei", "Meii", "I'm Mei btw, the 88 is my birth year 🙃", "Callum O'Brien", "Cal", "Calum"),
)

# A single fact: the teller's turn, the friend's reply, a photo caption or "", a worded and a
# paraphrased question, a "when" question or "". {who} is how the question names the teller.
Story = tuple[str, str, str, str, str, str]
STORIES: list[Story] = [
    (
        "finally got my wisdom teeth out, face like a hamster 🐹",
        "noooo soup diet",
        "",
        "What did {who} say about getting wisdom teeth out?",
        "Which dental surgery did {who} have recently?",
        "When did {who} have the teeth removed?",
    ),
    (
        "we're doing the Camino in september, 12 days walking",
        "the whole thing??",
        "",
        "What did {who} say about doing the Camino?",
        "Which long pilgrimage hike is {who} planning?",
        "",
    ),
    (
        "bought a secondhand cello off a guy in Leeds",
        "wait you play??",
        "a photo of a cello case leaning against a radiator",
        "What did {who} buy secondhand off a guy in Leeds?",
        "Which musical instrument did {who} get used?",
        "When did {who} buy the instrument?",
    ),
    (
        "my flatmate is moving out so I'm looking for someone new",
        "ugh the worst",
        "",
        "What did {who} say about the flatmate moving out?",
        "Why is {who} searching for a new person to share the apartment with?",
        "",
    ),
    (
        "got promoted to team lead today!!!",
        "LETS GOOO",
        "",
        "What did {who} say about getting promoted to team lead?",
        "What step up did {who} get at work?",
        "When was {who} made a manager?",
    ),
    (
        "cracked my phone screen again, dropped it in the loo 🤦",
        "again?!",
        "a photo of a phone with a shattered screen",
        "How did {who} crack the phone screen?",
        "What happened to {who}'s mobile in the bathroom?",
        "",
    ),
    (
        "planted tomatoes and basil on the balcony",
        "little garden!!",
        "a photo of small pots with seedlings on a balcony",
        "What did {who} plant on the balcony?",
        "Which vegetables and herbs is {who} growing at home?",
        "When did {who} start growing plants outside the flat?",
    ),
    (
        "my mum is flying over from Lagos for three weeks",
        "aww you must be excited",
        "",
        "What did {who} say about mum flying over from Lagos?",
        "Which relative is coming to stay with {who} from abroad?",
        "When did {who} say the mother was visiting?",
    ),
    (
        "failed my theory exam by 2 points 😭",
        "so close tho",
        "",
        "What exam did {who} fail by 2 points?",
        "Which test did {who} narrowly not pass?",
        "",
    ),
    (
        "got a tattoo of a fern on my wrist",
        "pics!!",
        "a photo of a small fern tattoo on a wrist",
        "What tattoo did {who} get on the wrist?",
        "What new ink does {who} have and where?",
        "When did {who} get inked?",
    ),
]
# An answer to the other person's question: their question, the teller's answer (the evidence),
# a worded question (the other person's words) and a paraphrase.
ANSWERS = [
    (
        "what did you end up calling the cat??",
        "Mochi 🍡",
        "What did {who} end up calling the cat?",
        "What is the name of {who}'s cat?",
    ),
    (
        "how did the interview go?",
        "nailed it I think, they said I'd hear by friday",
        "How did {who}'s interview go?",
        "Does {who} think the job interview went well?",
    ),
    (
        "where are you guys staying in Rome",
        "tiny airbnb near Trastevere",
        "Where is {who} staying in Rome?",
        "Which part of the Italian capital did {who} book accommodation in?",
    ),
    (
        "what are you reading rn",
        "Piranesi, it's so weird and good",
        "What is {who} reading right now?",
        "Which novel has {who} been into lately?",
    ),
]
# A fact in a photo's caption only: the teller's words, the caption, worded and paraphrase.
PHOTOS = [
    (
        "look what I made 😁",
        "a photo of a knitted green scarf folded on a bed",
        "What did {who} say about the knitted green scarf?",
        "What piece of clothing did {who} make by hand?",
    ),
    (
        "view from today",
        "a photo of a snowy mountain lake with a wooden cabin",
        "What did {who} share about a snowy mountain lake?",
        "Where did {who} go up in the mountains, by the water?",
    ),
]
# A list topic: five turns in five sessions, one line of the other person on the same topic, a
# worded and a paraphrased question.
LISTS = [
    (
        [
            "started going to a life drawing class 🎨",
            "been doing parkrun every saturday",
            "joined a choir at work lol",
            "got really into jigsaw puzzles",
            "learning to crochet from youtube",
        ],
        "honestly my only hobby is sleeping",
        "What has {who} started going to, been doing, joined, got into or been learning?",
        "What are {who}'s hobbies?",
    ),
    (
        [
            "back from Porto, ate so many pastéis",
            "weekend in Copenhagen was freezing",
            "we did a road trip round Skye",
            "work sent me to Berlin for 3 days",
            "Marrakech was unreal 🐪",
        ],
        "I haven't been anywhere since covid lol",
        "Where did {who} get back from, spend a weekend, do a road trip, get sent for work or find unreal?",
        "Which places has {who} travelled to this year?",
    ),
    (
        [
            "back is killing me, physio on monday",
            "hay fever is brutal this week 🤧",
            "finally sorted my insomnia with a sleep app",
            "tooth infection, on antibiotics now",
            "sprained my wrist at climbing",
        ],
        "I never get sick touch wood",
        "What did {who} say about back pain, hay fever, insomnia, a tooth infection and a sprained wrist?",
        "What health problems has {who} dealt with?",
    ),
]
# Both speakers: the first speaker's turns and the second's (alternating sessions), worded and
# paraphrase. The last one spans four turns.
BOTH = [
    (
        ["just watched Dune part two, obsessed"],
        ["I saw Dune on the plane lol"],
        "What film did {a} and {b} both say they watched or saw?",
        "Which movie have {a} and {b} both seen?",
    ),
    (
        ["can't eat gluten, coeliac since I was a kid"],
        ["I'm gluten free too actually"],
        "What can {a} and {b} both not eat, gluten?",
        "What dietary restriction do {a} and {b} share?",
    ),
    (
        ["I lived in Madrid for a year", "Vienna at christmas was magic"],
        ["Madrid is my favourite city, been 4 times", "I did a semester in Vienna"],
        "Which cities did {a} and {b} both say they lived in, loved, or spent christmas or a semester in?",
        "Which cities have {a} and {b} both been to?",
    ),
]
SHORT = [
    "lmaooo",
    "hahah",
    "😂😂",
    "fr",
    "ye",
    "🥲",
    "💀",
    "ttyl",
    "omw",
    "nah",
    "same",
    "mood",
    "wait really",
    "ok ok",
    "😴",
    "👀",
    "lol true",
    "np",
    "yup",
    "gn",
]
VOCATIVE_A = [
    "omg {n} 😂",
    "proud of u {n}",
    "how are you {n}?",
    "thanks {n}!!",
    "u ok {n}?",
    "gn {n}",
    "love you {n}",
    "classic {n} haha",
    "you're mad {n}",
    "morning {n} ☀️",
]
TO_B = ["thx {n}", "miss u {n}", "gn {n} x", "how was work {n}?"]
FILLER_A = [
    "tired af",
    "cooking rn",
    "work is dragging",
    "raining again ugh",
    "just woke up lol",
    "on the train",
    "so hungry",
    "need a nap",
]
FILLER_B = [
    "long day",
    "at the gym",
    "got takeaway",
    "stuck in a meeting",
    "freezing today",
    "so much traffic",
    "coffee time",
    "home now",
]


def _session_dates(index: int) -> list[datetime]:
    start = datetime(2023, 3, 6, 18, 30, tzinfo=UTC) + timedelta(days=17 * index)
    return [start + timedelta(days=9 * s + (s % 4), hours=s % 5) for s in range(SESSIONS)]


def build(index: int, seed: int = 7000, pairs: Sequence[Pair] = PAIRS) -> dict:
    """Conversation `index` as a LoCoMo sample (`seed` and `pairs` other than the committed set's
    make a development set, bench/chat_dev_dataset.py)."""
    rng = random.Random(seed + index)
    pair = pairs[index]
    a, b = pair.a_recorded, pair.b_recorded
    sample = Sample(SESSIONS, "held-out")
    say, ask = sample.say, sample.ask

    def small_talk(session: int, count: int) -> None:
        for _ in range(count):
            roll = rng.random()
            if roll < 0.25:
                say(session, b, rng.choice(VOCATIVE_A).format(n=rng.choice([pair.a_nick] * 4 + [pair.a_typo])))
            elif roll < 0.35:
                say(session, a, rng.choice(TO_B).format(n=rng.choice([pair.b_nick, pair.b_recorded.split()[0]])))
            elif roll < 0.7:
                say(session, rng.choice([a, b]), rng.choice(SHORT))
            else:
                say(session, a, rng.choice(FILLER_A)) if rng.random() < 0.5 else say(session, b, rng.choice(FILLER_B))

    a_forms, b_forms = pair.a_forms(), pair.b_forms()
    dates = _session_dates(index)
    say(0, b, "heyyy")
    if pair.a_intro:
        say(0, a, pair.a_intro)
        say(0, b, f"noted {pair.a_nick} 😂")
    else:
        say(0, a, "hiii")
        say(0, b, f"{pair.a_nick}!! long time")
    small_talk(0, 4)

    stories = list(STORIES)
    rng.shuffle(stories)
    plan = [(a, s, a_forms, b) for s in stories[:5]] + [(b, s, b_forms, a) for s in stories[5:8]]
    for number, (teller, story, forms, listener) in enumerate(plan):
        session = 1 + (number * 5) % (SESSIONS - 1)
        small_talk(session, rng.randint(2, 5))
        turn, reply, caption, worded, para, when = story
        evidence = [say(session, teller, turn, caption)]
        say(session, listener, reply)
        small_talk(session, rng.randint(1, 4))
        for k, (question, style) in enumerate(((worded, "worded"), (para, "paraphrase"))):
            name, slices = forms[(number + k) % len(forms)]
            ask(question.format(who=name), evidence, 4, style, slices)
        if when:
            name, slices = forms[(number + 2) % len(forms)]
            ask(when.format(who=name), evidence, 2, "paraphrase", [*slices, "temporal"])
        if number % 3 == 1:
            name, slices = forms[number % len(forms)]
            ask(
                f"What was {name} up to around {dates[session]:%-d %B %Y}?",
                evidence,
                2,
                "paraphrase",
                [*slices, "temporal"],
            )

    answers = list(ANSWERS)
    rng.shuffle(answers)
    for number, ((asked, answer, worded, para), (teller, forms, other)) in enumerate(
        zip(answers[:2], ((a, a_forms, b), (b, b_forms, a)), strict=True)
    ):
        session = 2 + number * 5
        small_talk(session, rng.randint(1, 3))
        say(session, other, asked)
        evidence = [say(session, teller, answer)]
        small_talk(session, rng.randint(1, 3))
        for k, (question, style) in enumerate(((worded, "worded"), (para, "paraphrase"))):
            name, slices = forms[(number + k + 1) % len(forms)]
            ask(question.format(who=name), evidence, 4, style, [*slices, "answer in reply"])

    text, caption, worded, para = PHOTOS[index % len(PHOTOS)]
    session = 6
    small_talk(session, 2)
    evidence = [say(session, a, text, caption)]
    say(session, b, "stunning")
    for k, (question, style) in enumerate(((worded, "worded"), (para, "paraphrase"))):
        name, slices = a_forms[k % len(a_forms)]
        ask(question.format(who=name), evidence, 4, style, [*slices, "photo"])

    topics = [
        (a, a_forms, b, LISTS[index % 3]),
        (a, a_forms, b, LISTS[(index + 1) % 3]),
        (b, b_forms, a, LISTS[(index + 2) % 3]),
    ]
    for number, (teller, forms, other, (turns, aside, worded, para)) in enumerate(topics):
        evidence = []
        for step, line in enumerate(turns):
            session = (1 + number + step * 2) % SESSIONS
            small_talk(session, rng.randint(1, 3))
            evidence.append(say(session, teller, line))
            if step == 2:
                say(session, other, aside)
            else:
                say(session, other, rng.choice(SHORT))
        for k, (question, style) in enumerate(((worded, "worded"), (para, "paraphrase"))):
            name, slices = forms[(number + k) % len(forms)]
            ask(question.format(who=name), evidence, 1, style, [*slices, "list"])

    both = [BOTH[index % 2], BOTH[2]]
    for number, (first_lines, second_lines, worded, para) in enumerate(both):
        evidence = []
        for step, (first_line, second_line) in enumerate(zip(first_lines, second_lines, strict=True)):
            session = 3 + number * 4 + step * 2
            small_talk(session, 2)
            evidence.append(say(session, a, first_line))
            small_talk(session + 1, 2)
            evidence.append(say(session + 1, b, second_line))
        a_name, a_slices = a_forms[(index + number) % len(a_forms)]
        b_name, b_slices = b_forms[(index + number) % len(b_forms)]
        for question, style in ((worded, "worded"), (para, "paraphrase")):
            slices = [*a_slices, *b_slices, "both speakers", *(["list"] if len(evidence) >= 4 else [])]
            ask(question.format(a=a_name, b=b_name), evidence, 1, style, slices)

    for session in range(SESSIONS):
        small_talk(session, rng.randint(4, 9))
    return sample.finish(f"fresh-{index}", a, b, dates)


def build_all() -> list[dict]:
    return [build(index) for index in range(len(PAIRS))]


def main(argv: list[str]) -> int:
    return write_or_check(argv, PATH, build_all, "bench.chat_fresh_dataset")


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
