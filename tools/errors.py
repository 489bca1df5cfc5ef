"""Errors tools raise. The node that runs tools turns them into `ToolMessage(status="error")`."""


class ToolError(Exception):
    """A tool could not do what was asked; the message is shown to the model and the user."""


class ToolInputError(ToolError, ValueError):
    """The arguments were wrong (bad URL, absurd expression, unknown knowledge base, ...).

    Never retried: the same input fails the same way.
    """


class TransientToolError(ToolError):
    """A failure that may pass if tried again (timeout, HTTP 5xx or 429, connection reset).

    The tool runner retries these with bounded backoff before reporting them.
    """


def is_transient_http_status(status: int) -> bool:
    """Whether an HTTP status may pass if the request is sent again (408, 429, 5xx)."""
    return status in (408, 429) or status >= 500
