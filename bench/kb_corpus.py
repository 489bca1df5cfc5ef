"""A small labelled retrieval corpus, built deterministically (no downloads).

Three families of passages, each with queries whose single relevant passage is known:

- "code": 160 service bulletins that differ mostly by a part code (e.g. "KV-4821"); many share
  the same wording otherwise. Queries name the code: keyword search should win, dense is weak.
- "name": 40 staff profiles with rare invented names and shared role wording. Queries name the
  person: keyword-heavy, dense partly helped by the role.
- "paraphrase": 50 short explanations of distinct topics, queried in other words (few shared
  terms): dense should win, keyword is weak.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

SEED = 20240611


@dataclass(frozen=True)
class Passage:
    id: str
    family: str
    text: str


@dataclass(frozen=True)
class Query:
    id: str
    kind: str
    text: str
    relevant: frozenset[str]


@dataclass(frozen=True)
class Corpus:
    passages: list[Passage]
    queries: list[Query]


MACHINES = [
    "hydraulic press",
    "conveyor drive",
    "air compressor",
    "packaging robot",
    "cooling tower",
    "forklift charger",
    "boiler feed pump",
    "labelling unit",
    "CNC lathe",
    "paint booth fan",
]
ISSUES = [
    "the main bearing may overheat under sustained load",
    "the pressure relief valve can stick after long idle periods",
    "a worn drive belt can slip at start-up",
    "the emergency stop circuit may respond late",
    "loose wiring at the terminal block can cause intermittent faults",
    "the oil filter housing may crack in cold weather",
    "the control firmware can freeze during shift changes",
    "a misaligned sensor can trigger false jam alarms",
]
ACTIONS = [
    "replace the part and torque the bolts to specification",
    "inspect the component weekly and log the readings",
    "update the controller firmware before the next shift",
    "tighten the connections and test the circuit twice",
    "lubricate the assembly and run it unloaded for ten minutes",
]
LOGS = ["maintenance log", "safety register", "shift report"]

FIRST_NAMES = [
    "Oswin",
    "Thessaly",
    "Ravindra",
    "Marisol",
    "Ludovica",
    "Eamon",
    "Ingrid",
    "Casimir",
    "Yevgenia",
    "Thaddeus",
    "Saoirse",
    "Bartholomew",
    "Anouk",
    "Leopold",
    "Zinnia",
    "Ambrose",
    "Ottoline",
    "Cyprian",
    "Henrike",
    "Florian",
]
SYLLABLES = ["kel", "var", "osk", "brin", "dag", "mor", "tuv", "ash", "quil", "zen", "hal", "rup", "vesk", "lor", "nim"]
SUFFIXES = ["sson", "ová", "ski", "berg", "ford", "ardt", "elli", "quist"]
ROLES = [
    ("safety coordinator", "site inspections and incident reviews"),
    ("procurement lead", "supplier contracts and spare part orders"),
    ("quality engineer", "batch testing and customer complaints"),
    ("training officer", "induction courses and forklift licences"),
]
SITES = ["Leeds depot", "Rotterdam plant", "Lyon warehouse", "Gdansk yard"]

TOPICS = [
    (
        "Photosynthesis in chloroplasts converts light energy, water and carbon dioxide into glucose, releasing oxygen as a by-product.",
        "How do green plants turn sunshine into sugar?",
    ),
    (
        "Magma rising through fissures in the crust erupts as lava, ash and gas; stratovolcanoes build steep cones from alternating layers.",
        "Why do some mountains spew molten rock?",
    ),
    (
        "Ocean tides are caused mainly by the gravitational pull of the Moon, with the Sun adding spring and neap variations.",
        "What makes the sea rise and fall twice a day?",
    ),
    (
        "Vaccines train the immune system by exposing it to a harmless antigen so that memory cells respond quickly to a later infection.",
        "How does a jab protect you from catching a disease later?",
    ),
    (
        "Inflation is a sustained rise in the general price level, eroding the purchasing power of money; central banks raise interest rates to curb it.",
        "Why does cash buy less every year and what do monetary authorities do about it?",
    ),
    (
        "Earthquakes occur when stress accumulated along a fault is released suddenly, sending seismic waves through the rock.",
        "What causes the ground to shake violently?",
    ),
    (
        "A rainbow appears when sunlight is refracted, dispersed and reflected inside raindrops, splitting white light into its spectrum.",
        "Why do colourful arcs show up in the sky after a shower?",
    ),
    (
        "Honeybee foragers perform a waggle dance whose angle and duration tell nestmates the direction and distance of nectar sources.",
        "How do hive insects tell each other where flowers are?",
    ),
    (
        "Compound interest adds earned interest to the principal, so each period's interest is calculated on a growing balance.",
        "Why do savings snowball over time when returns are reinvested?",
    ),
    (
        "A black hole is a region where gravity is so strong that not even light can escape once it crosses the event horizon.",
        "Which astronomical objects swallow anything that comes too close, radiation included?",
    ),
    (
        "Bacteria evolve resistance to antibiotics when surviving microbes with protective mutations multiply after incomplete treatment.",
        "Why do some germs stop responding to the drugs meant to kill them?",
    ),
    (
        "Sourdough bread rises thanks to a starter of wild yeast and lactic acid bacteria that ferment the flour and give a tangy flavour.",
        "What makes naturally leavened loaves taste sour?",
    ),
    (
        "Jet lag results from a mismatch between the body's circadian clock and the local time after crossing several time zones quickly.",
        "Why do long flights east or west leave travellers groggy?",
    ),
    (
        "Recycling aluminium cans saves about 95 percent of the energy needed to produce the metal from bauxite ore.",
        "How much power is spared by reprocessing used drink tins?",
    ),
    (
        "Coral bleaching happens when heat stress makes corals expel the symbiotic algae living in their tissues, turning them white.",
        "Why do reefs lose their colour when oceans warm?",
    ),
    (
        "Many songbirds migrate at night, navigating by the stars and the Earth's magnetic field on journeys of thousands of kilometres.",
        "How do small birds find their way on long seasonal flights?",
    ),
    (
        "Caffeine blocks adenosine receptors in the brain, delaying the feeling of drowsiness that builds up during waking hours.",
        "Why does coffee keep people alert?",
    ),
    (
        "Greenhouse gases such as carbon dioxide and methane absorb infrared radiation emitted by the surface and re-radiate heat back down.",
        "How do certain atmospheric emissions trap warmth around the planet?",
    ),
    (
        "The Suez Canal, opened in 1869, links the Mediterranean Sea to the Red Sea and shortens voyages between Europe and Asia.",
        "Which waterway lets ships avoid sailing around Africa?",
    ),
    (
        "Johannes Gutenberg's movable-type printing press, around 1440, made books cheaper and spread literacy across Europe.",
        "What invention made it possible to mass-produce texts in the fifteenth century?",
    ),
    (
        "Thunder is the sound of air expanding explosively when a lightning bolt heats it to around 30,000 degrees.",
        "Why is there a loud boom during a storm?",
    ),
    (
        "Dehydration occurs when the body loses more water than it takes in, causing thirst, headaches and dizziness.",
        "What happens if you don't drink enough fluids?",
    ),
    (
        "Most vivid dreaming takes place during rapid eye movement sleep, a phase that recurs roughly every ninety minutes.",
        "When in the night do people have their most intense dreams?",
    ),
    (
        "Wind turbines convert the kinetic energy of moving air into electricity with a rotor that spins a generator.",
        "How do those big propellers on hills produce power?",
    ),
    (
        "Castling is a chess move in which the king shifts two squares towards a rook, which then jumps to the king's other side.",
        "What is the special move that tucks the monarch safely behind a tower?",
    ),
    (
        "Pasteurisation heats milk to about 72 degrees Celsius for fifteen seconds to kill harmful microbes without spoiling the taste.",
        "Why is dairy briefly warmed before it is sold?",
    ),
    (
        "A tsunami is a series of long ocean waves, usually triggered by an undersea earthquake, that can flood coastlines hours later.",
        "What giant swells follow a seafloor quake?",
    ),
    (
        "Roman aqueducts carried water from distant springs into cities using a gentle, continuous downhill gradient.",
        "How did ancient Rome supply its towns with drinking supplies from far away?",
    ),
    (
        "A blockchain is a ledger of transactions grouped into blocks, each cryptographically linked to the previous one so past records cannot be altered.",
        "How does a distributed digital record keep its history tamper-proof?",
    ),
    (
        "Lithium-ion batteries in electric cars lose capacity over time as repeated charging cycles degrade the electrodes.",
        "Why does an EV travel fewer miles per charge as it ages?",
    ),
    (
        "Emperor penguins huddle together in huge groups during the Antarctic winter, taking turns on the cold outer edge.",
        "How do flightless polar seabirds survive freezing storms?",
    ),
    (
        "Desalination plants remove salt from seawater, most often by reverse osmosis through fine membranes.",
        "How can ocean brine be made drinkable?",
    ),
    (
        "The placebo effect is an improvement in symptoms after a sham treatment, driven by a patient's expectations.",
        "Why do sugar pills sometimes make people feel better?",
    ),
    (
        "When demand for a product rises while supply stays fixed, its market price tends to climb until buyers and sellers balance.",
        "Why do goods get pricier when lots of people want them?",
    ),
    (
        "An asteroid impact near Chicxulub about 66 million years ago is widely blamed for wiping out the non-avian dinosaurs.",
        "What killed off the giant reptiles at the end of the Cretaceous?",
    ),
    (
        "Auroras form when charged particles from the solar wind collide with gases high in the atmosphere near the magnetic poles.",
        "What produces the glowing curtains seen in arctic night skies?",
    ),
    (
        "Composting relies on bacteria, fungi and worms breaking down kitchen scraps and garden waste into humus.",
        "How do food leftovers turn into rich soil?",
    ),
    (
        "Brewers add yeast to malted barley wort, and the yeast converts sugars into alcohol and carbon dioxide.",
        "How does grain become an alcoholic drink?",
    ),
    (
        "A refrigerator pumps a refrigerant through a cycle of evaporation and compression, drawing heat out of the cabinet.",
        "How does a fridge keep food cold?",
    ),
    (
        "GPS receivers work out their position by timing signals from several satellites and solving for distance to each.",
        "How does a phone know where it is on a map?",
    ),
    (
        "Fever raises body temperature to make conditions less favourable for pathogens and to speed up immune responses.",
        "Why do we run hot when sick?",
    ),
    (
        "Glaciers carve U-shaped valleys as they slowly flow downhill, scraping bedrock with embedded stones.",
        "How do moving ice sheets reshape mountain landscapes?",
    ),
    (
        "The Moon's phases change as we see different portions of its sunlit half while it orbits the Earth every 29.5 days.",
        "Why does the lunar disc look different through the month?",
    ),
    (
        "A camel's hump stores fat, not water, which the animal can metabolise for energy when food is scarce.",
        "What do dromedaries keep in the lump on their back?",
    ),
    (
        "The ancient Olympic Games were held at Olympia in honour of Zeus from 776 BC, with foot races as the oldest event.",
        "Where and why did the original Greek athletic festival take place?",
    ),
    (
        "Sound travels about 343 metres per second in air at room temperature, faster in water and faster still in steel.",
        "How quickly does noise move through different materials?",
    ),
    (
        "A credit score summarises a borrower's repayment history and debt levels, and lenders use it to set loan terms.",
        "What number do banks check before deciding whether to lend you money?",
    ),
    (
        "Active noise-cancelling headphones use microphones to capture ambient sound and play an inverted wave that cancels it.",
        "How do earphones silence the hum of a plane cabin?",
    ),
    (
        "Spreading salt on icy roads lowers the freezing point of water so ice melts at temperatures below zero.",
        "Why do councils scatter grit on winter streets?",
    ),
    (
        "Yawning may help cool the brain, and it spreads contagiously between people who see or even hear others do it.",
        "Why is it catching when someone nearby opens their mouth wide and sleepily?",
    ),
]


def _code(rng: random.Random, taken: set[str]) -> str:
    while True:
        code = f"{rng.choice('BCDFGHJKLMNPQRSTVWXZ')}{rng.choice('BCDFGHJKLMNPQRSTVWXZ')}-{rng.randint(1000, 9999)}"
        if code not in taken:
            taken.add(code)
            return code


def _surname(rng: random.Random, taken: set[str]) -> str:
    while True:
        name = (rng.choice(SYLLABLES) + rng.choice(SYLLABLES)).capitalize() + rng.choice(SUFFIXES)
        if name not in taken:
            taken.add(name)
            return name


def build_corpus(seed: int = SEED) -> Corpus:
    """The passages and labelled queries; the same seed always gives the same corpus."""
    rng = random.Random(seed)
    passages: list[Passage] = []
    queries: list[Query] = []

    codes: set[str] = set()
    bulletins = []
    for i in range(160):
        code = _code(rng, codes)
        machine, issue, action, log = rng.choice(MACHINES), rng.choice(ISSUES), rng.choice(ACTIONS), rng.choice(LOGS)
        pid = f"code-{i:03d}"
        passages.append(
            Passage(
                pid,
                "code",
                f"Service bulletin {code} for the {machine}: {issue}. "
                f"Technicians should {action} and record the work in the {log}.",
            )
        )
        bulletins.append((pid, code, machine))
    for n, (pid, code, _machine) in enumerate(rng.sample(bulletins, 40)):
        text = rng.choice(
            [
                f"What does service bulletin {code} ask technicians to do?",
                f"Which machine is bulletin {code} about?",
                f"{code} instructions",
            ]
        )
        queries.append(Query(f"q-code-{n:02d}", "code", text, frozenset({pid})))

    surnames: set[str] = set()
    people = []
    for i in range(40):
        first, last = FIRST_NAMES[i % len(FIRST_NAMES)], _surname(rng, surnames)
        (role, duty), site = rng.choice(ROLES), rng.choice(SITES)
        pid = f"name-{i:03d}"
        passages.append(
            Passage(
                pid,
                "name",
                f"{first} {last} is the {role} at the {site}. "
                f"{first} joined in {rng.randint(2001, 2023)} and looks after {duty}.",
            )
        )
        people.append((pid, first, last))
    for n, (pid, first, last) in enumerate(rng.sample(people, 30)):
        text = rng.choice([f"Who is {first} {last}?", f"What does {last} look after?", f"{first} {last} role"])
        queries.append(Query(f"q-name-{n:02d}", "name", text, frozenset({pid})))

    for i, (text, question) in enumerate(TOPICS):
        pid = f"topic-{i:03d}"
        passages.append(Passage(pid, "paraphrase", text))
        queries.append(Query(f"q-para-{i:02d}", "paraphrase", question, frozenset({pid})))

    return Corpus(passages=passages, queries=queries)
