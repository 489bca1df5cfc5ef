"""What each person of a conversation says about themselves, by kind: the deterministic
consolidation (no model) behind list questions ("What are Jo's hobbies?", "Which cities has Tom
been to?", "What books has Sam read?").

The answer to a list question is spread over many turns of several sessions, each naming one
item ("I just signed up for a pottery class", weeks later "we went camping"); no single turn
is close to the question, so the first stage of recall misses most of them. The consolidation
reads each turn once, at record time: the words of a known kind it holds (`ASPECTS`: activities,
sports, places, pets, work, events, food, books, writing, films, music, games, art, causes,
family, travel) are its *values*, kept per person (the turn's speaker), kind and value with the
ids of the turns that said them (`add_turn`). A question that names a person and asks for a kind
in the plural (`asked`: "what activities", "which cities", "how many games") is answered from
that index (`items_for`): the person's turns of that kind, one per value first (`spread`), so
ten results cover ten items of the list rather than ten turns about one.

A turn that never uses the word ("I finally finished the vase I shaped on the wheel!") gets
into the index through what a model learnt from it: a memory saved with the ids of the turns it
came from ("Jo took up pottery") files those ids under its own words' values (`add_ids`) in the
index of the person it is about (store/memory/attributes.py).

Each person's index is plain data (JSON), `{aspect: {value: [turn id, ...]}}`, the latest
MAX_TURNS_PER_VALUE turn ids per value, at most MAX_VALUES values per aspect.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

from store.people import speaker_like

MAX_TURNS_PER_VALUE = 12  # turn ids kept per person, aspect and value (the latest)
REPORTED_WEIGHT = 0.1  # added to a list item's turn's similarity when it tells what its writer did (`reported`)
MAX_VALUES = 400  # values kept per person and aspect (a long history forgets the first seen)


def stem(word: str) -> str:
    """A rough stem, so that the forms of one word are one value ("painted", "painting", "paint"
    -> "paint"; "kids" -> "kid"; "cities", "city" -> "city"; "hiking", "hike" -> "hik")."""
    word = word.lower().replace("’", "'").removesuffix("'s")
    if word.endswith(("ies", "ie")) and len(word) > 4:
        return word.removesuffix("s")[:-2] + "y"  # "movies", "movie" -> "movy"
    for cut in ("ing", "ed", "es", "s"):
        if word.endswith(cut) and len(word) - len(cut) >= 3 and not word.endswith("ss"):
            word = word[: -len(cut)]
            break
    if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "ls":
        word = word[:-1]  # "swimm" -> "swim"
    return word[:-1] if len(word) > 3 and word.endswith("e") else word


# Each aspect: the words that name one of its items (any form of them matches: `stem`).
# fmt: off
_LEXICON: dict[str, str] = {
    "activity": """pottery painting drawing sketching camping hiking hike swimming running jogging yoga
        dancing dance cooking baking gardening knitting sewing crochet photography fishing surfing
        skiing snowboarding climbing bouldering cycling biking kayaking canoeing sailing museum concert picnic
        meditation chess puzzle pilates gym workout volunteering reading writing singing
        skateboarding rollerblading horseback riding bowling karaoke birdwatching journaling
        scrapbooking woodworking embroidery calligraphy archery golf tennis beach park trip class
        lesson workshop game roadtrip road hiking festival""",
    "sport": """yoga running jogging swimming cycling biking hiking climbing bouldering surfing skiing snowboarding
        kickboxing boxing karate judo taekwondo wrestling weight weights weightlifting circuit
        crossfit pilates gym workout basketball football soccer tennis golf baseball volleyball
        hockey rugby cricket badminton marathon triathlon 5k 10k race skateboarding rowing kayaking
        dance dancing martial arts training cardio spin zumba""",
    "place": """city town country beach mountain mountains lake park museum island village state
        abroad coast forest desert canyon river""",
    "travel": """trip travel travelled traveled traveling travelling vacation holiday flight flew road
        visit visited tour abroad getaway cruise backpacking""",
    "pet": """dog puppy pup cat kitten kitty turtle tortoise fish goldfish bird parrot hamster rabbit
        bunny horse pony pig snake lizard gecko ferret chinchilla pet""",
    "work": """job career company business boss promotion hired interview startup store shop studio
        intern internship office position role fired client clients salary coworker colleague
        colleagues manager project teacher nurse engineer counselor counseling designer developer
        banker lawyer doctor chef""",
    "event": """parade festival conference concert party wedding ceremony fundraiser charity march
        rally tournament competition contest race marathon show exhibition exhibit meetup event
        gala convention workshop seminar graduation reunion camp game match championship
        recital premiere drive protest speech launch""",
    "food": """cook cooked cooking bake baked baking recipe dessert cake cookie pie soup pasta bread
        dish meal dinner chicken icecream chocolate pizza salad smoothie curry stew cupcake
        brownie muffin pancake tart pudding sushi taco burger sandwich""",
    "book": """book novel read reading series author library fantasy trilogy chapter memoir biography
        comic manga poetry""",
    "writing": """write writing wrote written screenplay script blog journal poem poetry story article
        novel essay book column post""",
    "film": """movie film show series watch watched cinema documentary trilogy episode sitcom anime""",
    "music": """guitar piano violin drums drum song album band concert sing singing music playlist
        musician ukulele cello flute saxophone choir gig""",
    "game": """game videogame gaming console tournament rpg xbox playstation nintendo switch boardgame
        chess puzzle""",
    "art": """paint painting drawing sketch art pottery sculpture mural canvas artwork craft crafts
        photography portrait ceramics clay""",
    "cause": """volunteer volunteering volunteered charity donate donated donation fundraiser shelter
        cause nonprofit community campaign petition activist advocacy rights veterans homeless
        mentor mentoring mentorship support""",
    "family": """kid kids child children son daughter husband wife family fam mom dad mother father
        sister brother parents grandma grandpa grandmother grandfather baby""",
}
# fmt: on
ASPECTS: dict[str, frozenset[str]] = {kind: frozenset(map(stem, words.split())) for kind, words in _LEXICON.items()}

_HOBBIES = ("activity", "sport", "art", "music", "game", "book", "writing")
# The words of a question asking for the items of one or more aspects, in the plural or as a count.
# fmt: off
_ASKED: dict[str, tuple[str, ...]] = {
    "activities": ("activity", "sport", "art", "music", "game"),
    "hobbies": _HOBBIES,
    "interests": ("activity", "sport", "art", "music", "game", "book", "writing", "film"),
    "exercises": ("sport",), "sports": ("sport",), "workouts": ("sport",),
    "cities": ("place", "travel"), "countries": ("place", "travel"), "places": ("place", "travel"),
    "trips": ("travel", "place"), "destinations": ("place", "travel"),
    "pets": ("pet",), "animals": ("pet",),
    "jobs": ("work",), "careers": ("work",), "businesses": ("work",),
    "events": ("event",),
    "recipes": ("food",), "desserts": ("food",), "dishes": ("food",), "foods": ("food",), "meals": ("food",),
    "books": ("book", "title"), "novels": ("book", "title"), "authors": ("book", "title"),
    "series": ("book", "film", "title"),
    "writings": ("writing",),
    "movies": ("film", "title"), "films": ("film", "title"), "shows": ("film", "title"),
    "songs": ("music", "title"), "albums": ("music", "title"), "instruments": ("music",), "bands": ("music",),
    "games": ("game", "sport", "title"), "tournaments": ("game", "event"),
    "paintings": ("art",), "artworks": ("art",),
    "causes": ("cause",), "charities": ("cause",),
}
_ASKED_VERBS: dict[str, tuple[str, ...]] = {
    "been to": ("place", "travel"), "traveled": ("place", "travel"), "travelled": ("place", "travel"),
    "visited": ("place", "travel"), "cooked": ("food",), "baked": ("food",), "made": ("food", "art"),
    "read": ("book", "title"), "written": ("writing",), "watched": ("film", "title"),
    "played": ("game", "sport", "title"),
    "participated": ("event",), "attended": ("event",), "volunteered": ("cause",),
    "done": ("activity", "sport", "event"), "partake": ("activity", "sport", "art"),
    "tried": _HOBBIES, "joined": _HOBBIES, "learned": _HOBBIES, "learnt": _HOBBIES, "signed up": _HOBBIES,
    "picked up": _HOBBIES, "taken up": _HOBBIES, "took up": _HOBBIES,
}
# fmt: on
# A list: a plural kind after what/which/how many, or "what ... has X <verb>" (read, visited, done).
_LIST_START = re.compile(r"^\s*(?:what|which|how many|in what ways|where)\b", re.I)
_WORD = re.compile(r"[a-z0-9]+(?:['’][a-z]+)?")
_PLACE = re.compile(r"\b(?:to|in|at|from|visit(?:ed|ing)?|around|through)\s+((?:[A-Z][a-z]+)(?:\s+[A-Z][a-z]+){0,2})")
# A title in quotes ("I'm reading \"Dune\"", "we watched “Home Alone”"): one to six words, the first
# capitalised; the name of a book, film, song or game that names no kind itself.
_TITLE = re.compile(r"[\"“]([A-Z0-9][^\"“”\n.!?]{0,60}?)[\"”]")
_NOT_TITLES = frozenset("That This It Yes No Okay OK Hi Hello Thanks".split())  # noqa: SIM905
_NOT_PLACES = frozenset(
    """I I'm Monday Tuesday Wednesday Thursday Friday Saturday Sunday January February March April May
    June July August September October November December The A An My Our Your His Her Their This That
    It Christmas Easter Thanksgiving Halloween God""".split()  # noqa: SIM905
)
_PREFIX = re.compile(r"^[^\n:]{1,40}:\s+")
_LINE = re.compile(r"^([^\n:]{1,40}):[ \t]+(.+)$", re.M)
# A turn telling what its writer did, does or likes ("I just signed up for", "we went camping",
# "I'm off to go swimming", "I've been reading"): the turn a list's item is best taken from.
_REPORTED = re.compile(
    r"\b(?:i|we)(?:'ve| have|'m| am|’ve|’m)?\s+(?:\w+ly\s+|just\s+|also\s+|finally\s+)?"
    r"(?:went|did|tried|started|joined|signed|took|made|visited|played|read|cooked|baked|painted|ran|won|"
    r"got|attended|participated|finished|bought|adopted|learned|picked|been|going|doing|off|love|enjoy|had)\b",
    re.I,
)


def turn_aspects(text: str) -> dict[str, list[str]]:
    """The aspects a turn speaks of, each with its values in the order said: the lexicon words it
    holds (`ASPECTS`, as `stem`s), for places the capitalised names after "to", "in", "at",
    "visited" ("a trip to Paris", "back in New York"), and for titles the names in quotes ("Just
    finished \"A Dance with Dragons\""), which a question asking for books, films, songs or games
    lists too."""
    said = _PREFIX.sub("", text, count=1)
    found: dict[str, list[str]] = {}
    for word in _WORD.findall(said.lower()):
        word = stem(word)
        for kind, words in ASPECTS.items():
            if word in words and word not in found.get(kind, []):
                found.setdefault(kind, []).append(word)
    for match in _PLACE.finditer(said):
        name = " ".join(w for w in match.group(1).split() if w not in _NOT_PLACES)
        if name and name not in found.get("place", []):
            found.setdefault("place", []).append(name)
    for match in _TITLE.finditer(said):
        title = " ".join(match.group(1).split())
        if 1 <= len(title.split()) <= 6 and title not in _NOT_TITLES and title not in found.get("title", []):
            found.setdefault("title", []).append(title)
    return found


def reported(text: str) -> bool:
    """Whether a turn tells what its writer did, does or likes, in the first person."""
    return bool(_REPORTED.search(text))


def speaker_lines(text: str) -> list[tuple[str, str]]:
    """The (speaker, line) pairs of a chat log's text: its lines "Name: words" whose prefix can
    name someone (`store.people.speaker_like`)."""
    return [(m.group(1).strip(), m.group(0)) for m in _LINE.finditer(text) if speaker_like(m.group(1).strip())]


def add_turn(index: dict, key: str, text: str) -> bool:
    """Fold one turn of a person into their `index` (`{aspect: {value: [turn id, ...]}}`, in
    place): its id under each of its aspects' values (`turn_aspects`). Returns whether anything
    changed (a turn of no known aspect changes nothing)."""
    return add_ids(index, turn_aspects(text), [key])


def add_ids(index: dict, found: dict[str, list[str]], keys: Sequence[str]) -> bool:
    """File `keys` (turn ids, in the order written) under each value of `found` (aspect ->
    values, as `turn_aspects` gives them) in `index` (in place): what a memory learnt from those
    turns speaks of, or one turn's own words. Returns whether anything changed."""
    if not keys:
        return False
    for kind, values in found.items():
        by_value = index.setdefault(kind, {})
        for value in values:
            ids = [i for i in by_value.pop(value, []) if i not in keys] + list(keys)
            by_value[value] = ids[-MAX_TURNS_PER_VALUE:]  # re-inserted: the latest value is last
        while len(by_value) > MAX_VALUES:
            by_value.pop(next(iter(by_value)))
    return bool(found)


def build(turns: Iterable[tuple[str | None, str, str]]) -> dict[str, dict]:
    """Each speaker's index of `turns` ((speaker, key, text), in the order written; turns
    without a speaker are left out)."""
    indexes: dict[str, dict] = {}
    for speaker, key, text in turns:
        if speaker:
            add_turn(indexes.setdefault(speaker, {}), key, text)
    return {speaker: index for speaker, index in indexes.items() if index}


def asked(query: str) -> tuple[str, ...]:
    """The aspects a list question asks for ("What activities does Jo partake in?" -> activity,
    sport, art, ...; "Which cities has Tom been to?" -> place, travel; "How many games..."), in
    order of the words naming them; () for a question that asks for one thing ("What is Jo's
    favourite book?", "What is one of Jo's favourite films?") or no list at all."""
    if not _LIST_START.search(query) or re.search(r"\bone of\b", query, re.I):
        return ()
    lowered = query.lower()
    kinds: list[str] = []
    for word in _WORD.findall(lowered):
        kinds += _ASKED.get(word, ())
    if not kinds and re.match(r"^\s*what\b", lowered) and re.search(r"\b(?:has|have|did)\b", lowered):
        for phrase, aspects in _ASKED_VERBS.items():
            if re.search(rf"\b{phrase}\b", lowered):
                kinds += aspects
    return tuple(dict.fromkeys(kinds))


def items_for(indexes: Iterable[dict], kinds: Sequence[str]) -> dict[str, list[str]]:
    """`"aspect:value"` -> the ids of the turns that said it, over the people's `indexes`, for the
    aspects `kinds`."""
    found: dict[str, list[str]] = {}
    for index in indexes:
        for kind in kinds:
            for value, ids in (index.get(kind) or {}).items():
                found.setdefault(f"{kind}:{value}", []).extend(ids)
    return found


def spread(ranked: Sequence[str], items: dict[str, list[str]], score: Callable[[str], float]) -> list[str]:
    """The turn ids of `items` (value -> turn ids), one per value first: each value's best turn by
    `score`, values ordered by that turn's score, then each value's second best, and so on; a turn
    of several values counts once. `ranked` (the first stage's order) breaks ties."""
    order = {key: position for position, key in enumerate(ranked)}

    def better(key: str) -> tuple[float, int]:
        return (-score(key), order.get(key, len(order)))

    columns = [sorted(set(ids), key=better) for ids in items.values()]
    picked: list[str] = []
    seen: set[str] = set()
    depth = 0
    while any(depth < len(column) for column in columns):
        layer = [column[depth] for column in columns if depth < len(column)]
        for key in sorted(set(layer), key=better):
            if key not in seen:
                seen.add(key)
                picked.append(key)
        depth += 1
    return picked


def items_first(ranked: Sequence[str], items: dict[str, list[str]], score: Callable[[str], float]) -> list[str]:
    """`spread` of `items` ("aspect:value" -> turn ids), titles said with a word of the kinds
    asked first: such a title names one item of the list ("\"The Name of the Wind\" is a great
    novel" for "What books has Tim read?"), where the words of its kind ("book", "read", "novel")
    only name the kind, and a turn using them may list nothing; then the rest, then the other
    titles (a film's for a question about books); each turn once."""
    titles = {value: ids for value, ids in items.items() if value.startswith("title:")}
    rest = {value: ids for value, ids in items.items() if value not in titles}
    kind_words = {key for ids in rest.values() for key in ids}
    named = {value: [key for key in ids if key in kind_words] for value, ids in titles.items()}
    named = {value: ids for value, ids in named.items() if ids}
    return list(
        dict.fromkeys([*spread(ranked, named, score), *spread(ranked, rest, score), *spread(ranked, titles, score)])
    )


def interleaved(first: Sequence[str], second: Sequence[str], every: int) -> list[str]:
    """`first` with the next of `second` after every `every` of it, each key once (what is left
    of `second` at the end)."""
    merged: list[str] = []
    rest = list(second)
    for position, key in enumerate(first, 1):
        merged.append(key)
        if position % every == 0 and rest:
            merged.append(rest.pop(0))
    return list(dict.fromkeys(merged + rest))
