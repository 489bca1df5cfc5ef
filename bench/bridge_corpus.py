"""A small multi-hop corpus generated in code (no downloads): bridge questions whose second
document is named only through the first, plus single-hop questions over the same documents.

Invented people, organisations and places (nothing a model or an embedder knows). Each company
document names its founder; each person document names their birthplace, their school and what
they did; each town document names its river and region. A bridge question names the company and
asks about the founder's birthplace or school ("Where was the founder of Qorvix Labs born?"):
the person's document never mentions the company, so it is found only through the founder's name
in the company's document. A second family bridges person -> town ("Which river flows through the
town where Elena Marsk was born?").

Company documents carry long histories (several default-size chunks each), so one long document
can crowd short gold documents out of a top five.

Questions are split by a fixed rule into `tune` and `held_out` (every third question held out);
the held-out split is reported apart.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

SEED = 20261125

SYLLABLES = [
    "ar", "bel", "cor", "dra", "el", "fen", "gar", "hal", "ix", "jor", "kel", "lun", "mar", "nor",
    "ost", "pra", "quel", "ros", "sar", "tov", "ul", "vor", "wen", "yst", "zan", "bri", "del", "mok",
]  # fmt: skip
FIRST = [
    "Elena", "Tomas", "Ingrid", "Rafael", "Mirela", "Oskar", "Leona", "Viktor", "Anouk", "Bastian",
    "Clio", "Dario", "Edda", "Florin", "Greta", "Henrik", "Isolde", "Jarek", "Katya", "Lorcan",
]  # fmt: skip
KINDS = ["Labs", "Works", "Systems", "Foundry", "Dynamics", "Textiles", "Optics", "Mills"]
TRADES = [
    "precision sensors", "woven fabrics", "ceramic valves", "solar lenses", "river barges",
    "ledger software", "glass instruments", "farm machinery", "printing presses", "clockwork toys",
]  # fmt: skip
SUBJECTS = ["chemistry", "law", "music", "architecture", "physics", "economics", "botany", "engineering"]
REGIONS = ["the northern uplands", "the coastal lowlands", "the eastern marches", "the southern plateau"]
FILLER = [
    "In its early years the firm rented a single workshop and hired apprentices from nearby villages.",
    "A fire in the storage sheds destroyed much of the stock, and the rebuilding took two winters.",
    "The company later opened a training school for machinists and published a yearly catalogue.",
    "During a long recession it cut production by half but kept every permanent employee.",
    "Its products were exhibited at several trade fairs, where they won medals for durability.",
    "The board adopted a profit-sharing scheme that was widely copied by other manufacturers.",
    "A new railway siding allowed the works to ship goods directly to the capital's markets.",
    "The archive of the firm, including letters and account books, is kept by a local museum.",
    "Several rival workshops were absorbed after a price war that lasted most of a decade.",
    "Its headquarters building, with a tall brick chimney, is now a protected landmark.",
]  # fmt: skip


@dataclass(frozen=True)
class Document:
    id: str
    title: str
    text: str


@dataclass(frozen=True)
class Question:
    id: str
    kind: str  # "bridge" (two gold documents, the second named only through the first) or "single"
    split: str  # "tune" or "held_out"
    text: str
    gold: tuple[str, ...]  # document ids


@dataclass(frozen=True)
class BridgeCorpus:
    documents: list[Document]
    questions: list[Question]


def _word(rng: random.Random, parts: int) -> str:
    return "".join(rng.choice(SYLLABLES) for _ in range(parts)).capitalize()


def _unique(rng: random.Random, taken: set[str], make) -> str:
    while True:
        value = make(rng)
        if value not in taken:
            taken.add(value)
            return value


def build_bridge_corpus(companies: int = 60) -> BridgeCorpus:
    """`companies` company/founder/town chains plus as many distractor people and towns."""
    rng = random.Random(SEED)
    taken: set[str] = set()
    towns = [_unique(rng, taken, lambda r: _word(r, 2) + r.choice(["holm", "burg", "ford", "stad"])) for _ in range(40)]
    rivers = [_unique(rng, taken, lambda r: "the " + _word(r, 2)) for _ in towns]
    schools = [_unique(rng, taken, lambda r: f"the {_word(r, 2)} Institute") for _ in range(25)]
    documents: list[Document] = []
    for index, (town, river) in enumerate(zip(towns, rivers, strict=True)):
        region = REGIONS[index % len(REGIONS)]
        documents.append(
            Document(
                f"town-{index}",
                town,
                f"{town} is a market town in {region}. {river.capitalize()} flows through {town}, "
                f"and the town grew around its old bridge and grain market.",
            )
        )
    people = []
    for index in range(2 * companies):
        name = _unique(rng, taken, lambda r: f"{r.choice(FIRST)} {_word(r, 2)}")
        town_index = rng.randrange(len(towns))
        school = rng.choice(schools)
        subject = rng.choice(SUBJECTS)
        year = rng.randrange(1890, 1960)
        people.append((name, town_index))
        documents.append(
            Document(
                f"person-{index}",
                name,
                f"{name} (born {year}) is an entrepreneur and engineer. {name} was born in "
                f"{towns[town_index]} and studied {subject} at {school}. Colleagues remember a "
                "patient manager who wrote long letters and rarely took holidays.",
            )
        )
    questions: list[Question] = []
    for index in range(companies):
        company = _unique(rng, taken, lambda r: f"{_word(r, 2)} {r.choice(KINDS)}")
        founder, town_index = people[index]  # the first `companies` people found companies
        trade = rng.choice(TRADES)
        year = rng.randrange(1920, 1990)
        history = " ".join(rng.sample(FILLER, 8))
        documents.append(
            Document(
                f"company-{index}",
                company,
                f"{company} is a manufacturer of {trade}. {company} was founded in {year} by "
                f"{founder}. {history} {company} still makes {trade} today. " + " ".join(rng.sample(FILLER, 6)),
            )
        )
        split = "held_out" if index % 3 == 2 else "tune"
        town_doc = f"town-{town_index}"
        questions.append(
            Question(
                f"bridge-born-{index}",
                "bridge",
                split,
                f"In which town was the founder of {company} born?",
                (f"company-{index}", f"person-{index}"),
            )
        )
        questions.append(
            Question(
                f"bridge-river-{index}",
                "bridge",
                split,
                f"Which river flows through the birthplace of {founder}?",
                (f"person-{index}", town_doc),
            )
        )
        questions.append(
            Question(f"single-company-{index}", "single", split, f"What does {company} make?", (f"company-{index}",))
        )
        questions.append(
            Question(f"single-person-{index}", "single", split, f"What did {founder} study?", (f"person-{index}",))
        )
    return BridgeCorpus(documents, questions)
