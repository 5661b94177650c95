"""Container health check: exit 0 only when the server answers 200 on its readiness endpoint.

Used by the Dockerfile's HEALTHCHECK and the compose healthcheck; the image has no curl.
Standard library only. MT_HEALTHCHECK_URL overrides the URL (default: port 8000 on loopback).
"""

import os
import sys
import urllib.error
import urllib.request

DEFAULT_URL = "http://127.0.0.1:8000/health/ready"


def check(url: str, timeout: float) -> bool:
    """True when GET url answers 200 within timeout seconds."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never go through a proxy
    try:
        with opener.open(url, timeout=timeout) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def main() -> int:
    url = os.environ.get("MT_HEALTHCHECK_URL", DEFAULT_URL)
    timeout = float(os.environ.get("MT_HEALTHCHECK_TIMEOUT", "4"))
    return 0 if check(url, timeout) else 1


if __name__ == "__main__":
    sys.exit(main())
