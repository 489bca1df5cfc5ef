"""Print the given port if it is free on 127.0.0.1, else a free one (`python -m scripts.free_port 2024`)."""

import socket
import sys


def free_port(preferred: int = 0) -> int:
    """`preferred` if nothing listens there, else a port the OS picks."""
    for candidate in (preferred, 0):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", candidate))
            except OSError:
                continue
            return sock.getsockname()[1]
    raise RuntimeError("no free port on 127.0.0.1")


if __name__ == "__main__":
    print(free_port(int(sys.argv[1]) if len(sys.argv) > 1 else 0))
