"""Print the config file `scripts/serve` hands to `langgraph dev` (`python -m scripts.dev_config`).

`langgraph dev` builds the chat-client cards (the `ui` entry of langgraph.json) with Node.js
(`npx @langchain/langgraph-ui`) when it starts, and exits when it cannot. The graphs, the API and
SDK clients need no Node: with `node` or `npx` missing from PATH this prints the path of a copy
of langgraph.json without its `ui` entry (under `.langgraph_api/`, beside the server's own
records; relative paths stay relative to the project folder, `langgraph dev`'s working folder)
and writes one line to stderr saying the cards are off until Node.js is installed. With both on
PATH it prints `langgraph.json`.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

CONFIG = Path("langgraph.json")
WITHOUT_UI = Path(".langgraph_api") / "langgraph.no-ui.json"
NODE_TOOLS = ("node", "npx")
NO_NODE_NOTE = (
    "Chat-client cards are off: Node.js (node and npx) is not on PATH, and `langgraph dev` builds "
    "the cards with it; every graph and the API are served. Install Node.js 20+ and restart "
    "scripts/serve to turn the cards on."
)


def missing_node_tools() -> list[str]:
    """The Node.js commands `langgraph dev` needs for the cards that are not on PATH."""
    return [tool for tool in NODE_TOOLS if shutil.which(tool) is None]


def dev_config(root: Path) -> tuple[Path, str | None]:
    """(the config to serve, relative to `root`; the note to print, or None) for the project at `root`."""
    config = json.loads((root / CONFIG).read_text())
    if "ui" not in config or not missing_node_tools():
        return CONFIG, None
    config.pop("ui")
    config.pop("ui_config", None)
    target = root / WITHOUT_UI
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(config, indent=2) + "\n")
    return WITHOUT_UI, NO_NODE_NOTE


def main() -> None:
    config, note = dev_config(Path.cwd())
    if note:
        print(note, file=sys.stderr)
    print(config)


if __name__ == "__main__":
    main()
