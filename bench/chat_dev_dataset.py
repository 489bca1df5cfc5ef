"""A development set for tuning recall on messy chats, never committed as data: bench/chat_fresh_dataset.py's
generator with other seeds and, beside its four pairs of people, four more (eight chats, 64 list
and 32 both-speaker questions), so that the committed held-out sets stay unread while tuning.

    python -m bench.chat_dev_dataset [PATH] [--seed N]   # default /tmp/chat_dev.json, seed 9000
    python -m bench.locomo_eval /tmp/chat_dev.json --schema S --captions --paths ...
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bench.chat_fresh_dataset import PAIRS, Pair, build

DEV_PAIRS = (
    *PAIRS,
    Pair("kwame.osei", "Kwame", "Kwam", "call me Kwame, that's my work account", "Hannah Berg", "Hanna", "Hana"),
    Pair("Priyanka Raman", "Priya", "Pria", "", "Oskar", "Ossi", "Osker"),
    Pair("rosie_b_92", "Rosie", "Rosy", "Rosie here, new phone who dis", "Daniel Okafor", "Dan", "Daneil"),
    Pair("Zhang Wei", "Vivian", "Vivien", "it's Vivian, my english name", "Mateo", "Teo", "Matteo"),
)


def build_dev(seed: int) -> list[dict]:
    """The development chats: the fresh set's generator at `seed` over DEV_PAIRS."""
    samples = [build(index, seed, DEV_PAIRS) for index in range(len(DEV_PAIRS))]
    for sample in samples:
        sample["sample_id"] = sample["sample_id"].replace("fresh", "dev")
    return samples


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.chat_dev_dataset", description=__doc__.split("\n\n")[0])
    parser.add_argument("path", nargs="?", default="/tmp/chat_dev.json")
    parser.add_argument("--seed", type=int, default=9000)
    args = parser.parse_args(argv)
    data = build_dev(args.seed)
    Path(args.path).write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {args.path}: {len(data)} chats, {sum(len(d['qa']) for d in data)} questions")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
