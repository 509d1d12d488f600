"""JSON from senders nobody vouched for yet (webhooks, Slack payloads), read within bounds.

The standard reader recurses once per nesting level (100,000 levels end in RecursionError), hands a
5,000-digit integer to int() (ValueError past 4,300 digits), and returns strings with lone surrogates
that no database or UTF-8 encoder takes later. Here each of those is NotJSON, which the caller turns
into a 400, before any of it reaches the code that uses the document.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

# Alertmanager's and MLflow's payloads nest 4 levels, Slack's modal submissions about 10.
MAX_DEPTH = 64
# A float's repr is at most 24 characters; anything longer is not a number a sender means.
MAX_NUMBER_CHARS = 100
# A JSON string, escapes included; its brackets and digits are text, not structure.
STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
NOT_A_BRACKET = re.compile(r"[^\[\]{}]+")
NESTING = {"[": 1, "{": 1, "]": -1, "}": -1}
# Only a text with an escaped surrogate can decode to a string with a lone one.
SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


class NotJSON(ValueError):
    """The bytes are not JSON within the bounds; the message says what is wrong."""


def read_json(body: bytes, max_bytes: int) -> Any:
    """The document in `body`: UTF-8 JSON of at most `max_bytes`, MAX_DEPTH levels and MAX_NUMBER_CHARS a number."""
    if len(body) > max_bytes:
        raise NotJSON(f"it is {len(body)} bytes, over {max_bytes}")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as error:
        raise NotJSON(f"byte {error.start} is not UTF-8") from None
    depth = max(accumulate(NESTING[bracket] for bracket in NOT_A_BRACKET.sub("", STRING.sub("", text))), default=0)
    if depth > MAX_DEPTH:
        raise NotJSON(f"it nests {depth} levels deep, over {MAX_DEPTH}")
    try:
        document = json.loads(text, parse_int=_integer, parse_float=_decimal, parse_constant=_constant)
    except json.JSONDecodeError as error:
        raise NotJSON(str(error)) from None
    if SURROGATE_ESCAPE.search(text):
        _refuse_lone_surrogates(document)
    return document


def _integer(digits: str) -> int:
    return int(_bounded(digits))


def _decimal(digits: str) -> float:
    return float(_bounded(digits))


def _bounded(number: str) -> str:
    if len(number) > MAX_NUMBER_CHARS:
        raise NotJSON(f"a number has {len(number)} characters, over {MAX_NUMBER_CHARS}")
    return number


def _constant(name: str) -> Any:
    raise NotJSON(f"{name} is not a JSON number")


def _refuse_lone_surrogates(document: Any) -> None:
    # Encoding the whole document finds them wherever they are, keys included, at the encoder's speed.
    try:
        json.dumps(document, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise NotJSON("a string holds a lone UTF-16 surrogate (\\ud800-\\udfff), which is not text") from None
