"""Print a port to serve on: the given one if it is free on 127.0.0.1, else the next free one
above it (`python -m scripts.free_port 2024`); with 0, or none free in the next 100, one the OS
picks. When the port printed is not the one asked for, stderr says why."""

import socket
import sys

SEARCH = 100  # ports tried above the preferred one


def _can_listen(port: int) -> int | None:
    """The port a server could listen on at `port` (the OS's choice for 0), else None.

    The test binds with SO_REUSEADDR, as uvicorn (and so `langgraph dev`) does: a port whose
    last server just stopped (sockets in TIME_WAIT) is free for a restart on the same port.
    """
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
            sock.listen(1)
        except OSError:
            return None
        return sock.getsockname()[1]


def free_port(preferred: int = 0) -> int:
    """`preferred` if a server could listen there, else the next such port above it, else one
    the OS picks (also for `preferred=0`)."""
    candidates = range(preferred, min(preferred + SEARCH, 65536)) if preferred else ()
    for candidate in (*candidates, 0):
        port = _can_listen(candidate)
        if port is not None:
            return port
    raise RuntimeError("no free port on 127.0.0.1")


if __name__ == "__main__":
    wanted = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    port = free_port(wanted)
    if wanted and port != wanted:
        print(f"port {wanted} is in use: using {port}", file=sys.stderr)
    print(port)
