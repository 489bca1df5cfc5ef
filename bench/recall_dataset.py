"""A realistic, deterministic evaluation set for memory and knowledge-base retrieval (no model).

`build_conversations()` gives six long conversations between two friends, each about 450 turns in
26 dated sessions spread over 7-9 months, in the style of public long-conversation benchmarks:
life events told in the first person across sessions (`STORYLINES`: a step introduces a name or a
fact, a later step refers back to it), facts that change (a move, a new job), the other speaker's
reactions, and a lot of small talk that shares the events' vocabulary (distractors).

Questions were written with the storylines, before any retrieval tuning, in words away from the
evidence's ("bring home from the rescue center" for "picked up from the shelter"). Categories:

- `single-hop`: one turn answers it;
- `multi-hop`: needs two turns of different sessions (a later turn names what an earlier one
  introduced: the dog's name, the new city);
- `temporal`: "when did ...", and "what did X do in the week after ..." (evidence: the speaker's
  event turns 1-8 days after the anchor event);
- `dated`: "what was X up to in the week of 8 May 2023?" (evidence: X's event turns in the
  Monday-to-Sunday week holding that date);
- `changed`: the current value of a fact that changed (evidence: the newest statement; the older
  one is `stale`);
- `exchange`: how the other person took a piece of news and what the teller added (evidence: the
  news, the other's reaction and the teller's follow-up, three turns in a row; the reaction and
  the follow-up carry no word of the topic, the turn before them does).

Each question has a `style`: `paraphrase` (the above, worded away from the evidence) or `worded`
(a second set reusing the evidence's own words, as people do when they remember what was said:
"What did Maya say about picking up a greyhound from the shelter?"; single-hop and exchange
questions, the answer's own words left out). Both sets were generated before any tuning on them.

Conversations 0-3 draw their storylines from `STORYLINES[:HELD_IN_STORYLINES]` (held in: tune on
these), conversations 4-5 from the rest (held out: confirm only). Same seed, same data.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

HELD_IN_CONVERSATIONS = (0, 1, 2, 3)
HELD_OUT_CONVERSATIONS = (4, 5)
CATEGORIES = ("single-hop", "multi-hop", "temporal", "dated", "changed", "exchange")
STYLES = ("paraphrase", "worded")
SPEAKERS = (
    ("Maya", "Tom"),
    ("Priya", "Daniel"),
    ("Elena", "Marcus"),
    ("Sofia", "Ben"),
    ("Aisha", "Leo"),
    ("Hannah", "Omar"),
)
SESSIONS = 26
STORYLINES_PER_SPEAKER = 6


@dataclass(frozen=True)
class Turn:
    """One message of a conversation; `text` is "Name: words" as an integrator would store it."""

    id: str
    conversation: int
    session: int
    at: datetime
    speaker: str
    role: str  # first speaker "user", second "assistant" (memory chat roles)
    text: str


@dataclass(frozen=True)
class Question:
    """A question, the turns that answer it, and the outdated turns of a changed fact."""

    id: str
    conversation: int
    category: str
    text: str
    evidence: tuple[str, ...]
    stale: tuple[str, ...] = ()
    style: str = "paraphrase"

    @property
    def split(self) -> str:
        return "held-out" if self.conversation in HELD_OUT_CONVERSATIONS else "held-in"


@dataclass
class Conversation:
    """Turns in time order and the questions about them."""

    index: int
    speakers: tuple[str, str]
    turns: list[Turn] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)


@dataclass(frozen=True)
class Storyline:
    """Steps told by one speaker in different sessions: (statement, question) each; `multi` asks
    about two steps (indices); `changed` asks for the value the last step set (first is stale);
    `gist` names the first step for temporal questions; `fills` are per-conversation variants."""

    steps: tuple[tuple[str, str], ...]
    gist: str
    multi: tuple[str, tuple[int, ...]] | None = None
    changed: str | None = None
    fills: dict[str, tuple[str, ...]] = field(default_factory=dict)


S = Storyline
STORYLINES: tuple[Storyline, ...] = (
    # ---- held in ---------------------------------------------------------------------------
    S(
        (
            (
                "We finally did it, we picked up a {breed} from the shelter on Saturday. Her name is {pet}!",
                "What breed of dog did {A} bring home from the rescue center?",
            ),
            (
                "{pet} chewed through my favourite running shoes this morning, I can't even be mad at her.",
                "Which of {A}'s belongings did the puppy ruin?",
            ),
            (
                "Signed {pet} up for agility classes on Thursdays, she flies through the tunnels.",
                "What weekly activity does {A}'s pup take part in?",
            ),
        ),
        "bringing home a dog from the rescue center",
        multi=("What sport did {A} enroll the animal adopted from the shelter in?", (0, 2)),
        fills={"breed": ("greyhound", "beagle mix", "border collie"), "pet": ("Biscuit", "Juniper", "Pickles")},
    ),
    S(
        (
            (
                "Our apartment in {city1} is tiny but I love walking to the farmers market on Sundays.",
                "Which city did {A} live in before relocating?",
            ),
            (
                "Big news, I accepted the offer and we're packing up to move to {city2} next month.",
                "Where is {A} relocating to?",
            ),
            (
                "First week in {city2} done. The new place has a balcony that looks out on the river.",
                "What can {A} see from the new home?",
            ),
        ),
        "loving the tiny apartment near the Sunday market",
        multi=("What view does {A} have after leaving the small flat near the farmers market?", (0, 2)),
        changed="Which city is {A} based in these days?",
        fills={"city1": ("Portland", "Leeds", "Austin"), "city2": ("Denver", "Glasgow", "Seattle")},
    ),
    S(
        (
            (
                "I ran my first half marathon today in {time}! My legs are jelly.",
                "How long did it take {A} to finish the 21 km race?",
            ),
            (
                "Registered for the full marathon in {month}, training starts Monday.",
                "Which month is {A}'s 42 km race in?",
            ),
        ),
        "finishing a half marathon",
        multi=("After completing a 21 km race, what longer event did {A} commit to and when?", (0, 1)),
        fills={
            "time": ("2 hours 4 minutes", "1 hour 58 minutes", "2 hours 15 minutes"),
            "month": ("October", "April", "November"),
        },
    ),
    S(
        (
            (
                "My grandma taught me her {dish} recipe over video call, it took three tries to get it right.",
                "Which family recipe did {A} learn from a grandparent?",
            ),
            (
                "Made the {dish} for the potluck at work and it was gone in ten minutes.",
                "What did {A} bring to the office shared meal?",
            ),
        ),
        "learning a family recipe from grandma",
        multi=("Whose recipe was the dish {A}'s colleagues finished so quickly?", (0, 1)),
        fills={"dish": ("pierogi", "dal makhani", "paella")},
    ),
    S(
        (
            (
                "I started at {company1} as a junior designer, the team is lovely but the commute is long.",
                "Where did {A} first work as a designer?",
            ),
            (
                "I handed in my notice. I'm joining {company2} as a product lead in three weeks.",
                "What new role is {A} taking on?",
            ),
        ),
        "starting as a junior designer",
        changed="Which company does {A} work for now?",
        fills={
            "company1": ("Brightline", "Oakwave", "Tandem Labs"),
            "company2": ("Northwind", "Fernhill Studio", "Kestrel"),
        },
    ),
    S(
        (
            (
                "My sister {sister} is getting married in the spring and asked me to give the speech!",
                "Who asked {A} to stand beside them at a wedding?",
            ),
            (
                "The wedding was perfect. I cried through my whole speech and {sister} laughed at me.",
                "How did {A}'s toast at the ceremony go?",
            ),
        ),
        "the sister's wedding",
        multi=("What happened during the speech at the wedding of {A}'s sibling?", (0, 1)),
        fills={"sister": ("Nora", "Leila", "Grace")},
    ),
    S(
        (
            (
                "I bought a secondhand {instrument} off a neighbour, I want to finally learn to play.",
                "What musical instrument did {A} get used?",
            ),
            (
                "I played my first song on the {instrument} at the open mic, hands shaking the whole time.",
                "Where did {A} perform in public for the first time?",
            ),
        ),
        "buying a used instrument",
        multi=("Where did {A} first perform with the instrument bought from a neighbour?", (0, 1)),
        fills={"instrument": ("cello", "ukulele", "banjo")},
    ),
    S(
        (
            (
                "Got back from {trip} yesterday. Best part was the night we slept in a desert camp.",
                "What was the highlight of {A}'s recent holiday?",
            ),
            (
                "I printed the photos from {trip} and made an album for my mom's birthday.",
                "What gift did {A} make for a parent?",
            ),
        ),
        "returning from a big trip abroad",
        multi=("The birthday album {A} made had pictures of which journey?", (0, 1)),
        fills={"trip": ("Morocco", "Jordan", "Oman")},
    ),
    S(
        (
            (
                "I sprained my ankle playing five-a-side football, the doctor says six weeks off.",
                "How did {A} get injured?",
            ),
            (
                "Physio says my ankle is healed, so I'm allowed to run again from next week.",
                "When can {A} go back to jogging?",
            ),
        ),
        "hurting an ankle during a football match",
        fills={},
    ),
    S(
        (
            (
                "I've been volunteering at the {place} on Wednesday evenings, sorting donations.",
                "How does {A} give back to the community?",
            ),
            (
                "The {place} asked me to coordinate the Saturday volunteers now.",
                "What new responsibility was {A} offered at the charity?",
            ),
        ),
        "starting volunteer work",
        multi=("Where does {A} lead the weekend helpers?", (0, 1)),
        fills={"place": ("food bank", "animal shelter", "community library")},
    ),
    S(
        (
            (
                "We're growing {veg} on the allotment this year, the soil is finally good.",
                "What is {A} cultivating in the garden plot?",
            ),
            ("The {veg} won second prize at the village show!", "What did {A} win an award for?"),
        ),
        "planting the allotment",
        multi=("What prize did {A}'s garden plot produce earn?", (0, 1)),
        fills={"veg": ("giant pumpkins", "heirloom tomatoes", "runner beans")},
    ),
    S(
        (
            ("I'm taking an evening course in {subject} at the community college.", "What is {A} studying at night?"),
            ("Passed the {subject} final exam with a distinction!", "How did {A} do on the end-of-term test?"),
        ),
        "enrolling in an evening course",
        multi=("Which evening-class subject did {A} get top marks in?", (0, 1)),
        fills={"subject": ("Spanish", "accounting", "photography")},
    ),
    S(
        (
            (
                "My car finally died, so I bought an e-bike to get to work.",
                "How does {A} commute now that the car is gone?",
            ),
            (
                "Someone stole the e-bike from outside the station, I'm gutted.",
                "What did {A} have taken from the train station?",
            ),
        ),
        "the car breaking down for good",
        changed="What happened to {A}'s new way of getting to work?",
        fills={},
    ),
    S(
        (
            (
                "My best friend {friend} from school is visiting from {country} next week.",
                "Who is coming to see {A} from overseas?",
            ),
            (
                "{friend} and I went to the lake and talked until 3am, like old times.",
                "How did {A} spend time with the old classmate?",
            ),
        ),
        "a school friend's visit from abroad",
        multi=("What did {A} do with the visitor from {country}?", (0, 1)),
        fills={"friend": ("Jess", "Ravi", "Mateo"), "country": ("Australia", "Canada", "Brazil")},
    ),
    S(
        (
            ("I've decided to go vegetarian, mostly for the climate.", "What diet change did {A} make?"),
            (
                "Okay confession: I'm eating fish again, being vegetarian wasn't working for me.",
                "Does {A} still avoid all meat and seafood?",
            ),
        ),
        "giving up meat",
        changed="What does {A} eat these days regarding meat and fish?",
        fills={},
    ),
    S(
        (
            ("I finished knitting my first sweater, it's lumpy but it's {colour}!", "What did {A} make with yarn?"),
            ("Gave the {colour} sweater to my dad, he wears it every day now.", "Who wears the handmade jumper?"),
        ),
        "finishing a knitting project",
        multi=("What colour is the garment {A}'s father wears daily?", (0, 1)),
        fills={"colour": ("mustard yellow", "forest green", "navy")},
    ),
    S(
        (
            ("We adopted two kittens, {cat1} and {cat2}, they terrorise the curtains.", "What new pets does {A} have?"),
            (
                "{cat1} had to have surgery after swallowing a hair tie, the vet bill was huge.",
                "Why did one of {A}'s animals need an operation?",
            ),
        ),
        "getting kittens",
        multi=("Which of {A}'s young cats swallowed something and needed the vet?", (0, 1)),
        fills={"cat1": ("Miso", "Pepper", "Olive"), "cat2": ("Tofu", "Salt", "Basil")},
    ),
    S(
        (
            (
                "My novel manuscript got rejected by the fifth agent today.",
                "What setback did {A} have with their writing?",
            ),
            (
                "An agent finally said yes! She wants to pitch my book to publishers.",
                "What good news did {A} get about the manuscript?",
            ),
        ),
        "another rejection for the manuscript",
        changed="Does {A}'s book have representation now?",
        fills={},
    ),
    S(
        (
            ("I climbed {peak} with my dad, six hours up in fog and wind.", "Which mountain did {A} summit?"),
            (
                "My dad framed the summit photo from {peak} and hung it in his hallway.",
                "What did {A}'s father put on the wall?",
            ),
        ),
        "hiking up a mountain with dad",
        multi=("What picture hangs in the hallway of {A}'s hiking partner?", (0, 1)),
        fills={"peak": ("Ben Nevis", "Mount Rainier", "Snowdon")},
    ),
    S(
        (("I got my braces off today, I can't stop smiling at myself.", "What dental milestone did {A} reach?"),),
        "getting braces removed",
        fills={},
    ),
    S(
        (
            (
                "We're renovating the kitchen, we chose {tiles} tiles after weeks of arguing.",
                "What did {A} pick for the walls of the cooking area?",
            ),
            (
                "The builder flooded the downstairs, so the kitchen is delayed by a month.",
                "Why is the remodel behind schedule?",
            ),
        ),
        "starting the kitchen remodel",
        fills={"tiles": ("terracotta", "green zellige", "black and white checkered")},
    ),
    S(
        (
            ("I joined a choir, we rehearse in an old church on Tuesdays.", "What group does {A} sing with?"),
            (
                "Our choir sang at the Christmas concert and I had a short solo.",
                "What did {A} perform alone at the holiday show?",
            ),
        ),
        "joining a singing group",
        multi=("What did {A} do at the December event with the group that rehearses in a church?", (0, 1)),
        fills={},
    ),
    S(
        (
            (
                "My dad was diagnosed with type 2 diabetes, so I've been helping him with meals.",
                "What health news did {A}'s father get?",
            ),
            (
                "Dad's blood sugar is back in the normal range after three months of walking every day.",
                "How is {A}'s father's condition now?",
            ),
        ),
        "the dad's diagnosis",
        multi=("What improved for {A}'s parent after months of daily walks?", (0, 1)),
        fills={},
    ),
    S(
        (
            (
                "I'm learning to surf, I took lessons at {beach} and stood up twice.",
                "Where did {A} take a lesson on the waves?",
            ),
        ),
        "the first surf lessons",
        fills={"beach": ("Newquay", "Biarritz", "Byron Bay")},
    ),
    # ---- held out --------------------------------------------------------------------------
    S(
        (
            ("I adopted a parrot called {bird}, he already says good morning.", "What talking pet did {A} get?"),
            (
                "{bird} escaped out of the window and a neighbour caught him two streets away.",
                "What happened when {A}'s bird got out?",
            ),
        ),
        "getting a talking bird",
        multi=("Who brought back {A}'s feathered pet after it flew off?", (0, 1)),
        fills={"bird": ("Captain", "Mango", "Kiwi")},
    ),
    S(
        (
            (
                "We live in a flat in {city1}, right above a bakery, it always smells of bread.",
                "What is underneath {A}'s home?",
            ),
            (
                "We signed the lease on a house in {city2}, moving in on the first of the month.",
                "What kind of place did {A} rent next?",
            ),
        ),
        "living above a bakery",
        changed="Which town is {A}'s home in now?",
        fills={"city1": ("Lyon", "Bristol", "Porto"), "city2": ("Annecy", "Bath", "Braga")},
    ),
    S(
        (
            ("I was promoted to head nurse on the {ward} ward!", "What step up did {A} get in the hospital?"),
            (
                "I moved from the {ward} ward to the emergency department, much more chaotic.",
                "Which hospital unit does {A} work in now?",
            ),
        ),
        "the promotion at the hospital",
        changed="Where in the hospital does {A} currently work?",
        fills={"ward": ("children's", "maternity", "cardiology")},
    ),
    S(
        (
            (
                "I started pottery lessons, my first bowl looks like an ashtray.",
                "What craft is {A} learning with clay?",
            ),
            (
                "Sold six mugs at the craft fair, people actually paid for my pottery!",
                "What did {A} sell at the market?",
            ),
        ),
        "starting ceramics classes",
        multi=("What items made in {A}'s clay class were bought by strangers?", (0, 1)),
        fills={},
    ),
    S(
        (
            (
                "My son {son} lost his first tooth and wrote a letter to the tooth fairy.",
                "What did {A}'s child write after a milestone?",
            ),
            (
                "{son} started primary school today, he marched in without looking back.",
                "How did {A}'s boy handle his first school day?",
            ),
        ),
        "the son losing a first tooth",
        multi=("How did the child who wrote to the tooth fairy cope on starting school?", (0, 1)),
        fills={"son": ("Finn", "Arjun", "Luca")},
    ),
    S(
        (
            (
                "I'm training for a triathlon, the swimming part scares me the most.",
                "Which part of the multi-sport race worries {A}?",
            ),
            (
                "Finished the triathlon in {time}, and I didn't drown!",
                "How long did {A} take for the swim-bike-run race?",
            ),
        ),
        "signing up for a triathlon",
        fills={"time": ("3 hours 10 minutes", "2 hours 50 minutes", "3 hours 30 minutes")},
    ),
    S(
        (
            (
                "Our band is called {band}, we play covers in pubs on Fridays.",
                "What is the name of the group {A} plays music with?",
            ),
            (
                "{band} recorded our first original song in a real studio this weekend.",
                "What did {A}'s musicians record?",
            ),
        ),
        "forming a pub band",
        multi=("What did the band that plays pub covers on Fridays do in the studio?", (0, 1)),
        fills={"band": ("The Loose Ends", "Paper Moons", "Static Bloom")},
    ),
    S(
        (
            ("I've been sleeping terribly, so I bought a weighted blanket.", "What did {A} purchase to fix insomnia?"),
            (
                "Been sleeping eight hours straight since I stopped drinking coffee after noon.",
                "What habit change improved {A}'s rest?",
            ),
        ),
        "buying a weighted blanket",
        changed="Is {A} still struggling to sleep?",
        fills={},
    ),
    S(
        (
            (
                "We took the kids camping in {park}, it rained all three days.",
                "What was the weather like on {A}'s family outdoor trip?",
            ),
            (
                "Booked {park} again for summer, the kids insist, rain or not.",
                "Where is {A} taking the children for the summer holiday?",
            ),
        ),
        "the rainy family camping weekend",
        multi=("Which place is {A} returning to despite the downpours last time?", (0, 1)),
        fills={"park": ("Yosemite", "the Lake District", "Banff")},
    ),
    S(
        (
            (
                "My mum gave me her old sewing machine, I'm making curtains for the bedroom.",
                "What is {A} stitching for the home?",
            ),
        ),
        "inheriting a sewing machine",
        fills={},
    ),
    S(
        (
            ("I passed my driving test on the third attempt!", "What license did {A} finally get?"),
            ("Bought a little {car}, it's ten years old but runs great.", "What vehicle did {A} get?"),
        ),
        "passing the driving test",
        multi=("What did {A} buy after qualifying to drive?", (0, 1)),
        fills={"car": ("Fiat Panda", "Honda Jazz", "Toyota Yaris")},
    ),
    S(
        (
            ("I'm reading my way through every {author} novel this year.", "Whose books is {A} working through?"),
            (
                "Met {author} at a book signing, I was so nervous I forgot my own name.",
                "Which writer did {A} meet in person?",
            ),
        ),
        "starting a reading challenge",
        multi=("Did {A} get to meet the author of the books being read all year?", (0, 1)),
        fills={"author": ("Ursula Le Guin", "Kazuo Ishiguro", "Terry Pratchett")},
    ),
)
HELD_IN_STORYLINES = 24

# Small talk: openings, replies and chatter that share the storylines' vocabulary.
OPENERS = (
    "Hey {B}! How's your week been?",
    "Morning {B}, long time no chat!",
    "Hi {B}, got a minute?",
    "Hey! Sorry I went quiet, it's been a hectic few days.",
    "Hiya {B}, guess what happened.",
    "Good evening! How are things on your side?",
)
REPLIES = (
    "Not bad at all, a bit tired but happy.",
    "Busy as always, but good!",
    "Oh, it's been a week.",
    "All good here, just catching up on sleep.",
    "Pretty quiet, which I needed honestly.",
)
REACTIONS = (
    "No way, that's amazing {A}!",
    "Oh wow, how are you feeling about it?",
    "That's huge, congrats!",
    "Oh no, that sounds rough.",
    "Ha, I love that. Tell me more.",
    "Wait, really? When did that happen?",
    "That's so you, honestly.",
    "I'm so happy for you!",
)
FOLLOWUPS = (
    "Yeah, still processing it to be honest.",
    "Thanks! It's been a lot, but worth it.",
    "I'll send you pictures later.",
    "Honestly I didn't expect it at all.",
    "It was a whole adventure, I'll tell you properly next time.",
    "We'll see how it goes!",
)
CHATTER = (
    "The weather has been so grey lately, I miss the sun.",
    "Did you watch the new season of that baking show?",
    "My neighbour's dog barks every time the postman comes.",
    "I've been thinking about moving somewhere warmer one day.",
    "Work has been crazy, my manager keeps adding projects.",
    "I made soup again, I'm in a soup phase.",
    "The train was late again this morning.",
    "I need a holiday, even just a weekend away.",
    "I tried a new coffee place near the office, it was fine.",
    "Do you think cats or dogs are easier to look after?",
    "My back hurts from sitting all day, I should stretch more.",
    "Have you read anything good recently?",
    "The kids next door are learning the drums. Send help.",
    "I keep buying plants and then forgetting to water them.",
    "My phone screen cracked again, third time this year.",
    "We had friends over for dinner, I overcooked the rice.",
    "Running in the cold is the worst, my lungs burn.",
    "I'm trying to spend less time on my phone.",
    "My mom called for an hour about her new neighbours.",
    "The gym was packed tonight, I gave up and went home.",
    "Been listening to a podcast about old shipwrecks, weirdly relaxing.",
    "I finally cleaned out the garage.",
    "Traffic on the ring road was a nightmare.",
    "I signed up for a newsletter about gardening, too many emails now.",
    "We're thinking about redoing the bathroom at some point.",
    "My cousin just got engaged, big family party soon.",
    "There's a music festival in town next month.",
    "I burned my hand on the oven tray, rookie mistake.",
    "The library near me started opening on Sundays.",
    "I can't decide whether to learn Italian or French.",
    "My friend's band played at the pub down the road, they were loud.",
    "I should really book a dentist appointment.",
    "We walked along the river on Sunday, the ducks were out in force.",
    "I watched a documentary about mountaineers.",
    "My laptop is so slow, I think it's dying.",
    "The cat from upstairs keeps sneaking into our flat.",
    "I signed up for a charity run but haven't trained at all.",
    "The farmer's market had amazing strawberries.",
    "I'm so tired of video calls.",
    "Did you ever try that Thai place on the corner?",
    "Honestly, I just want to sleep for a week.",
    "I bought new running shoes but they give me blisters.",
    "My sister sent me a video of her baby laughing, I watched it twenty times.",
    "We got a new printer at work and nobody can use it.",
    "I found an old photo album in the attic, so many bad haircuts.",
    "My dad wants to learn to use his smartphone properly.",
    "The heating broke again, the landlord is useless.",
    "We're planning a barbecue if it ever stops raining.",
)
SMALL_REPLIES = (
    "Ha, same here.",
    "I know what you mean.",
    "Oh, that's annoying.",
    "Honestly relatable.",
    "Haha, classic.",
    "That sounds nice, actually.",
    "Ugh, I feel that.",
    "You should, it'd be good for you.",
    "Tell me about it.",
    "I was just thinking the same thing.",
)
CLOSERS = (
    "Anyway, I have to run. Talk soon!",
    "Okay, dinner's ready, catch you later!",
    "Speak soon, take care!",
    "Right, bedtime for me. Night!",
)


def _fill(storyline: Storyline, rng: random.Random) -> dict[str, str]:
    return {name: rng.choice(options) for name, options in storyline.fills.items()}


def build_conversations(seed: int = 2024) -> list[Conversation]:
    """The six conversations with their questions (deterministic for a seed)."""
    return [_conversation(index, random.Random(seed * 100 + index)) for index in range(len(SPEAKERS))]


def _conversation(index: int, rng: random.Random) -> Conversation:
    a, b = SPEAKERS[index]
    conv = Conversation(index, (a, b))
    bank = STORYLINES[:HELD_IN_STORYLINES] if index in HELD_IN_CONVERSATIONS else STORYLINES[HELD_IN_STORYLINES:]
    chosen = rng.sample(range(len(bank)), min(2 * STORYLINES_PER_SPEAKER, len(bank)))
    start = datetime(2023, 1, 1, tzinfo=UTC) + timedelta(days=rng.randrange(0, 200))
    dates, day = [], start
    for _ in range(SESSIONS):
        dates.append(day.replace(hour=rng.choice((8, 12, 18, 20)), minute=rng.randrange(60)))
        day += timedelta(days=rng.randint(4, 14))
    # plan: storyline steps go to sessions in order, a few sessions apart
    planned: dict[int, list[tuple[int, int, str, dict]]] = {s: [] for s in range(SESSIONS)}
    for slot, story_index in enumerate(chosen):
        story = bank[story_index]
        speaker = a if slot % 2 == 0 else b
        fills = _fill(story, rng)
        session = rng.randrange(0, SESSIONS - 3 * len(story.steps))
        for step in range(len(story.steps)):
            planned[session].append((story_index, step, speaker, fills))
            session = min(SESSIONS - 1, session + rng.randint(2, 5))
    said: dict[tuple[int, int], Turn] = {}
    replies: dict[tuple[int, int], tuple[Turn, Turn]] = {}
    stories: dict[int, tuple[str, dict]] = {}
    for session, at in enumerate(dates):
        clock = [at]

        def say(speaker: str, text: str, session: int = session, clock: list = clock) -> Turn:
            clock[0] += timedelta(seconds=rng.randint(20, 240))
            turn = Turn(
                f"c{index}-t{len(conv.turns)}",
                index,
                session,
                clock[0],
                speaker,
                "user" if speaker == a else "assistant",
                f"{speaker}: {text}",
            )
            conv.turns.append(turn)
            return turn

        first, second = (a, b) if session % 2 == 0 else (b, a)
        say(first, rng.choice(OPENERS).format(A=first, B=second))
        say(second, rng.choice(REPLIES))
        events = planned[session]
        chatter = rng.sample(CHATTER, 12)
        slots = sorted(rng.sample(range(6), min(len(events), 6)))
        event_iter = iter(events)
        for position in range(6):
            if position in slots:
                story_index, step, speaker, fills = next(event_iter)
                story = bank[story_index]
                other = b if speaker == a else a
                said[(story_index, step)] = say(speaker, story.steps[step][0].format(**fills))
                stories[story_index] = (speaker, fills)
                reaction = say(other, rng.choice(REACTIONS).format(A=speaker))
                replies[(story_index, step)] = (reaction, say(speaker, rng.choice(FOLLOWUPS)))
            speaker = rng.choice((a, b))
            say(speaker, chatter[2 * position])
            say(b if speaker == a else a, rng.choice(SMALL_REPLIES))
            if rng.random() < 0.5:
                say(speaker, chatter[2 * position + 1])
        for extra in list(event_iter):  # more events than slots: tell them at the end
            story_index, step, speaker, fills = extra
            said[(story_index, step)] = say(speaker, bank[story_index].steps[step][0].format(**fills))
            stories[story_index] = (speaker, fills)
        say(second, rng.choice(CLOSERS))
    conv.questions = _questions(conv, bank, said, stories)
    conv.questions += _more_questions(conv, bank, said, replies, stories, len(conv.questions))
    return conv


def _questions(conv: Conversation, bank: tuple[Storyline, ...], said: dict, stories: dict) -> list[Question]:
    questions: list[Question] = []

    def ask(category: str, text: str, evidence: list[Turn], stale: list[Turn] = ()) -> None:  # type: ignore[assignment]
        questions.append(
            Question(
                f"c{conv.index}-q{len(questions)}",
                conv.index,
                category,
                text,
                tuple(t.id for t in evidence),
                tuple(t.id for t in stale),
            )
        )

    anchors: list[tuple[str, Turn]] = []
    for story_index, (speaker, fills) in sorted(stories.items()):
        story = bank[story_index]
        values = {**fills, "A": speaker}
        turns = [said[(story_index, step)] for step in range(len(story.steps))]
        for step, (_, question) in enumerate(story.steps):
            ask("single-hop", question.format(**values), [turns[step]])
        if story.multi:
            text, steps = story.multi
            ask("multi-hop", text.format(**values), [turns[s] for s in steps])
        if story.changed:
            ask("changed", story.changed.format(**values), [turns[-1]], [turns[0]])
        ask("temporal", f"Around what date did {speaker} mention {story.gist}?", [turns[0]])
        anchors.append((story.gist, turns[0]))
    events = [t for t in said.values()]
    for gist, anchor in anchors:
        after = [
            t
            for t in events
            if t.speaker == anchor.speaker and timedelta(days=1) <= t.at - anchor.at <= timedelta(days=8)
        ]
        if after:
            ask("temporal", f"What did {anchor.speaker} do in the week after {gist}?", after)
    weeks: set[tuple[str, datetime]] = set()
    for _, anchor in anchors:
        monday = (anchor.at - timedelta(days=anchor.at.weekday())).replace(hour=0, minute=0, second=0, microsecond=0)
        if (anchor.speaker, monday) in weeks:
            continue
        weeks.add((anchor.speaker, monday))
        within = [t for t in events if t.speaker == anchor.speaker and monday <= t.at < monday + timedelta(days=7)]
        day = anchor.at.strftime("%d %B %Y").lstrip("0")
        ask("dated", f"What was {anchor.speaker} up to in the week of {day}?", within)
    return questions


_OPENING_WORDS = {
    "so",
    "ok",
    "okay",
    "well",
    "anyway",
    "yes",
    "yeah",
    "big",
    "news",
    "finally",
    "guess",
    "what",
    "oh",
    "and",
    "we",
    "i",
    "i'm",
    "i've",
    "i'll",
    "we're",
    "we've",
    "did",
    "it",
    "just",
    "also",
    "update",
    "honestly",
}


def worded(statement: str, fills: dict[str, str]) -> str:
    """The phrase a question reuses from a statement: its longest clause, in lower case, without
    the fill values (the answers) and without the clause's opening filler ("we finally did it,
    we picked up a {breed} from the shelter" -> "picked up a from the shelter on saturday")."""
    clauses = [c.strip() for c in re.split(r"[,.!?;:]| - ", statement) if c.strip()]
    clause = max(clauses, key=lambda c: len(c.split()))
    for value in sorted(fills.values(), key=len, reverse=True):
        clause = re.sub(re.escape(value), " ", clause, flags=re.I)
    words = clause.split()
    while words and words[0].lower() in _OPENING_WORDS:
        words = words[1:]
    return " ".join(words).lower().rstrip()


def _more_questions(
    conv: Conversation, bank: tuple[Storyline, ...], said: dict, replies: dict, stories: dict, start: int
) -> list[Question]:
    """The `worded` style of the single-hop questions and the `exchange` questions in both
    styles (written with the dataset, before tuning)."""
    questions: list[Question] = []
    a, b = conv.speakers

    def ask(category: str, style: str, text: str, evidence: list[Turn]) -> None:
        questions.append(
            Question(
                f"c{conv.index}-q{start + len(questions)}",
                conv.index,
                category,
                text,
                tuple(t.id for t in evidence),
                style=style,
            )
        )

    for story_index, (speaker, fills) in sorted(stories.items()):
        story = bank[story_index]
        other = b if speaker == a else a
        for step, (statement, _) in enumerate(story.steps):
            phrase = worded(statement.format(**fills), fills)
            ask("single-hop", "worded", f"What did {speaker} say about {phrase}?", [said[(story_index, step)]])
        if (story_index, 0) in replies:
            reaction, followup = replies[(story_index, 0)]
            evidence = [said[(story_index, 0)], reaction, followup]
            phrase = worded(story.steps[0][0].format(**fills), fills)
            ask(
                "exchange",
                "paraphrase",
                f"How did {other} take it when {speaker} told them about {story.gist}, and what did {speaker} add?",
                evidence,
            )
            ask(
                "exchange",
                "worded",
                f'What did {other} answer when {speaker} said "{phrase}", and what did {speaker} reply?',
                evidence,
            )
    return questions


def all_questions(conversations: list[Conversation]) -> list[Question]:
    """Every question of every conversation."""
    return [q for conv in conversations for q in conv.questions]
