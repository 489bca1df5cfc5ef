"""Running, from a node, a subgraph compiled with `checkpointer=False`.

langgraph hands a run's durability to the graphs it calls. Under `durability="sync"` a graph
waits after each of its steps for that step's checkpoint, which a graph without a checkpointer
never writes: langgraph 1.2 then fails the step (`AsyncPregelLoop` has no `_put_checkpoint_fut`).
Such a subgraph runs with durability "exit" (which writes nothing for it either), whatever the
run chose. langgraph has no public way to set the durability a nested call inherits without a
warning that it has no effect, so this module reaches into the config key it reads; a unit test
(tests/unit/test_router_graph.py, a run with `durability="sync"`) fails if that stops working.
"""

from __future__ import annotations

from langchain_core.runnables import RunnableConfig


def without_checkpoints(config: RunnableConfig) -> RunnableConfig:
    """`config` for calling a subgraph compiled with `checkpointer=False` from a node."""
    from langgraph._internal._constants import CONFIG_KEY_DURABILITY  # what Pregel.astream reads

    return {**config, "configurable": {**(config.get("configurable") or {}), CONFIG_KEY_DURABILITY: "exit"}}
