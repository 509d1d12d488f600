"""How a call to another service failed, in the words a person reads: the service's URL without its
credentials, and the reason (the OS' "Connection refused", or how long nothing came back)."""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

# The OS' words inside urllib3's and requests' nested wrappers: "[Errno 111] Connection refused".
OS_REASON = re.compile(r"\[Errno -?\d+\] ([^'\")\]]+)")
TIMED_OUT = re.compile(r"time(d)? ?out", re.IGNORECASE)


def without_credentials(url: str) -> str:
    """`url` with no user, password or query (where tokens ride): safe to show and to log."""
    parts = urlsplit(url)
    if not parts.netloc:
        return urlunsplit(parts._replace(query=""))
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=host, query="", fragment=""))


def failure_reason(error: BaseException, timeout_s: float) -> str:
    """Why a request failed: "no answer within N s" after a timeout, else the OS' reason or the error's type."""
    text = str(error)
    if isinstance(error, TimeoutError) or TIMED_OUT.search(text):
        return f"no answer within {timeout_s:g} s"
    found = OS_REASON.search(text)
    return found.group(1).strip() if found else type(error).__name__
