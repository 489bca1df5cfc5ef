"""Context of the `deep_research` graph: the shared `Context` plus research limits and models per role."""

from __future__ import annotations

from dataclasses import dataclass, fields

from graphs.runtime.context import Context, env_field
from graphs.runtime.models import check_model_spec

ROLES = ("research", "compression", "report")


@dataclass(kw_only=True)
class ResearchContext(Context):
    """Per-run settings of `deep_research` (every shared field plus the ones below)."""

    research_model: str | None = env_field("RESEARCH_MODEL")
    compression_model: str | None = env_field("RESEARCH_COMPRESSION_MODEL")
    report_model: str | None = env_field("RESEARCH_REPORT_MODEL")
    allow_clarification: bool = env_field("RESEARCH_ALLOW_CLARIFICATION")
    plan_only: bool = env_field("RESEARCH_PLAN_ONLY")
    max_sub_questions: int = env_field("RESEARCH_MAX_SUB_QUESTIONS")
    max_concurrent_research_units: int = env_field("RESEARCH_MAX_CONCURRENT_UNITS")
    max_research_rounds: int = env_field("RESEARCH_MAX_ROUNDS")
    search_results: int = env_field("RESEARCH_SEARCH_RESULTS")
    pages_per_researcher: int = env_field("RESEARCH_PAGES_PER_RESEARCHER")
    knowledge_bases: list[str] | None = env_field("RESEARCH_KNOWLEDGE_BASES")

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
