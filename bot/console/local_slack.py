"""Slack on one machine, for the console: the Web API the bot calls (recorded, answered as Slack documents it),
the response_url of slash commands, and requests to the bot signed as Slack signs them. The tests serve a
subclass of it (tests/standins/slack_standin.py) that also waits for calls and speaks Socket Mode."""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import sys
import time
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar

import requests

from bot.http.server import in_thread
from bot.render.slack_limits import slack_refusal

BOT_USER = "UTRAINBOT"


@dataclass(frozen=True)
class Call:
    method: str  # a Web API method ("chat.postMessage"), "response_url", or "upload_url" (a file's bytes)
    params: dict[str, Any]
    answer: dict[str, Any]
    # When it came (time.monotonic()), so tests can check the pace of what the bot sends.
    at: float = 0.0


class LocalSlack:
    def __init__(self, url: str) -> None:
        self.url = url
        self.api_url = f"{url}/api/"
        self.calls: list[Call] = []
        # Members of each user group, as usergroups.users.list answers.
        self.usergroups: dict[str, list[str]] = {}
        # Methods that answer as Slack does when it refuses: {"ok": false, "error": ...}.
        self.refusing: dict[str, str] = {}
        # Methods answered with 429 and this Retry-After (seconds) as many times as listed, as Slack limits.
        self.rate_limits: dict[str, list[int]] = {}
        self._ts = itertools.count(1)
        # Files announced with files.getUploadURLExternal: their names, and their bytes once uploaded.
        self._file_names: dict[str, str] = {}
        self._file_bytes: dict[str, bytes] = {}
        self._file_ids = itertools.count(1)
        # Called with each call as it is recorded (the console prints what the bot posts).
        self.listeners: list[Callable[[Call], None]] = []

    def response_url(self) -> str:
        return f"{self.url}/response/{next(self._ts)}"

    def record(self, method: str, params: dict[str, Any], token: str = "") -> dict[str, Any]:
        """Answer a call (`token`: the Authorization header's bearer) and keep it."""
        answer = self.answer(method, params, token)
        call = Call(method, params, answer, time.monotonic())
        self.calls.append(call)
        for listener in self.listeners:
            listener(call)
        return answer

    def answer(self, method: str, params: dict[str, Any], token: str) -> dict[str, Any]:
        """What Slack answers a call of `method` (`token`: the caller's bearer, which a subclass may check)."""
        if method in self.refusing:
            return {"ok": False, "error": self.refusing[method]}
        if (refusal := slack_refusal(method, params)) is not None:
            return refusal
        ts = f"{time.time():.6f}"
        answers: dict[str, dict[str, Any]] = {
            "auth.test": {
                "url": "https://trainbot-test.slack.com/",
                "team": "ML",
                "user": "trainbot",
                "team_id": "T0ML",
                "user_id": BOT_USER,
                "bot_id": "B0TRAINBOT",
            },
            "chat.postMessage": {"channel": params.get("channel"), "ts": ts, "message": params},
            "chat.update": {"channel": params.get("channel"), "ts": params.get("ts"), "text": ""},
            "chat.postEphemeral": {"message_ts": ts},
            "usergroups.users.list": {"users": self.usergroups.get(params.get("usergroup", ""), [])},
            "views.open": {"view": {"id": "V0REJECT", **params.get("view", {})}},
        }
        if method == "files.getUploadURLExternal":
            return {"ok": True, **self._upload_url(params)}
        if method == "files.completeUploadExternal":
            return {"ok": True, "files": [self._file(shared) for shared in params["files"]]}
        return {"ok": True, **answers.get(method, {})}

    def file_bytes(self, file_id: str) -> bytes:
        """What was uploaded for `file_id` (nothing yet: empty)."""
        return self._file_bytes.get(file_id, b"")

    def upload(self, file_id: str, content: bytes) -> None:
        """The bytes of a file, POSTed to the URL files.getUploadURLExternal gave out."""
        self._file_bytes[file_id] = content
        self.record("upload_url", {"file_id": file_id, "content": content})

    def _upload_url(self, params: dict[str, Any]) -> dict[str, Any]:
        file_id = f"F0FILE{next(self._file_ids):05d}"
        self._file_names[file_id] = params["filename"]
        return {"upload_url": f"{self.url}/upload/v1/{file_id}", "file_id": file_id}

    def _file(self, shared: dict[str, Any]) -> dict[str, Any]:
        file_id = shared["id"]
        name = self._file_names.get(file_id, "")
        return {
            "id": file_id,
            "name": name,
            "title": shared.get("title") or name,
            "size": len(self._file_bytes.get(file_id, b"")),
        }


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.startswith("/upload/v1/"):
            self.server.slack.upload(self.path.removeprefix("/upload/v1/"), raw)
            # What Slack's upload URL answers: 200 and a line of text, which the SDK only checks the status of.
            self._reply(f"OK - {len(raw)}".encode(), "text/plain")
            return
        body = raw.decode()
        if self.path.startswith("/response/"):
            answer = self.server.slack.record("response_url", json.loads(body))
        else:
            is_json = body and "json" in (self.headers.get("Content-Type") or "")
            params = json.loads(body) if is_json else _form(body)
            method = self.path.removeprefix("/api/")
            if self.server.slack.rate_limits.get(method):
                self._rate_limited(method, self.server.slack.rate_limits[method].pop(0))
                return
            bearer = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
            answer = self.server.slack.record(method, params, bearer)
        self._reply(json.dumps(answer).encode(), "application/json")

    def _reply(self, data: bytes, content_type: str, status: int = 200, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _rate_limited(self, method: str, retry_after_s: int) -> None:
        self.server.slack.record(f"{method} (429)", {})
        data = json.dumps({"ok": False, "error": "ratelimited"}).encode()
        self._reply(data, "application/json", status=429, headers={"Retry-After": str(retry_after_s)})

    def do_GET(self) -> None:  # a readiness probe
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    slack: LocalSlack


def _form(body: str) -> dict[str, Any]:
    """Form fields, with the JSON-valued ones (blocks, attachments) decoded as Slack would."""
    fields: dict[str, Any] = dict(urllib.parse.parse_qsl(body, keep_blank_values=True))
    for key in ("blocks", "attachments", "view", "files"):
        if isinstance(fields.get(key), str):
            fields[key] = json.loads(fields[key])
    return fields


SlackT = TypeVar("SlackT", bound=LocalSlack)


@contextmanager
def serving_slack(slack_at: Callable[[str], SlackT]) -> Iterator[SlackT]:
    """Serve the Slack `slack_at(url)` makes on a free loopback port until the block ends."""
    server = _Server(("127.0.0.1", 0), _Handler)
    with in_thread(server) as url:
        server.slack = slack = slack_at(url)
        yield slack


@contextmanager
def local_slack() -> Iterator[LocalSlack]:
    """The local Slack, served until the block ends."""
    with serving_slack(LocalSlack) as slack:
        yield slack


def signed_headers(secret: str, body: str, timestamp: int | None = None) -> dict[str, str]:
    """Headers as Slack sends them: v0 HMAC-SHA256 over `v0:<timestamp>:<body>`."""
    stamp = str(int(time.time()) if timestamp is None else timestamp)
    digest = hmac.new(secret.encode(), f"v0:{stamp}:{body}".encode(), hashlib.sha256).hexdigest()
    return {
        "X-Slack-Request-Timestamp": stamp,
        "X-Slack-Signature": f"v0={digest}",
        "Content-Type": "application/x-www-form-urlencoded",
    }


def slash_command_body(
    slack: LocalSlack, command: str, text: str, user: str = "U01ALICE", channel: str = "C0ML"
) -> str:
    """A slash-command payload with the fields Slack documents for it, form-encoded as Slack POSTs it."""
    return urllib.parse.urlencode(slash_command_fields(slack, command, text, user, channel))


def slash_command_fields(
    slack: LocalSlack, command: str, text: str, user: str = "U01ALICE", channel: str = "C0ML"
) -> dict[str, str]:
    """The fields of a slash command, as Slack POSTs them or sends them as a Socket Mode envelope's payload."""
    return {
        "token": "deprecated-verification-token",
        "team_id": "T0ML",
        "team_domain": "ml",
        "channel_id": channel,
        "channel_name": "ml-training",
        "user_id": user,
        "user_name": user.lower(),
        "command": command,
        "text": text,
        "api_app_id": "A0TRAINBOT",
        "is_enterprise_install": "false",
        "response_url": slack.response_url(),
        "trigger_id": "13345224609.738474920.8088930838d88f008e0",
    }


def post_signed(url: str, secret: str, body: str) -> requests.Response:
    return requests.post(url, data=body.encode(), headers=signed_headers(secret, body), timeout=10)


def interaction_payload(payload: dict[str, Any]) -> dict[str, Any]:
    """`payload` with what every interaction carries."""
    base = {
        "api_app_id": "A0TRAINBOT",
        "token": "deprecated-verification-token",
        "team": {"id": "T0ML", "domain": "ml"},
    }
    return {**base, **payload}


def _interaction(payload: dict[str, Any]) -> str:
    return urllib.parse.urlencode({"payload": json.dumps(interaction_payload(payload))})


def button_click_body(slack: LocalSlack, action_id: str, value: str, user: str, posted: Call) -> str:
    """A block_actions payload: `user` clicked the button `action_id` on the message `posted`."""
    return _interaction(button_click_payload(slack, action_id, value, user, posted))


def button_click_payload(slack: LocalSlack, action_id: str, value: str, user: str, posted: Call) -> dict[str, Any]:
    """The same click as a Socket Mode envelope's payload."""
    channel, ts = posted.answer["channel"], posted.answer["ts"]
    return interaction_payload(
        {
            "type": "block_actions",
            "user": {"id": user, "username": user.lower(), "name": user.lower(), "team_id": "T0ML"},
            "container": {"type": "message", "message_ts": ts, "channel_id": channel, "is_ephemeral": False},
            "trigger_id": "13345224609.738474920.8088930838d88f008e0",
            "channel": {"id": channel, "name": "ml-training"},
            "message": {
                "type": "message",
                "ts": ts,
                "text": posted.params.get("text", ""),
                "blocks": posted.params.get("blocks", []),
                # Slack says which thread a message is in, when it is in one.
                **({"thread_ts": posted.params["thread_ts"]} if posted.params.get("thread_ts") else {}),
            },
            "response_url": slack.response_url(),
            "actions": [
                {
                    "action_id": action_id,
                    "block_id": "promotion",
                    "value": value,
                    "type": "button",
                    "text": {"type": "plain_text", "text": action_id},
                    "action_ts": f"{time.time():.6f}",
                }
            ],
        }
    )


def view_submission_body(callback_id: str, private_metadata: str, values: dict[str, Any], user: str) -> str:
    """A view_submission payload: `user` submitted the modal `callback_id` with input `values`."""
    return _interaction(
        {
            "type": "view_submission",
            "user": {"id": user, "username": user.lower(), "name": user.lower(), "team_id": "T0ML"},
            "trigger_id": "13345224609.738474920.8088930838d88f008e1",
            "view": {
                "id": "V0REJECT",
                "team_id": "T0ML",
                "type": "modal",
                "callback_id": callback_id,
                "private_metadata": private_metadata,
                "state": {"values": values},
                "hash": "1.abc",
            },
            "response_urls": [],
        }
    )


def serve_alone(port: int) -> None:
    """Run the stand-in as its own process (benchmarks keep its work off the process that measures)."""
    server = _Server(("127.0.0.1", port), _Handler)
    server.slack = LocalSlack(f"http://127.0.0.1:{port}")
    server.serve_forever()


if __name__ == "__main__":
    serve_alone(int(sys.argv[1]))
