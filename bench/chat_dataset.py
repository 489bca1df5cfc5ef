"""A messy-chat evaluation set, deterministic, committed as data (`evals/datasets/chat_recall.json`).

    python -m bench.chat_dataset            # rewrite evals/datasets/chat_recall.json from this file
    python -m bench.chat_dataset --check    # exit 1 when the committed file differs from it

Six two-person chats over ten dated sessions each, written the way people text rather than the
way a model writes a dialogue: one speaker is recorded under an account name but goes by another
("btw everyone calls me Jo"), the other's name is misspelt now and then; most messages are a few
words ("lol", "omg 😂", "Thanks Jo!"), the other person's replies address the teller by name
("Looks incredible Jo.", "How about you Jo?"), photos come as a caption of the picture
(`blip_caption`, as LoCoMo's samples carry it), events are told in the first person across
sessions.

The file has LoCoMo's sample shape (`conversation` with `speaker_a`, `speaker_b`, `session_N`,
`session_N_date_time`; `qa` with `question`, `evidence`, `category` 1 multi-hop, 2 temporal,
4 single-hop), so `bench.locomo_eval` reads it. Each question also carries `style` (`worded`:
reuses the evidence's words; `paraphrase`: other words), `split` (conversations 0-3 held in,
4-5 held out: storylines and people the held-in chats never contain) and `slices`: `name
recorded` (the question holds a recorded speaker name) or `name not recorded` (a nickname, a
first name of a recorded full name, a misspelling), `misspelt`, `temporal`, `both speakers`,
`list` (evidence in 4+ turns of several sessions).

The questions were written with the storylines, before any ranking change was tried on them.
"""

from __future__ import annotations

import random
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.chat_sample import Sample, write_or_check

PATH = Path(__file__).resolve().parent.parent / "evals" / "datasets" / "chat_recall.json"
SESSIONS = 10
HELD_IN = (0, 1, 2, 3)


@dataclass(frozen=True)
class People:
    """Who is in one chat: `a` is recorded as `a_recorded` and called `a_nick` (her
    self-introduction `a_intro` says so; `a_typo` misspells the nickname); `b` is recorded as
    `b_recorded`, misspelt `b_typo`, sometimes called `b_nick`."""

    a_recorded: str
    a_nick: str
    a_typo: str
    a_intro: str
    b_recorded: str
    b_typo: str
    b_nick: str

    def a_forms(self) -> list[tuple[str, list[str]]]:
        forms = [(self.a_recorded, ["name recorded"]), (self.a_nick, ["name not recorded"])]
        forms.append((self.a_typo, ["name not recorded", "misspelt"]))
        if " " in self.a_recorded:
            forms.append((self.a_recorded.split()[0], ["name not recorded"]))
        return forms

    def b_forms(self) -> list[tuple[str, list[str]]]:
        forms = [(self.b_recorded, ["name recorded"]), (self.b_typo, ["name not recorded", "misspelt"])]
        if self.b_nick != self.b_recorded:
            forms.append((self.b_nick, ["name not recorded"]))
        return forms


PEOPLE = (
    People(
        "Joanna Whitfield", "Jo", "Joe", "btw everyone calls me Jo, nobody says Joanna 😂", "Marcus", "Markus", "Marc"
    ),
    People(
        "kat_b92", "Katie", "Katy", "I'm Katie btw, kat_b92 is just my old gamer tag lol", "Dmitri", "Dimitri", "Dima"
    ),
    People(
        "Siobhan Keane",
        "Shiv",
        "Shiv",
        "call me Shiv, literally no one can spell Siobhan",
        "Ben Okafor",
        "Benn",
        "Benny",
    ),
    People("Alejandro Ruiz", "Alex", "Alec", "just Alex is fine, Alejandro is for my abuela", "Priya", "Pirya", "Pri"),
    People(
        "Margaret Doyle",
        "Maggie",
        "Maggy",
        "oh and it's Maggie, only the bank calls me Margaret",
        "Tom",
        "Tomm",
        "Tommy",
    ),
    People("rlindqvist", "Rae", "Ray", "I'm Rae! the account name is my work one, sorry", "Hamid", "Hamed", "Ham"),
)

# A storyline: the teller's turns (the first is the evidence; a later one, when given, is told in a
# later session and is evidence too), the friend's reply, a photo caption or "", a worded and a
# paraphrased question, and a "when" question (temporal) or "". {who} is how the question names
# the teller.
Story = tuple[list[str], str, str, str, str, str]

STORIES_IN: list[Story] = [
    (
        ["We finally picked up the puppy from the shelter on saturday!! his name is Biscuit"],
        "omg Biscuit 😍",
        "a photo of a small brown puppy sleeping on a grey couch",
        "What did {who} say about picking up the puppy from the shelter?",
        "Which dog did {who} bring home from the rescue, and what is it called?",
        "When did {who} adopt the dog?",
    ),
    (
        ["got the offer!!! starting as junior designer at a branding studio next month"],
        "ahhh congrats!!",
        "",
        "What offer did {who} get at the branding studio?",
        "What new job did {who} land?",
        "When did {who} get the new job?",
    ),
    (
        ["signed the lease on a flat in Leith, moving on the 3rd"],
        "Leith is so nice",
        "a photo of an empty living room with big windows",
        "Where did {who} sign the lease on a flat?",
        "Which neighbourhood is {who} moving to?",
        "When did {who} sign for the new place?",
    ),
    (
        ["sprained my ankle at football, on crutches for two weeks 🙄"],
        "nooo",
        "",
        "How did {who} sprain an ankle?",
        "What injury did {who} pick up playing sport?",
        "",
    ),
    (
        ["my sister Ana had her baby, a little girl called Rosa"],
        "aww congrats auntie!",
        "a photo of a newborn baby in a pink blanket",
        "What did {who} say about sister Ana having her baby?",
        "What is the name of {who}'s new niece?",
        "When was {who}'s niece born?",
    ),
    (
        ["passed my driving test on the third try 🚗"],
        "about time haha",
        "",
        "What did {who} say about passing the driving test?",
        "Did {who} finally get a licence to drive?",
        "When did {who} pass the driving test?",
    ),
    (
        ["booked flights to Lisbon for the end of may"],
        "jealous!!",
        "",
        "Where did {who} book flights to?",
        "Which city is {who} travelling to in late spring?",
        "",
    ),
    (
        ["the landlord is finally fixing the boiler, 3 weeks of cold showers"],
        "ugh finally",
        "",
        "What is the landlord fixing for {who}?",
        "What broke at {who}'s place and left them without hot water?",
        "",
    ),
]
STORIES_OUT: list[Story] = [
    (
        ["I quit the bakery job, last shift was friday"],
        "wow big move",
        "",
        "What did {who} say about quitting the bakery job?",
        "Which workplace did {who} leave?",
        "When did {who} leave the bakery?",
    ),
    (
        ["we got a kitten!! she's called Pickle and she bites everything"],
        "PICKLE 😂",
        "a photo of a grey kitten chewing a shoelace",
        "What did {who} say about getting a kitten called Pickle?",
        "What new pet does {who} have, and what is its name?",
        "When did {who} get the cat?",
    ),
    (
        ["my grandad turned 90 on sunday, whole family came"],
        "90!! amazing",
        "a photo of an old man blowing out candles on a cake",
        "What did {who} say about grandad turning 90?",
        "Whose big birthday did {who}'s family celebrate?",
        "When was the grandfather's birthday party?",
    ),
    (
        ["started night classes in Spanish, tuesdays and thursdays"],
        "muy bien",
        "",
        "What night classes did {who} start?",
        "Which language is {who} studying in the evenings?",
        "When did {who} start learning the language?",
    ),
    (
        ["the car broke down on the motorway, towed home"],
        "oh no are you ok",
        "",
        "What happened when {who}'s car broke down on the motorway?",
        "What went wrong with {who}'s vehicle on the road?",
        "",
    ),
    (
        ["ran my first half marathon, 2:05 🏃"],
        "beast",
        "",
        "What did {who} say about running a first half marathon?",
        "What long race did {who} complete and in what time?",
        "When did {who} run the race?",
    ),
    (
        ["moving in with Sam next month, finally"],
        "ahh so exciting",
        "",
        "What did {who} say about moving in with Sam?",
        "Who is {who} going to live with?",
        "",
    ),
    (
        ["got glasses today, everything is so sharp now 🤓"],
        "show me!",
        "a photo of a woman in round tortoiseshell glasses",
        "What did {who} say about getting glasses?",
        "What did {who} start wearing to see better?",
        "",
    ),
]
# list storylines: four turns of the teller in four sessions, one list question (worded, paraphrase).
LISTS_IN = (
    [
        "tried bouldering for the first time, arms are dead 😅",
        "signed up for a pottery class on thursdays",
        "learning the ukulele, only 3 chords so far lol",
        "joined a running club, sundays at 8 ugh",
    ],
    "What has {who} tried, signed up for, learned or joined lately?",
    "What hobbies has {who} picked up this year?",
)
LISTS_OUT = (
    [
        "made a sourdough loaf from scratch, it actually rose",
        "tried a thai green curry recipe tonight 🌶️",
        "baked cinnamon rolls for the office",
        "first attempt at homemade ramen, broth took 6 hours",
    ],
    "What did {who} make, try, bake or attempt in the kitchen?",
    "What dishes has {who} cooked recently?",
)
# both-speaker storylines: one turn each (a, then b a session later), worded and paraphrased question.
BOTH_IN = [
    (
        "I went to Kraków for a work thing, gorgeous old town",
        "wait I was in Kraków last spring too!",
        "Which city did {a} and {b} both say they were in?",
        "Which place have {a} and {b} both visited?",
    ),
    (
        "binged the whole of Severance this weekend",
        "I finished Severance last week haha",
        "What show did {a} and {b} both binge or finish?",
        "Which TV series have {a} and {b} both watched?",
    ),
]
BOTH_OUT = [
    (
        "went to the Arctic Monkeys gig in Glasgow, voice is gone",
        "I saw Arctic Monkeys in 2018 best night ever",
        "Which band did {a} and {b} both see?",
        "What group have {a} and {b} both seen live?",
    ),
    (
        "my allergy to cats is acting up again",
        "same, I'm allergic to cats too 🤧",
        "What allergy do {a} and {b} both have?",
        "What are {a} and {b} both allergic to?",
    ),
]
SHORT = [
    "lol",
    "haha",
    "omg 😂",
    "same tbh",
    "ok",
    "👍",
    "❤️",
    "brb",
    "night!",
    "morning!",
    "ugh mondays",
    "hahaha yes",
    "nooo",
    "true",
    "wait what",
    "🙈",
    "sounds good",
    "k",
    "yesss",
    "so tired today",
]
VOCATIVE = [
    "Looks incredible {n}.",
    "How about you {n}?",
    "Thanks {n}!",
    "Miss you {n} 😘",
    "Good luck {n}!!",
    "so proud of you {n}",
    "You're the best {n}",
    "haha classic {n}",
    "Night {n}",
    "Morning {n}!",
]
TO_B = ["thanks {n}!", "love that {n}", "How was your day {n}?", "night {n} x"]
FILLER_A = [
    "work was a lot today",
    "need a holiday",
    "made pasta again lol",
    "it's raining AGAIN",
    "watching something dumb on tv",
    "coffee number 3",
    "the bus was late again",
    "can't sleep",
]
FILLER_B = [
    "long day",
    "gym then bed",
    "ordered pizza 🍕",
    "meeting ran over",
    "cold out today",
    "traffic was awful",
    "need coffee",
    "just got home",
]


def _session_dates(index: int) -> list[datetime]:
    start = datetime(2024, 1, 8, 19, 0, tzinfo=UTC) + timedelta(days=11 * index)
    return [start + timedelta(days=13 * s + (s % 3), hours=s % 4) for s in range(SESSIONS)]


def build(index: int) -> dict:
    """Conversation `index` as a LoCoMo sample."""
    rng = random.Random(1000 + index)
    people = PEOPLE[index]
    held_in = index in HELD_IN
    stories = list(STORIES_IN if held_in else STORIES_OUT)
    rng.shuffle(stories)
    a_stories, b_stories = stories[:5], stories[5:8]
    list_turns, list_worded, list_para = LISTS_IN if held_in else LISTS_OUT
    both = BOTH_IN if held_in else BOTH_OUT
    sample = Sample(SESSIONS, "held-in" if held_in else "held-out")
    say, ask = sample.say, sample.ask
    a, b = people.a_recorded, people.b_recorded

    def small_talk(session: int, count: int) -> None:
        for _ in range(count):
            roll = rng.random()
            if roll < 0.3:
                say(session, b, rng.choice(VOCATIVE).format(n=people.a_nick))
            elif roll < 0.4:
                say(session, a, rng.choice(TO_B).format(n=rng.choice([people.b_nick, b, people.b_typo])))
            elif roll < 0.7:
                say(session, rng.choice([a, b]), rng.choice(SHORT))
            else:
                say(session, a, rng.choice(FILLER_A)) if rng.random() < 0.5 else say(session, b, rng.choice(FILLER_B))

    a_forms, b_forms = people.a_forms(), people.b_forms()
    dates = _session_dates(index)
    say(0, b, "heyy")
    say(0, a, people.a_intro)
    say(0, b, f"haha ok {people.a_nick} it is")
    plan = [(a, s, a_forms) for s in a_stories] + [(b, s, b_forms) for s in b_stories]
    for number, (teller, story, forms) in enumerate(plan):
        session = 1 + (number * 7) % (SESSIONS - 1)
        small_talk(session, rng.randint(3, 6))
        turns, reply, caption, worded, para, when = story
        evidence = [say(session, teller, turns[0], caption)]
        listener = b if teller == a else a
        say(session, listener, reply if teller == b else f"{reply} {people.a_nick}".strip())
        small_talk(session, rng.randint(2, 5))
        for k, (question, style) in enumerate(((worded, "worded"), (para, "paraphrase"))):
            name, slices = forms[(number + k) % len(forms)]
            ask(question.format(who=name), evidence, 4, style, slices)
        if when:
            name, slices = forms[(number + 2) % len(forms)]
            ask(when.format(who=name), evidence, 2, "paraphrase", [*slices, "temporal"])
        if number % 3 == 0:
            name, slices = forms[(number + 1) % len(forms)]
            day = f"{dates[session]:%-d %B %Y}"
            ask(f"What was {name} up to around {day}?", evidence, 2, "paraphrase", [*slices, "temporal"])
    list_evidence = []
    for step, text in enumerate(list_turns):
        session = 2 + step * 2
        small_talk(session, rng.randint(2, 4))
        list_evidence.append(say(session, a, text))
        say(session, b, rng.choice(VOCATIVE).format(n=people.a_nick))
    for k, (question, style) in enumerate(((list_worded, "worded"), (list_para, "paraphrase"))):
        name, slices = a_forms[k % len(a_forms)] if k == 0 else a_forms[1]
        ask(question.format(who=name), list_evidence, 1, style, [*slices, "list"])
    for number, (a_text, b_text, worded, para) in enumerate(both):
        first, second = 3 + number * 3, 4 + number * 3
        small_talk(first, 2)
        evidence = [say(first, a, a_text)]
        small_talk(second, 2)
        evidence.append(say(second, b, b_text))
        a_name, a_slices = a_forms[number % len(a_forms)]
        b_name, b_slices = b_forms[number % len(b_forms)]
        for question, style in ((worded, "worded"), (para, "paraphrase")):
            ask(question.format(a=a_name, b=b_name), evidence, 1, style, [*a_slices, *b_slices, "both speakers"])
    for session in range(SESSIONS):
        small_talk(session, rng.randint(4, 8))
    return sample.finish(f"chat-{index}", a, b, dates)


def build_all() -> list[dict]:
    return [build(index) for index in range(len(PEOPLE))]


def main(argv: list[str]) -> int:
    return write_or_check(argv, PATH, build_all, "bench.chat_dataset")


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
