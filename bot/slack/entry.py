"""Slack's requests at POST /slack/events, checked before Bolt reads them.

Bolt parses the body before it checks the signature, and logs an unsigned body whole: garbage from
anyone (bytes that are not UTF-8, a `payload=` that is not JSON, a timestamp of `abc`) raised inside it,
and a 100 MB body went to the log. Here the length, timestamp and signature are checked first (411, 413,
401), over the raw bytes; a signed body must then be UTF-8 whose JSON, if any, is within bounds (400).

A signature is taken once: Slack signs `v0:<timestamp>:<body>`, so a request sent again within the
5-minute window carries the same one. This process refuses it at once (401) from memory; another replica,
which has not seen it, acks it, and its work is not done: before any work runs, `first_delivery` records
the signature in the state store (actions/state/seen_signatures.py), which exactly one replica does. The ack
itself never waits on the database: an insert per request there doubled the median ack time
(bench/ack_latency.py). Slack's own retries say so (X-Slack-Retry-Num): they are acknowledged without
doing the work again, which the first delivery started.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import logging
import re
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from bot.http.bounded_json import NotJSON, read_json
from bot.http.server import BodyRefused, escaped, json_answer, read_body

if TYPE_CHECKING:
    from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

    from slack_bolt import BoltRequest

    from actions.state.seen_signatures import SeenSignatures

log = logging.getLogger(__name__)

TIMESTAMP_KEY = "HTTP_X_SLACK_REQUEST_TIMESTAMP"
SIGNATURE_KEY = "HTTP_X_SLACK_SIGNATURE"
RETRY_KEY = "HTTP_X_SLACK_RETRY_NUM"
# Slack's window, which Bolt also applies.
WINDOW_S = 5 * 60
# Signatures a process remembers: 5 minutes of 300 requests a second.
MAX_REMEMBERED = 90_000
# A modal submission with its view's state is the largest body Slack sends, tens of KiB.
MAX_BODY_BYTES = 1024 * 1024
SIGNATURE = re.compile(r"v0=([0-9a-f]{64})")
SECRET_HINT = "the signature does not match: is SLACK_SIGNING_SECRET the app's signing secret?"


class Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class RecentSignatures:
    """The signatures this process took within their window, in memory: a replay to the same process is
    refused before Bolt sees it. Bounded: past MAX_REMEMBERED the oldest are forgotten, and the state store
    still keeps their work from being done twice."""

    def __init__(self) -> None:
        self._expiries: dict[str, float] = {}
        self._lock = threading.Lock()

    def first_here(self, signature: str, expires_at: float, now: float) -> bool:
        with self._lock:
            if self._expiries.get(signature, 0.0) > now:
                return False
            if len(self._expiries) >= MAX_REMEMBERED:
                self._forget(now)
            self._expiries[signature] = expires_at
            return True

    def _forget(self, now: float) -> None:
        for signature in [signature for signature, expiry in self._expiries.items() if expiry <= now]:
            del self._expiries[signature]
        # Insertion order is arrival order: what is left to drop is the oldest.
        while len(self._expiries) >= MAX_REMEMBERED:
            del self._expiries[next(iter(self._expiries))]


def first_delivery(seen: SeenSignatures, clock: Callable[[], float] = time.time) -> Callable[[BoltRequest], bool]:
    """Whether a request that slack_entry let through is delivered for the first time to any replica: its
    signature recorded in the state store, which exactly one caller does. A request with no signature
    (Socket Mode's, which Slack sends over the app's own connection) is always a first."""

    def first(request: BoltRequest) -> bool:
        sent = SIGNATURE.fullmatch(_header(request, "x-slack-signature"))
        if sent is None:
            return True
        stamp = int(_header(request, "x-slack-request-timestamp"))  # digits: slack_entry checked them
        expires_at = datetime.fromtimestamp(stamp + WINDOW_S, UTC)
        return seen.first_sight(sent[1], expires_at, datetime.fromtimestamp(clock(), UTC))

    return first


def _header(request: BoltRequest, name: str) -> str:
    values = request.headers.get(name) or [""]
    return values[0]


def slack_entry(bolt: WSGIApplication, signing_secret: str, clock: Callable[[], float] = time.time) -> WSGIApplication:
    """`bolt` behind the checks above."""
    secret = signing_secret.encode()
    recent = RecentSignatures()

    def entry(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        now = clock()
        try:
            body, signature, timestamp = _signed(environ, secret, now)
            if environ.get(RETRY_KEY):
                log.info("Slack retry %s: acknowledged, not done again", escaped(environ[RETRY_KEY]))
                return json_answer(start_response, 200, {})
            if not recent.first_here(signature, timestamp + WINDOW_S, now):
                raise Refused(401, "this signed request was taken before: a replay is refused")
            _check_readable(body, environ.get("CONTENT_TYPE", ""))
        except Refused as refusal:
            return json_answer(start_response, refusal.status, {"error": str(refusal)})
        except BodyRefused as refusal:
            return json_answer(start_response, refusal.status, {"error": str(refusal)})
        environ["wsgi.input"] = io.BytesIO(body)
        return bolt(environ, start_response)

    return entry


def _signed(environ: WSGIEnvironment, secret: bytes, now: float) -> tuple[bytes, str, int]:
    """The body, its signature (hex) and timestamp, once the signature is Slack's and recent."""
    if environ.get("REQUEST_METHOD") != "POST":
        raise Refused(405, "use POST")
    body = read_body(environ, MAX_BODY_BYTES)
    stamp = environ.get(TIMESTAMP_KEY, "")
    if not (stamp.isascii() and stamp.isdigit()):
        raise Refused(401, "X-Slack-Request-Timestamp is missing or not a unix time")
    if abs(now - int(stamp)) > WINDOW_S:
        raise Refused(401, "X-Slack-Request-Timestamp is over 5 minutes from now: a replay, or a clock out of step")
    sent = SIGNATURE.fullmatch(environ.get(SIGNATURE_KEY, ""))
    expected = hmac.new(secret, b"v0:" + stamp.encode() + b":" + body, hashlib.sha256).hexdigest()
    if sent is None or not hmac.compare_digest(sent[1], expected):
        raise Refused(401, SECRET_HINT)
    return body, expected, int(stamp)


def _check_readable(body: bytes, content_type: str) -> None:
    """A signed body Bolt can parse: UTF-8 whose JSON (the body, or an interaction's `payload`) is an object
    within bounds, by Bolt's own rule for which bodies are JSON."""
    try:
        text = body.decode("utf-8")
        if content_type == "application/json" or text.startswith("{"):
            document = read_json(body, MAX_BODY_BYTES)
        elif payload := dict(urllib.parse.parse_qsl(text, keep_blank_values=True)).get("payload"):
            document = read_json(payload.encode(), MAX_BODY_BYTES)
        else:
            return
    except UnicodeDecodeError:
        raise Refused(400, "the body is not UTF-8") from None
    except NotJSON as error:
        raise Refused(400, f"the body's JSON is unreadable: {error}") from None
    if not isinstance(document, dict):
        raise Refused(400, "the body's JSON is not an object")
