"""The `router` graph: routes each message to a general answer, retrieve-only workers over a
knowledge base, or a sub-agent graph."""
