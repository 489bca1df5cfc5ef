"""Print the given port if it is free on 127.0.0.1, else a free one (`python -m scripts.free_port 2024`)."""

import socket
import sys


def free_port(preferred: int = 0) -> int:
    """`preferred` if a server could listen there, else a port the OS picks.

    The test binds with SO_REUSEADDR, as uvicorn (and so `langgraph dev`) does: a port whose
    last server just stopped (sockets in TIME_WAIT) is free for a restart on the same port.
    """
    for candidate in (preferred, 0):
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(("127.0.0.1", candidate))
                sock.listen(1)
            except OSError:
                continue
            return sock.getsockname()[1]
    raise RuntimeError("no free port on 127.0.0.1")


if __name__ == "__main__":
    print(free_port(int(sys.argv[1]) if len(sys.argv) > 1 else 0))
