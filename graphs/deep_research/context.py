"""Context of the `deep_research` graph: the shared `Context` plus research limits and models per role."""

from __future__ import annotations

from dataclasses import dataclass, fields

from graphs.runtime.context import Context, env_field, parse_bool, parse_list, parse_optional
from graphs.runtime.models import check_model_spec

ROLES = ("research", "compression", "report")


@dataclass(kw_only=True)
class ResearchContext(Context):
    """Per-run settings of `deep_research` (every shared field plus the ones below)."""

    research_model: str | None = env_field(
        "RESEARCH_MODEL", "", parse_optional,
        "Model that clarifies, plans and reflects, 'provider:model'; unset uses `model`.",
    )
    compression_model: str | None = env_field(
        "RESEARCH_COMPRESSION_MODEL", "", parse_optional,
        "Model that compresses each researcher's pages into cited notes; unset uses `model`.",
    )
    report_model: str | None = env_field(
        "RESEARCH_REPORT_MODEL", "", parse_optional,
        "Model that writes the final report; unset uses `model`.",
    )
    allow_clarification: bool = env_field(
        "RESEARCH_ALLOW_CLARIFICATION", "false", parse_bool,
        "Ask the user one clarifying question (an interrupt) when the request is ambiguous (default false).",
    )
    plan_only: bool = env_field(
        "RESEARCH_PLAN_ONLY", "false", parse_bool,
        "Stop after the research plan and answer with it, without researching (default false).",
    )
    max_sub_questions: int = env_field(
        "RESEARCH_MAX_SUB_QUESTIONS", "5", int,
        "Most sub-questions in the plan; extra ones are dropped and reported (default 5).",
        minimum=1, maximum=20,
    )
    max_concurrent_research_units: int = env_field(
        "RESEARCH_MAX_CONCURRENT_UNITS", "3", int,
        "Most researchers running at once; more sub-questions run in later waves (default 3).",
        minimum=1, maximum=20,
    )
    max_research_rounds: int = env_field(
        "RESEARCH_MAX_ROUNDS", "2", int,
        "Research rounds: the plan's round plus reflection rounds that fill gaps (default 2).",
        minimum=1, maximum=10,
    )
    search_results: int = env_field(
        "RESEARCH_SEARCH_RESULTS", "5", int, "Web search results per query (default 5).",
        minimum=1, maximum=20,
    )
    pages_per_researcher: int = env_field(
        "RESEARCH_PAGES_PER_RESEARCHER", "3", int,
        "Most pages each researcher reads with web_read (default 3).",
        minimum=0, maximum=10,
    )
    knowledge_bases: list[str] | None = env_field(
        "RESEARCH_KNOWLEDGE_BASES", "", parse_list,
        "Knowledge bases researchers also search (env: comma-separated); empty for none.",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        for role in ROLES:
            spec = getattr(self, f"{role}_model")
            if spec is not None:
                try:
                    check_model_spec(spec)
                except ValueError as exc:
                    raise ValueError(f"Invalid context field `{role}_model`: {exc}") from None

    def model_for(self, role: str) -> str:
        """The model of `role` ('research', 'compression', 'report'), defaulting to `model`."""
        return getattr(self, f"{role}_model") or self.model


def research_context_fields() -> list[tuple[str, str]]:
    """(name, description) of the fields `deep_research` adds to the shared context."""
    shared = {f.name for f in fields(Context)}
    return [(f.name, f.metadata.get("description", "")) for f in fields(ResearchContext) if f.name not in shared]
