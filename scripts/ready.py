"""Wait until a LangGraph server answers `GET /ok` (`python -m scripts.ready URL PID [PATH]`, PATH
another health route such as Aegra's `/health`); exit 0 then, 1 if the process PID ends first or
nothing answers within TIMEOUT_S seconds."""

import os
import sys
import time

import httpx

TIMEOUT_S = 600


def alive(pid: int) -> bool:
    """Whether process `pid` still runs (an exited child not yet reaped counts as ended)."""
    try:
        os.kill(pid, 0)
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except ProcessLookupError:
        return False
    except OSError:  # no /proc, or not ours to signal: assume it runs
        return True


def wait_ready(url: str, pid: int, timeout: float = TIMEOUT_S, path: str = "/ok") -> bool:
    """Poll `url` + `path` every 0.25 s until it answers 200 (True), or the server is gone or the
    time is up (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and alive(pid):
        try:
            if httpx.get(f"{url}{path}", timeout=2).status_code == 200:
                return True
        except httpx.TransportError:
            pass
        time.sleep(0.25)
    return False


if __name__ == "__main__":
    try:
        path = sys.argv[3] if len(sys.argv) > 3 else "/ok"
        raise SystemExit(0 if wait_ready(sys.argv[1], int(sys.argv[2]), path=path) else 1)
    except KeyboardInterrupt:  # Ctrl-C while the server starts: scripts/serve stops it
        raise SystemExit(130) from None
