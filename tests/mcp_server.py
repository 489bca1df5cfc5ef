"""A small FastMCP server the MCP tests start, over stdio (default) or streamable HTTP.

python tests/mcp_server.py                 # stdio
python tests/mcp_server.py --http PORT     # streamable HTTP on http://127.0.0.1:PORT/mcp
"""

import argparse

from fastmcp import FastMCP

server = FastMCP("test-tools")


@server.tool
def add(a: int, b: int) -> int:
    """Add two integers and return the sum."""
    return a + b


@server.tool
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP on this port")
    options = parser.parse_args()
    if options.http is None:
        server.run(transport="stdio", show_banner=False)
    else:
        server.run(
            transport="http",
            host="127.0.0.1",
            port=options.http,
            path="/mcp",
            show_banner=False,
            log_level="WARNING",
        )


if __name__ == "__main__":
    main()
