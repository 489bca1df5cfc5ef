"""The route decision and the `worker_name` protocol (seed 003, v2: `{kb_prefix}:{agent_type}:{agent_mode}`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

AGENT_MODE = "retrieve_only"
GENERAL_KB = "general"
DEFAULT_KB = "default"


@dataclass(frozen=True)
class ParsedWorkerName:
    """The three parts of a worker name."""

    kb_prefix: str
    agent_type: str
    agent_mode: str


def parse_worker_name(worker_name: str | None) -> ParsedWorkerName:
    """Parse a worker name in one of the seed's compatible forms, else raise ValueError.

    | form | result |
    | --- | --- |
    | `""` (general / no retrieval) | kb `""`, type `""`, mode `retrieve_only` |
    | `<agent_type>` (legacy, never produced) | kb `""` |
    | `<kb_prefix>:<agent_type>` (compat) | mode `retrieve_only` |
    | `<kb_prefix>:<agent_type>:<agent_mode>` | mode must be `retrieve_only` (empty means it) |

    Four or more segments, and any mode other than `retrieve_only`, are errors.
    """
    if worker_name is not None and not isinstance(worker_name, str):
        raise ValueError(f"worker_name must be a string, got {type(worker_name).__name__}")
    raw = (worker_name or "").strip()
    if not raw:
        return ParsedWorkerName("", "", AGENT_MODE)
    parts = [part.strip() for part in raw.split(":")]
    if len(parts) == 1:
        return ParsedWorkerName("", parts[0], AGENT_MODE)
    if len(parts) == 2:
        return ParsedWorkerName(parts[0], parts[1], AGENT_MODE)
    if len(parts) == 3:
        mode = parts[2] or AGENT_MODE
        if mode != AGENT_MODE:
            raise ValueError(f"unsupported agent_mode in worker_name {worker_name!r}: only {AGENT_MODE!r} exists")
        return ParsedWorkerName(parts[0], parts[1], mode)
    raise ValueError(
        f"invalid worker_name format {worker_name!r}: expected '{{kb_prefix}}:{{agent_type}}:{{agent_mode}}'"
    )


def worker_name_for(kb_prefix: str, agent_type: str) -> str:
    """The worker name for a knowledge base and worker type; `""` for the general route."""
    kb = (kb_prefix or "").strip()
    if kb == GENERAL_KB:
        return ""
    return f"{kb or DEFAULT_KB}:{agent_type}:{AGENT_MODE}"


@dataclass(frozen=True)
class RouteDecision:
    """Where one message goes (seed 003 `RouteDecision`), plus the route the router takes.

    `route` is `general`, `retrieval`, `error` or a sub-agent graph name; `worker_name` is the
    authoritative retrieval target (`""` unless the route is `retrieval`).
    """

    requested_kb_prefix: str
    routed_kb_prefix: str
    kb_prefix: str
    confidence: float
    method: str
    reason: str
    worker_name: str
    route: str

    def as_dict(self) -> dict:
        """The decision as plain JSON-ready data (state, events)."""
        return asdict(self)
