"""A deterministic long-conversation data set for the memory benchmark (no network, no model).

`build_dataset(seed)` simulates one user talking to the assistant over `weeks` weeks in
`sessions` sessions: hundreds of user/assistant turns carrying facts about the user (some of
which change later: a move, a new job, a new diet), notable events, facts about other people
that resemble the user's own (distractors), and small talk. Alongside the turns it gives the
memory records a perfect extractor would write (kind, category, importance, text) and questions
whose evidence (memory records and chat turns) is known, plus the outdated records for facts that
changed. Timestamps are ages in days before "now", so the bench can place them relative to the
clock it runs on. The seed decides when each statement is made, the small talk, and which of three
phrasings each question uses (`QUESTION_PHRASINGS`); the statements are the same in every seed.

`synthetic_memories(n, seed)` gives n varied memory texts for the latency benchmark.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Turn:
    """One chat message."""

    id: str
    session: int
    age_days: float
    role: str
    text: str


@dataclass(frozen=True)
class MemoryRecord:
    """What a perfect extractor would save from one user turn."""

    id: str
    turn_id: str
    kind: str
    category: str | None
    importance: float
    text: str
    age_days: float


@dataclass(frozen=True)
class Question:
    """A question about the user, the memories and turns that answer it, and outdated ones."""

    id: str
    text: str
    kind: str
    evidence: tuple[str, ...]
    evidence_turns: tuple[str, ...]
    stale: tuple[str, ...] = ()
    topic: str = ""


@dataclass
class Dataset:
    """Turns in time order, memory records, and questions."""

    turns: list[Turn] = field(default_factory=list)
    memories: list[MemoryRecord] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)


@dataclass(frozen=True)
class Slot:
    """A fact about the user; `values` change over time (said, memory text) in order."""

    topic: str
    category: str
    importance: float
    values: tuple[tuple[str, str], ...]
    questions: tuple[str, ...]


SLOTS = (
    Slot(
        "city",
        "fact",
        0.9,
        (
            ("I live in Berlin, in a small flat in Neukölln.", "The user lives in Berlin."),
            ("Big news: I moved to Munich last weekend, still unpacking boxes.", "The user lives in Munich."),
        ),
        ("Which city is the user living in these days?", "Where is the user's home now?"),
    ),
    Slot(
        "job",
        "fact",
        0.9,
        (
            ("I work as a data analyst at Finlytics.", "The user works as a data analyst at Finlytics."),
            (
                "I started my new job as a product manager at Orbis Health on Monday!",
                "The user works as a product manager at Orbis Health.",
            ),
        ),
        ("What is the user's current job?", "Which company employs the user now?"),
    ),
    Slot(
        "diet",
        "preference",
        0.8,
        (
            ("I've been vegetarian for about three years.", "The user is vegetarian."),
            ("I decided to go fully vegan this month.", "The user is vegan."),
        ),
        ("What diet does the user follow?", "Can I suggest a cheese dish to the user?"),
    ),
    Slot(
        "coffee",
        "preference",
        0.6,
        (
            ("My usual order is a flat white with whole milk.", "The user's usual coffee is a flat white."),
            ("These days I only drink oat milk cortados.", "The user's usual coffee is an oat milk cortado."),
        ),
        ("How does the user take their coffee?",),
    ),
    Slot(
        "gym",
        "preference",
        0.5,
        (
            (
                "I go to the gym on Tuesday and Thursday mornings.",
                "The user works out on Tuesday and Thursday mornings.",
            ),
            (
                "I moved my workouts to Monday and Wednesday evenings.",
                "The user works out on Monday and Wednesday evenings.",
            ),
        ),
        ("When does the user go to the gym?",),
    ),
    Slot(
        "running",
        "goal",
        0.7,
        (
            ("My goal is to run a half marathon in October.", "The user wants to run a half marathon in October."),
            ("New goal: a full marathon next spring.", "The user wants to run a full marathon next spring."),
        ),
        ("What running goal does the user have?",),
    ),
    Slot(
        "transport",
        "fact",
        0.5,
        (
            ("I drive an old VW Golf to work.", "The user drives an old VW Golf."),
            ("I sold the Golf, I cycle everywhere now.", "The user sold their car and cycles everywhere."),
        ),
        ("How does the user get around?",),
    ),
    Slot(
        "book",
        "preference",
        0.4,
        (
            (
                "I'm reading The Left Hand of Darkness, I love old sci-fi.",
                "The user is reading The Left Hand of Darkness and loves classic science fiction.",
            ),
            ("Now I'm reading Piranesi, it's wonderful.", "The user is reading Piranesi."),
        ),
        ("What book is the user reading at the moment?",),
    ),
    Slot(
        "allergy",
        "fact",
        1.0,
        (("Please remember I'm allergic to penicillin.", "The user is allergic to penicillin."),),
        ("Does the user have any drug allergies?",),
    ),
    Slot(
        "partner",
        "relationship",
        0.8,
        (("My partner Sam is a primary school teacher.", "The user's partner Sam is a primary school teacher."),),
        ("What does the user's partner do for a living?",),
    ),
    Slot(
        "sister",
        "relationship",
        0.7,
        (("My sister Lena lives in Vienna with her fiancé.", "The user's sister Lena lives in Vienna."),),
        ("Where does the user's sister live?",),
    ),
    Slot(
        "language",
        "goal",
        0.6,
        (
            (
                "I'm learning Japanese and want to pass JLPT N4 by December.",
                "The user is learning Japanese and wants to pass JLPT N4 by December.",
            ),
        ),
        ("Which language is the user studying?",),
    ),
    Slot(
        "instrument",
        "skill",
        0.6,
        (("I've played the cello since I was eight.", "The user plays the cello."),),
        ("What instrument can the user play?",),
    ),
    Slot(
        "cuisine",
        "preference",
        0.5,
        (("Thai food is my absolute favourite.", "The user's favourite cuisine is Thai."),),
        ("What kind of food does the user like most?",),
    ),
    Slot(
        "birthday",
        "fact",
        0.7,
        (("My birthday is on the 14th of March.", "The user's birthday is on 14 March."),),
        ("When is the user's birthday?",),
    ),
    Slot(
        "remote",
        "preference",
        0.4,
        (("I work from home on Fridays.", "The user works from home on Fridays."),),
        ("Which day does the user work remotely?",),
    ),
)

EVENTS = (
    (
        "I saw Radiohead live at the Waldbühne with Sam yesterday, incredible show.",
        "The user saw Radiohead live at the Waldbühne with Sam.",
        0.6,
        "Which band did the user see in concert?",
    ),
    (
        "The dentist says I need a filling next month.",
        "The user's dentist said they need a filling next month.",
        0.6,
        "What did the dentist tell the user?",
    ),
    (
        "We spent Easter with my parents in Hamburg.",
        "The user spent Easter with their parents in Hamburg.",
        0.5,
        "Where did the user spend the Easter holidays?",
    ),
    (
        "My car broke down on the A9 and had to be towed, what a day.",
        "The user's car broke down on the A9 motorway and was towed.",
        0.6,
        "What happened to the user's car on the motorway?",
    ),
    (
        "We hiked up the Zugspitze on Saturday, my legs are dead.",
        "The user hiked up the Zugspitze.",
        0.6,
        "Which mountain did the user climb?",
    ),
    (
        "I signed up for a beginner pottery class on Wednesday evenings.",
        "The user started a beginner pottery class on Wednesday evenings.",
        0.5,
        "What new class did the user sign up for?",
    ),
    (
        "I presented our churn prediction model at the team offsite today.",
        "The user presented a churn prediction model at the team offsite.",
        0.6,
        "What did the user present at the offsite?",
    ),
    (
        "I've had the flu all week and barely left bed.",
        "The user had the flu and stayed in bed for a week.",
        0.5,
        "When was the user ill, and with what?",
    ),
    (
        "We adopted a rescue dog! His name is Pixel.",
        "The user adopted a rescue dog named Pixel.",
        0.8,
        "What is the name of the user's dog?",
    ),
    (
        "I ran my first 10k race today in 52 minutes.",
        "The user ran a 10k race in 52 minutes.",
        0.6,
        "How fast did the user run the 10k?",
    ),
    (
        "I bought a standing desk for the home office.",
        "The user bought a standing desk for their home office.",
        0.4,
        "What furniture did the user buy recently?",
    ),
    (
        "Sam and I celebrated our anniversary at a Thai place in Kreuzberg.",
        "The user and Sam celebrated their anniversary at a Thai restaurant.",
        0.6,
        "How did the user celebrate the anniversary?",
    ),
    (
        "I had my interview at Orbis Health this morning, fingers crossed.",
        "The user had a job interview at Orbis Health.",
        0.6,
        "Did the user have any job interviews?",
    ),
    (
        "I lost my wallet on the U-Bahn but lost and found had it.",
        "The user lost their wallet on the U-Bahn and got it back from lost and found.",
        0.4,
        "What did the user lose on public transport?",
    ),
    (
        "Lena's wedding in Vienna was beautiful, I gave a speech.",
        "The user gave a speech at their sister Lena's wedding in Vienna.",
        0.7,
        "Whose wedding did the user speak at?",
    ),
    (
        "I burned my hand making risotto last night.",
        "The user burned their hand while cooking risotto.",
        0.4,
        "How did the user hurt their hand?",
    ),
    (
        "Our new flat in Munich had a water leak in the bathroom.",
        "The user's new flat in Munich had a bathroom water leak.",
        0.5,
        "What went wrong in the user's new flat?",
    ),
    (
        "Took Pixel to the vet for his vaccinations today.",
        "The user took Pixel to the vet for vaccinations.",
        0.4,
        "Why did the dog go to the vet?",
    ),
)

DISTRACTORS = (  # facts about other people, close in wording to the user's own
    ("My colleague Jonas just moved to Hamburg.", "The user's colleague Jonas moved to Hamburg."),
    ("My friend Priya went vegan last year.", "The user's friend Priya is vegan."),
    ("My brother works as a product designer at Zalando.", "The user's brother is a product designer at Zalando."),
    ("Sam always orders a double espresso.", "The user's partner Sam drinks double espresso."),
    ("Lena is learning Korean for her honeymoon.", "The user's sister Lena is learning Korean."),
    ("Jonas plays violin in an amateur orchestra.", "The user's colleague Jonas plays the violin."),
    ("My dad is allergic to shellfish.", "The user's father is allergic to shellfish."),
    ("Priya is training for the Berlin marathon.", "The user's friend Priya is training for the Berlin marathon."),
    ("My boss drives a Tesla.", "The user's boss drives a Tesla."),
    ("Sam's birthday is in July.", "The user's partner Sam has a birthday in July."),
    ("My mum loves Italian food.", "The user's mother loves Italian food."),
    ("Jonas goes to the gym every morning at six.", "The user's colleague Jonas works out every morning at six."),
    ("Priya lives in Munich too, near the Isar.", "The user's friend Priya lives in Munich."),
    ("My brother's dog is called Biscuit.", "The user's brother has a dog named Biscuit."),
    ("Lena works from home every day.", "The user's sister Lena works fully remotely."),
    ("Sam is reading Dune right now.", "The user's partner Sam is reading Dune."),
)

SMALL_TALK = (  # everyday requests and chatter; {x} is filled from TALK_FILLERS
    ("Can you give me a recipe for {dish}?", "The user asked for a {dish} recipe."),
    ("How long should I cook {dish}?", "The user asked how long to cook {dish}."),
    ("What's a good film about {topic}?", "The user asked for a film about {topic}."),
    ("Recommend a podcast about {topic}.", "The user asked for a podcast about {topic}."),
    ("Explain {concept} in simple words.", "The user asked what {concept} means."),
    ("How do I {chore}?", "The user asked how to {chore}."),
    ("Is it going to rain in {city} this weekend?", "The user asked about the weekend weather in {city}."),
    ("What's there to do in {city} on a Sunday?", "The user asked what to do in {city} on a Sunday."),
    ("Translate '{phrase}' into {language}.", "The user asked how to say '{phrase}' in {language}."),
    ("Help me write a polite email to {who}.", "The user asked for help writing an email to {who}."),
    ("I had lunch with {who} today.", "The user had lunch with {who}."),
    ("Went {activity} after work.", "The user went {activity} after work."),
    ("Any tips for {goal}?", "The user asked for tips on {goal}."),
)
TALK_FILLERS = {
    "dish": (
        "banana bread",
        "lentil soup",
        "pad thai",
        "shakshuka",
        "mushroom risotto",
        "focaccia",
        "vegetable curry",
        "pancakes",
        "gazpacho",
        "dumplings",
        "falafel",
        "ramen",
    ),
    "topic": (
        "space travel",
        "the ocean",
        "jazz musicians",
        "chess players",
        "mountaineering",
        "the Roman empire",
        "artificial intelligence",
        "cooking",
        "climate change",
        "friendship",
    ),
    "concept": (
        "a p-value",
        "inflation",
        "compound interest",
        "photosynthesis",
        "a mortgage",
        "machine learning",
        "the greenhouse effect",
        "a credit score",
        "entropy",
    ),
    "chore": (
        "remove a red wine stain",
        "fix a squeaky door hinge",
        "descale a kettle",
        "unclog a drain",
        "clean a cast iron pan",
        "repot a plant",
        "iron a shirt quickly",
    ),
    "city": ("Berlin", "Munich", "Hamburg", "Vienna", "Lisbon", "Prague", "Copenhagen"),
    "phrase": ("good morning", "thank you very much", "where is the station", "cheers"),
    "language": ("Japanese", "Spanish", "Italian", "Korean"),
    "who": (
        "my landlord",
        "the team",
        "an old school friend",
        "my manager",
        "a recruiter",
        "the neighbours",
        "Sam's parents",
    ),
    "activity": (
        "grocery shopping",
        "for a swim",
        "to the cinema",
        "for a walk by the river",
        "to a board game night",
        "bouldering",
    ),
    "goal": (
        "falling asleep faster",
        "staying focused",
        "saving money",
        "drinking more water",
        "public speaking",
        "keeping plants alive",
    ),
}

ACKS = (
    "Thanks for telling me, I'll keep that in mind.",
    "That's great to hear!",
    "Got it, noted.",
    "Oh no, I'm sorry to hear that. I hope it gets better soon.",
    "That sounds wonderful.",
    "Interesting! Tell me more whenever you like.",
)
GREETINGS = ("Hi again!", "Good morning!", "Hey, it's me.", "Evening!", "Hello!")
ANSWERS = (
    "Here is a simple way to do it, step by step.",
    "Sure, here are a few ideas you might like.",
    "Good question: in short, it depends, but here is the usual rule of thumb.",
    "Here you go, I kept it short.",
)


QUESTION_PHRASINGS = {  # other ways to ask each question; the data set seed picks one
    "Which city is the user living in these days?": (
        "In which city does the user live?",
        "What city is the user based in?",
    ),
    "Where is the user's home now?": ("Where does the user live at the moment?", "Where has the user made their home?"),
    "What is the user's current job?": ("What does the user do for work?", "What is the user's job title now?"),
    "Which company employs the user now?": ("Where does the user work these days?", "Who is the user's employer?"),
    "What diet does the user follow?": ("Does the user eat meat?", "What are the user's eating habits?"),
    "Can I suggest a cheese dish to the user?": (
        "Would the user eat a cheese pizza?",
        "Is it fine to cook with butter and cheese for the user?",
    ),
    "How does the user take their coffee?": (
        "What coffee does the user usually order?",
        "What is the user's regular coffee drink?",
    ),
    "When does the user go to the gym?": (
        "On which days does the user work out?",
        "What is the user's workout schedule?",
    ),
    "What running goal does the user have?": (
        "Which race is the user training for?",
        "What does the user want to achieve in running?",
    ),
    "How does the user get around?": ("How does the user commute?", "What does the user use for transport?"),
    "What book is the user reading at the moment?": (
        "Which novel is the user reading now?",
        "What is the user currently reading?",
    ),
    "Does the user have any drug allergies?": (
        "Is the user allergic to any medication?",
        "Which medicine must the user avoid?",
    ),
    "What does the user's partner do for a living?": (
        "What is Sam's job?",
        "What is the profession of the user's partner?",
    ),
    "Where does the user's sister live?": ("In which city does Lena live?", "Where is the user's sister based?"),
    "Which language is the user studying?": (
        "What language is the user learning?",
        "Which exam is the user preparing for?",
    ),
    "What instrument can the user play?": (
        "Does the user play any music?",
        "Which instrument has the user played since childhood?",
    ),
    "What kind of food does the user like most?": (
        "What is the user's favourite cuisine?",
        "Which food does the user love?",
    ),
    "When is the user's birthday?": (
        "What is the user's date of birth?",
        "On which day does the user celebrate their birthday?",
    ),
    "Which day does the user work remotely?": (
        "When does the user work from home?",
        "Which weekday is the user's home office day?",
    ),
    "Which band did the user see in concert?": (
        "What concert did the user go to?",
        "Which band did the user see live?",
    ),
    "What did the dentist tell the user?": (
        "What did the user hear at the dentist?",
        "Does the user need dental treatment?",
    ),
    "Where did the user spend the Easter holidays?": (
        "Who did the user visit at Easter?",
        "What did the user do over Easter?",
    ),
    "What happened to the user's car on the motorway?": (
        "Did the user have car trouble?",
        "Why did the user's car need towing?",
    ),
    "Which mountain did the user climb?": ("What peak did the user hike up?", "Where did the user go hiking?"),
    "What new class did the user sign up for?": (
        "Which course did the user join?",
        "What hobby class does the user attend?",
    ),
    "What did the user present at the offsite?": (
        "What talk did the user give at work?",
        "What model did the user present to the team?",
    ),
    "When was the user ill, and with what?": ("Was the user sick recently?", "What illness did the user have?"),
    "What is the name of the user's dog?": ("What is the user's dog called?", "Does the user have a pet?"),
    "How fast did the user run the 10k?": ("What was the user's 10k time?", "How did the user's first race go?"),
    "What furniture did the user buy recently?": (
        "What did the user buy for the home office?",
        "Did the user get a new desk?",
    ),
    "How did the user celebrate the anniversary?": (
        "Where did the user and Sam go for their anniversary?",
        "What did the user do on their anniversary?",
    ),
    "Did the user have any job interviews?": (
        "Where did the user interview for a job?",
        "Which company interviewed the user?",
    ),
    "What did the user lose on public transport?": (
        "Did the user lose anything on the U-Bahn?",
        "What did the user get back from lost and found?",
    ),
    "Whose wedding did the user speak at?": (
        "Where did the user give a wedding speech?",
        "Which family wedding did the user attend?",
    ),
    "How did the user hurt their hand?": (
        "What kitchen accident did the user have?",
        "Did the user injure themselves cooking?",
    ),
    "What went wrong in the user's new flat?": (
        "Did the user have problems with the new apartment?",
        "What damage was there in the user's flat?",
    ),
    "Why did the dog go to the vet?": ("What did Pixel get at the vet?", "When did the user take the dog to the vet?"),
}


def build_dataset(seed: int = 7, sessions: int = 48, weeks: int = 16) -> Dataset:
    """Generate the conversation, memory records and questions (same seed, same data).

    The seed places the statements in time and picks the small talk, and, independently (so
    the conversation of a seed does not depend on it), the phrasing of each question."""
    rng = random.Random(seed)
    phrasing = random.Random(f"questions-{seed}")

    def ask(question: str) -> str:
        return phrasing.choice((question, *QUESTION_PHRASINGS[question]))

    span = weeks * 7.0
    session_age = [span * (1 - i / sessions) - rng.uniform(0, 0.4) for i in range(sessions)]

    plan: dict[int, list[tuple[str, object]]] = {i: [] for i in range(sessions)}
    first_third = max(1, sessions // 3)
    for slot in SLOTS:
        first = rng.randrange(0, first_third)
        plan[first].append(("slot", (slot, 0)))
        if len(slot.values) > 1:
            plan[rng.randrange(sessions // 2, sessions - 2)].append(("slot", (slot, 1)))
    event_sessions = sorted(rng.sample(range(1, sessions), len(EVENTS)))  # events keep their order
    for event, session in zip(EVENTS, event_sessions, strict=True):
        plan[session].append(("event", event))
    for distractor in DISTRACTORS:
        plan[rng.randrange(sessions)].append(("distractor", distractor))
    for session in range(sessions):
        for _ in range(rng.randint(3, 6)):
            said, text = rng.choice(SMALL_TALK)
            fill = {key: rng.choice(values) for key, values in TALK_FILLERS.items()}
            plan[session].append(("talk", (said.format(**fill), text.format(**fill))))

    data = Dataset()
    slot_records: dict[str, list[tuple[str, str]]] = {}
    event_records: list[tuple[tuple, str, str]] = []
    for session in range(sessions):
        age = session_age[session]
        items = plan[session]
        rng.shuffle(items)
        clock = 0.0
        data.turns.append(_turn(data, session, age, "user", rng.choice(GREETINGS)))
        data.turns.append(_turn(data, session, age, "assistant", "Hi! How can I help today?"))
        for kind, payload in items:
            clock += rng.uniform(0.002, 0.01)
            when = age - clock
            if kind == "slot":
                slot, index = payload
                said, text = slot.values[index]
                turn = _turn(data, session, when, "user", said)
                record = _record(data, turn, "semantic", slot.category, slot.importance, text)
                slot_records.setdefault(slot.topic, []).append((record.id, turn.id))
                reply = rng.choice(ACKS[:3] + ACKS[4:])
            elif kind == "event":
                said, text, importance, _question = payload
                turn = _turn(data, session, when, "user", said)
                record = _record(data, turn, "episodic", None, importance, text)
                event_records.append((payload, record.id, turn.id))
                reply = rng.choice(ACKS[1:])
            elif kind == "distractor":
                said, text = payload
                turn = _turn(data, session, when, "user", said)
                _record(data, turn, "semantic", "relationship", 0.3, text)
                reply = rng.choice(ACKS[:3])
            else:
                said, text = payload
                turn = _turn(data, session, when, "user", said)
                _record(data, turn, "episodic", None, round(rng.uniform(0.1, 0.25), 2), text)
                reply = rng.choice(ANSWERS if said.endswith("?") else ACKS)
            data.turns.append(turn)
            data.turns.append(_turn(data, session, when - 0.0005, "assistant", reply))

    for slot in SLOTS:
        records = slot_records[slot.topic]
        current_record, current_turn = records[-1]
        stale = tuple(record for record, _ in records[:-1])
        for number, question in enumerate(slot.questions):
            data.questions.append(
                Question(
                    f"q-{slot.topic}-{number}",
                    ask(question),
                    "semantic",
                    (current_record,),
                    (current_turn,),
                    stale,
                    slot.topic,
                )
            )
    for (_said, _text, _importance, question), record, turn in event_records:
        data.questions.append(
            Question(
                f"q-event-{len(data.questions)}",
                ask(question),
                "episodic",
                (record,),
                (turn,),
                (),
                "event",
            )
        )
    return data


def _turn(data: Dataset, session: int, age: float, role: str, text: str) -> Turn:
    return Turn(f"t{len(data.turns):04d}", session, round(age, 5), role, text)


def _record(data: Dataset, turn: Turn, kind: str, category: str | None, importance: float, text: str) -> MemoryRecord:
    record = MemoryRecord(f"m{len(data.memories):04d}", turn.id, kind, category, importance, text, turn.age_days)
    data.memories.append(record)
    return record


PEOPLE = ("The user", "The user's partner", "The user's sister", "The user's colleague", "The user's friend")
ACTIONS = (
    "went hiking near {place}",
    "had dinner at a {food} restaurant in {place}",
    "visited a museum in {place}",
    "bought a new {thing}",
    "fixed a broken {thing}",
    "started learning {skill}",
    "watched a film about {topic}",
    "read an article on {topic}",
    "booked a trip to {place}",
    "met an old friend in {place}",
    "cooked {food} food at home",
    "signed up for a course on {skill}",
    "lost a {thing} in {place}",
    "gave a talk on {topic}",
)
FILLERS = {
    "place": (
        "Lisbon",
        "Oslo",
        "Kyoto",
        "Vienna",
        "Munich",
        "Porto",
        "Seville",
        "Prague",
        "Bergen",
        "Lyon",
        "Ghent",
        "Krakow",
        "Bologna",
        "Tallinn",
        "Zurich",
        "Utrecht",
    ),
    "food": ("Thai", "Georgian", "Ethiopian", "Korean", "Peruvian", "Lebanese", "Sichuan", "Greek"),
    "thing": ("bicycle", "laptop", "kettle", "umbrella", "camera", "phone", "backpack", "lamp", "watch"),
    "skill": ("pottery", "Python", "salsa", "chess", "sailing", "Japanese", "photography", "knitting"),
    "topic": (
        "volcanoes",
        "jazz history",
        "urban gardening",
        "climate policy",
        "octopuses",
        "medieval castles",
        "startup funding",
        "sleep science",
        "bird migration",
    ),
}


def synthetic_memories(n: int, seed: int = 11) -> Iterator[tuple[str, str | None, str, float, float]]:
    """n memories as (kind, category, text, importance, age_days), varied and deterministic."""
    rng = random.Random(seed)
    categories = ("preference", "fact", "skill", "relationship", "goal", "other")
    for index in range(n):
        action = rng.choice(ACTIONS).format(**{k: rng.choice(v) for k, v in FILLERS.items()})
        text = f"{rng.choice(PEOPLE)} {action} (note {index})."
        if rng.random() < 0.5:
            yield "episodic", None, text, round(rng.random(), 2), round(rng.uniform(0, 365), 3)
        else:
            yield "semantic", rng.choice(categories), text, round(rng.random(), 2), round(rng.uniform(0, 365), 3)
