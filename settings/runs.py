"""The variables of runs: models and retries, and the defaults of the graphs' run context
(`AGENT_*`, `RESEARCH_*`, `ROUTER_*`). The other variables are in settings/__init__.py, whose
`SettingsValues` extends `RunSettings`; together they are every variable, in this order."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, SecretStr
from pydantic_settings import NoDecode

CommaList = Annotated[list[str], NoDecode]


class RunSettings(BaseModel):
    """The variables of runs (field name = variable name): types, defaults, bounds, descriptions."""

    model_config = ConfigDict(frozen=True)

    # Models (graphs/runtime/models.py)
    OPENAI_API_KEY: SecretStr | None = Field(None, description="Key for `openai:*` models and OpenAI embeddings.")
    OPENAI_BASE_URL: str | None = Field(
        None,
        description="Any OpenAI-compatible server (vLLM `http://host:8000/v1`, Ollama `http://host:11434/v1`, "
        "llama.cpp `http://host:8080/v1`); with it, the key may be omitted.",
    )
    ANTHROPIC_API_KEY: SecretStr | None = Field(
        None, description="Key for `anthropic:*` models (install `.[anthropic]`)."
    )
    GOOGLE_API_KEY: SecretStr | None = Field(
        None, description="Key for `google_genai:*` models (with its integration package)."
    )
    GROQ_API_KEY: SecretStr | None = Field(None, description="Key for `groq:*` models (with its integration package).")
    MISTRAL_API_KEY: SecretStr | None = Field(
        None, description="Key for `mistralai:*` models (with its integration package)."
    )
    AGENT_REQUEST_CREDENTIALS: bool = Field(
        True,
        description="Accept a model key, an OpenAI-compatible base URL and a web-search key per request, in the "
        "headers `x-model-api-key`, `x-model-base-url` and `x-search-api-key` of a run request (held in this "
        "process's memory for the run only, never stored); off, a run request carrying them is refused with "
        "403 REQUEST_CREDENTIALS_DISABLED (default true).",
    )
    AGENT_REQUEST_BASE_URLS: CommaList | None = Field(
        None,
        description="Base URLs a request may choose with `x-model-base-url` (comma-separated URL prefixes, e.g. "
        "`https://api.openai.com/v1,http://10.0.0.5:8000/v1`); a listed URL may be on a private or loopback "
        "address. `*` stands for any URL on a public address. Unset: `*` only, so addresses of this machine "
        "and private networks are refused.",
    )
    AGENT_REQUEST_CREDENTIALS_TTL: float = Field(
        900,
        ge=10,
        le=86400,
        description="Seconds per-request credentials stay held after their request or their run's last model or "
        "search call; a run that needs them later fails saying so (default 900).",
    )
    AGENT_REQUEST_CREDENTIALS_MAX: int = Field(
        10000,
        ge=10,
        le=1_000_000,
        description="Most per-request credentials held at once; past it the least recently used are dropped "
        "(default 10000).",
    )
    AGENT_RETRY_BASE_DELAY: float = Field(
        0.5,
        ge=0,
        le=60,
        description="First backoff delay in seconds of tool and model retries; doubles each retry, with jitter, up to 8 s.",
    )
    MEMORY_EXTRACTION_DELAY: float = Field(
        20,
        ge=0,
        le=86400,
        description="Seconds after a turn before its memories are extracted; a newer turn of the same "
        "conversation within that time replaces the scheduled run, whose turn the newer one extracts too "
        "(debounce). Also the wait of a writer run that yields to a run in progress in the conversation.",
    )
    MEMORY_WRITER_MAX_TURNS: int = Field(
        5,
        ge=1,
        le=100,
        description="Most turns of a conversation one memory writer run extracts (oldest first, one model call "
        "each); the rest stay pending for the conversation's next run.",
    )
    MEMORY_WRITER_MAX_TOKENS: int = Field(
        2048,
        ge=256,
        le=32768,
        description="Most tokens the memory writer's model may answer one turn's extraction with: a small model "
        "that loops in its JSON stops there (the extraction fails and is retried like a bad answer).",
    )
    MEMORY_WRITER_MAX_CHARS: int = Field(
        24000,
        ge=1000,
        le=1_000_000,
        description="Characters of turns one memory writer run extracts at most (its first turn always); the "
        "rest stay pending for the conversation's next run.",
    )
    MEMORY_WRITER_YIELD_RETRIES: int = Field(
        5,
        ge=0,
        le=100,
        description="Times a memory writer run that finds the user's conversation busy re-schedules itself "
        "MEMORY_EXTRACTION_DELAY seconds later before it gives up; its turns stay pending for the next run.",
    )

    # Run context defaults: graphs/runtime/context.py
    AGENT_MODEL: str = Field(
        "openai:gpt-4o-mini",
        description="Chat model as 'provider:model', e.g. 'openai:gpt-4o-mini', or 'openai:qwen2.5' against OPENAI_BASE_URL (vLLM, Ollama, llama.cpp). Default openai:gpt-4o-mini.",
    )
    AGENT_TEMPERATURE: float = Field(0.0, ge=0, le=2, description="Sampling temperature (default 0).")
    AGENT_TOP_P: float | None = Field(
        None,
        ge=0.01,
        le=1,
        description="Nucleus sampling: the model samples from the tokens holding this share of the probability (unset: the provider's default).",
    )
    AGENT_MAX_TOKENS: int | None = Field(
        None,
        ge=1,
        le=200_000,
        description="Most tokens the model may write in one answer (unset: the provider's default); the graphs' own structured calls (routing, plans, memory extraction) are not limited by it.",
    )
    AGENT_TOOL_CHOICE: str | None = Field(
        None,
        description="Whether the model must call a tool: `auto` (it decides), `none` (it answers without tools), "
        "`required` (the turn's first model call must call a tool; later calls decide) or a tool's name (the "
        "first call must call that tool); unset: `auto`. Applies to the agents that offer tools (`react`, and "
        "where `router` and `plan_execute` hand a turn to it); reported as a `model_parameter_ignored` event "
        "where a call offers no tools.",
    )
    AGENT_REASONING_EFFORT: str | None = Field(
        None,
        pattern="^(none|minimal|low|medium|high|xhigh)$",
        description="How much a reasoning model thinks before answering: `none`, `minimal`, `low`, `medium`, "
        "`high` or `xhigh`, sent to providers whose client takes it (OpenAI and OpenAI-compatible servers, "
        "DeepSeek, Groq, xAI); other providers answer without it and the run reports a "
        "`model_parameter_ignored` event (unset: the provider's default).",
    )
    AGENT_MAX_STEPS: int = Field(
        10,
        ge=1,
        le=100,
        description="Most model calls in one turn; reaching it ends the turn with an answer that says so (default 10).",
    )
    AGENT_DEFAULT_USER_ID: str = Field(
        "anonymous",
        description="Whose memories and history the run may read and write. Set by the caller or the auth layer, never by the model (default 'anonymous').",
    )
    AGENT_TOOLS: CommaList | None = Field(
        None,
        description="Names of the tools the agent may call; empty for every configured tool (env: comma-separated).",
    )
    AGENT_TOOL_TIMEOUT: float = Field(60.0, ge=0.1, le=3600, description="Seconds one tool call may take (default 60).")
    AGENT_TOOL_RETRIES: int = Field(
        2,
        ge=0,
        le=10,
        description="Retries of a tool call that failed transiently (timeout, 5xx, 429), with exponential backoff (default 2).",
    )
    AGENT_MODEL_TIMEOUT: float | None = Field(
        None,
        ge=1,
        le=3600,
        description="Seconds one model call may take in all (streaming included) before it counts as failed and is retried; unset: 120, or AGENT_LOCAL_MODEL_TIMEOUT when `OPENAI_BASE_URL` is on this machine (loopback) and the model is `openai:*`.",
    )
    AGENT_LOCAL_MODEL_TIMEOUT: float = Field(
        900.0,
        ge=1,
        le=3600,
        description="Default seconds per model call for a model served on this machine (`OPENAI_BASE_URL` on localhost/127.0.0.1/::1), e.g. llama.cpp on a CPU, whose first call of a conversation reads the whole prompt (default 900).",
    )
    AGENT_MODEL_RETRIES: int = Field(
        2,
        ge=0,
        le=10,
        description="Retries of a model call that failed transiently (connection, timeout, 429, 5xx) (default 2).",
    )
    AGENT_CONTEXT_TOKENS: int = Field(
        24000,
        ge=256,
        le=10000000,
        description="Token budget of the conversation sent to the model; older turns are summarized past it (default 24000).",
    )
    AGENT_REMEMBER: bool = Field(
        True,
        description="Record each turn in the user's chat history and extract long-term memories from it in the background (needs a store) (default true).",
    )
    AGENT_RECALL_TOP_K: int = Field(
        3,
        ge=0,
        le=20,
        description="Before a turn's first model call, show the model up to this many of the user's memories close in meaning to the message (saved facts, events, the user's messages in other conversations, profile fields), so questions about the user are answered from memory without a search; 0 turns it off (default 3).",
    )
    AGENT_RECALL_MAX_TOKENS: int = Field(
        300,
        ge=0,
        le=8000,
        description="The most tokens (about 4 characters each) the memories recalled into a turn's prompt take together (AGENT_RECALL_TOP_K): the closest first, a long one cut, so the prompt stays bounded however long the user's memories and messages are; 0 turns the note off (default 300).",
    )
    AGENT_RECALL_ANSWER_SIMILARITY: float = Field(
        0.45,
        ge=0,
        le=1,
        description="When a memory recalled for a turn is at least this similar to the message (cosine, local embedder), the model is first asked, without tools, whether the recalled memories answer it; if they do, that answer, citing the memory, is the turn's answer; 0 turns the check off (default 0.45).",
    )
    AGENT_RECOVER_TOOL_CALLS: bool = Field(
        True,
        description="When a model writes its tool calls as text (fenced or bare JSON, `<tool_call>` or `<function>` tags) instead of making them, turn the ones that match an offered tool's schema into real calls; invalid ones are never run, the model is asked once more (default true).",
    )
    AGENT_CALCULATION: str = Field(
        "after",
        pattern="^(after|before|off)$",
        description="When a user's message is a numeric word problem (a question with numbers and a word asking for arithmetic: how much, a cost, a total, a rate, a percentage, an operation) and the calculator is offered, ask the model for the calculation as a structured answer (one arithmetic expression) and run the calculator on it as a normal tool call, so the figure comes from the tool: `after` asks only when the model answered without running the calculator (a model that calls it pays nothing), `before` asks before the turn's first model call (cheapest for a small model on a CPU), `off` never (nor with AGENT_TOOL_CHOICE `none`). The final answer is checked: a calculator result it does not state is added, and figures no tool produced are marked as not computed (default after).",
    )
    AGENT_STRUCTURED_OUTPUT: str = Field(
        "auto",
        pattern="^(auto|json_schema|function_calling)$",
        description="How structured calls (route, plan, research brief, memory extraction) ask the model: `json_schema` (the server's constrained output, `response_format`), `function_calling` (a forced tool call) or `auto`: `json_schema` for `openai:*` models on an OPENAI_BASE_URL server (vLLM, llama.cpp, Ollama), else `function_calling` (default auto).",
    )
    AGENT_RUN_TIMEOUT: float = Field(
        1800.0,
        ge=0,
        le=86400,
        description="Seconds a run may take, counted from its first model or tool call; when exceeded the run ends with a message saying so (a `run_deadline_exceeded` event); 0 = no deadline (default 1800).",
    )

    # Run context defaults: graphs/plan_execute/context.py
    AGENT_APPROVE_PLAN: bool = Field(
        False,
        description="Stop after planning and wait for the client to approve, edit or reject the plan (an interrupt; resume with Command(resume={'action': 'approve'|'edit'|'reject', 'plan': [...]})) (default false).",
    )
    AGENT_MAX_PLAN_STEPS: int = Field(
        8,
        ge=1,
        le=50,
        description="Most steps one plan (or one revision of it) may have; longer plans are sent back to the planner (default 8).",
    )
    AGENT_MAX_PARALLEL_STEPS: int = Field(
        4,
        ge=1,
        le=32,
        description="Most plan steps run at the same time; a wave holds at most this many ready steps (default 4).",
    )
    AGENT_MAX_REPLANS: int = Field(
        2,
        ge=0,
        le=10,
        description="Most revisions of the remaining plan per request (after failures or new findings) (default 2).",
    )
    AGENT_STEP_TIMEOUT: float = Field(
        300.0,
        ge=0.1,
        le=21600,
        description="Seconds one plan step may take (its tool with retries, or its agent run; the model fallback gets as long again); a step over it fails and goes to recovery (default 300).",
    )

    # Run context defaults: graphs/deep_research/context.py
    RESEARCH_MODEL: str | None = Field(
        None, description="Model that clarifies, plans and reflects, 'provider:model'; unset uses `model`."
    )
    RESEARCH_COMPRESSION_MODEL: str | None = Field(
        None, description="Model that compresses each researcher's pages into cited notes; unset uses `model`."
    )
    RESEARCH_REPORT_MODEL: str | None = Field(
        None, description="Model that writes the final report; unset uses `model`."
    )
    RESEARCH_ALLOW_CLARIFICATION: bool = Field(
        False,
        description="Ask the user one clarifying question (an interrupt) when the request is ambiguous (default false).",
    )
    RESEARCH_PLAN_ONLY: bool = Field(
        False, description="Stop after the research plan and answer with it, without researching (default false)."
    )
    RESEARCH_MAX_SUB_QUESTIONS: int = Field(
        5, ge=1, le=20, description="Most sub-questions in the plan; extra ones are dropped and reported (default 5)."
    )
    RESEARCH_MAX_CONCURRENT_UNITS: int = Field(
        3,
        ge=1,
        le=20,
        description="Most researchers running at once; more sub-questions run in later waves (default 3).",
    )
    RESEARCH_MAX_ROUNDS: int = Field(
        2,
        ge=1,
        le=10,
        description="Research rounds: the plan's round plus reflection rounds that fill gaps (default 2).",
    )
    RESEARCH_SEARCH_RESULTS: int = Field(5, ge=1, le=20, description="Web search results per query (default 5).")
    RESEARCH_PAGES_PER_RESEARCHER: int = Field(
        3, ge=0, le=10, description="Most pages each researcher reads with web_read (default 3)."
    )
    RESEARCH_KNOWLEDGE_BASES: CommaList | None = Field(
        None, description="Knowledge bases researchers also search (env: comma-separated); empty for none."
    )

    # Run context defaults: graphs/router/context.py
    ROUTER_KB: str | None = Field(
        None,
        description="Knowledge base to answer from (the route decision's requested_kb_prefix); unset lets the router choose. A name that does not exist is an error naming the existing ones.",
    )
    KB_AUTO_ROUTE: bool = Field(
        True,
        description="Let the router pick a knowledge base or sub-agent from the message; off, a message without `kb` goes to the general route (default true).",
    )
    ROUTER_RETRIEVAL_AGENTS: CommaList = Field(
        ["hybrid_agent", "dense_agent", "keyword_agent"],
        description="Retrieve-only worker types fanned out in parallel on the retrieval route (hybrid_agent, dense_agent, keyword_agent, naive_rag_agent, graph_agent, fusion_agent; env: comma-separated); a multi-hop question also gets graph_agent and fusion_agent, first.",
    )
    ROUTER_TOP_K: int = Field(
        5, ge=1, le=50, description="Passages per worker, and sources kept after merging (default 5)."
    )
    ROUTER_CONFIDENCE: float = Field(
        0.7, ge=0, le=1, description="Heuristic confidence below which the model classifies the message (default 0.7)."
    )
    ROUTER_KB_SIMILARITY: float = Field(
        0.4,
        ge=0,
        le=1,
        description="Similarity in meaning (cosine of EMBEDDINGS_MODEL vectors) between a message and a phrase of a knowledge base's name or description from which the router answers from that knowledge base without asking the model, when no other knowledge base comes within 0.1; 1 turns this off (default 0.4, set for the local embedder; other embedders may need another value).",
    )
