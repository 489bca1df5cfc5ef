"""What bench/chat_dataset.py and bench/chat_fresh_dataset.py share: a LoCoMo-shaped sample
(`conversation` with `speaker_a`, `speaker_b`, `session_N`, `session_N_date_time`; `qa`) written
turn by turn, and the command that writes the committed file or checks it is up to date."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path


class Sample:
    """One chat being written: `say` adds a turn to a session and returns its `dia_id`, `ask`
    adds a question on turns already said, `finish` gives the sample."""

    def __init__(self, sessions: int, split: str) -> None:
        self.sessions: list[list[dict]] = [[] for _ in range(sessions)]
        self.qa: list[dict] = []
        self.split = split

    def say(self, session: int, speaker: str, text: str, caption: str = "") -> str:
        turns = self.sessions[session]
        turn = {"speaker": speaker, "dia_id": f"D{session + 1}:{len(turns) + 1}", "text": text}
        if caption:
            turn["blip_caption"] = caption
        turns.append(turn)
        return turn["dia_id"]

    def ask(self, text: str, evidence: list[str], category: int, style: str, slices: list[str]) -> None:
        self.qa.append(
            {
                "question": text,
                "evidence": evidence,
                "category": category,
                "style": style,
                "split": self.split,
                "slices": sorted(set(slices)),
            }
        )

    def finish(self, sample_id: str, speaker_a: str, speaker_b: str, dates: Sequence[datetime]) -> dict:
        body: dict = {"speaker_a": speaker_a, "speaker_b": speaker_b}
        for number, (turns, at) in enumerate(zip(self.sessions, dates, strict=True), 1):
            body[f"session_{number}"] = turns
            body[f"session_{number}_date_time"] = at.strftime("%-I:%M %p on %-d %B, %Y")
        for item in self.qa:
            if "name recorded" in item["slices"] and "name not recorded" in item["slices"]:
                item["slices"].remove("name recorded")  # a question counts as recorded only if all its names are
        return {"sample_id": sample_id, "conversation": body, "qa": self.qa}


def write_or_check(argv: Sequence[str], path: Path, build_all: Callable[[], list[dict]], command: str) -> int:
    """`python -m <command>` writes `path` from `build_all()`; with `--check` it only says whether
    the committed file is up to date (exit 1 when it differs)."""
    data = build_all()
    text = json.dumps(data, indent=1, ensure_ascii=False) + "\n"
    if "--check" in argv:
        same = path.exists() and path.read_text() == text
        print("up to date" if same else f"{path} differs from {command}'s output: run python -m {command}")
        return 0 if same else 1
    path.write_text(text)
    turns = sum(
        len(v) for d in data for k, v in d["conversation"].items() if k.startswith("session_") and isinstance(v, list)
    )
    print(f"wrote {path}: {len(data)} chats, {turns} turns, {sum(len(d['qa']) for d in data)} questions")
    return 0
