"""deploy/slack-app-manifest.yaml against the bot itself: the App is built against the local Slack stand-in
with Bolt's registration methods recorded, so the manifest must name exactly the slash commands, events and
shortcuts the bot registers, turn interactivity on because it registers buttons and a modal, and ask for
exactly the scopes of the Web API methods its code calls."""

import re
from collections import defaultdict
from urllib.parse import urlsplit

import pytest
from slack_bolt import App
from slack_sdk import WebClient

from bot.commands.grammar import MODEL_VERBS, TRAIN_VERBS
from bot.services import Services
from bot.slack.app import build_slack_app
from bot.web.app import SLACK_PATH
from tests.builders.deploy import KUSTOMIZE, REPO, SLACK_MANIFEST, load_yaml
from tests.standins.slack_bot import slack_settings
from tests.standins.slack_standin import slack_standin

# Bolt's registration methods, by what each needs in the app's manifest.
COMMANDS = ("command",)
EVENTS = ("event", "message", "assistant", "function")
SHORTCUTS = ("shortcut", "global_shortcut", "message_shortcut")
OPTIONS = ("options", "block_suggestion", "dialog_suggestion")
INTERACTIONS = (
    *SHORTCUTS,
    *OPTIONS,
    "action",
    "block_action",
    "attachment_action",
    "dialog_submission",
    "dialog_cancellation",
    "view",
    "view_submission",
    "view_closed",
    "step",
)
# The bot scope each Web API method needs (Slack's method reference); a method the bot starts calling must be
# added here, with its scope, before this test passes.
METHOD_SCOPES: dict[str, frozenset[str]] = {
    "chat_postMessage": frozenset({"chat:write"}),
    "chat_update": frozenset({"chat:write"}),
    "chat_postEphemeral": frozenset({"chat:write"}),
    # files.getUploadURLExternal and files.completeUploadExternal.
    "files_upload_v2": frozenset({"files:write"}),
    "usergroups_users_list": frozenset({"usergroups:read"}),
    "views_open": frozenset(),
    "auth_test": frozenset(),
}
# Where the code that talks to Slack lives (DESIGN.md: nothing in actions or diagnosers knows Slack).
SLACK_CODE = (REPO / "bot", REPO / "actions", REPO / "diagnosers")
VERBS = {"/train": TRAIN_VERBS, "/model": MODEL_VERBS}


@pytest.fixture
def registered(tmp_path, monkeypatch) -> dict[str, list]:
    """What the bot registers with Bolt, by registration method: its first argument (command, action_id...)."""
    calls: dict[str, list] = defaultdict(list)
    for method in {*COMMANDS, *EVENTS, *INTERACTIONS}:
        original = getattr(App, method)

        def recording(self, *args, _original=original, _method=method, **kwargs):
            calls[_method].append(args[0] if args else kwargs)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(App, method, recording)
    with slack_standin() as slack:
        settings = slack_settings(tmp_path, slack)
        build_slack_app(Services(settings))
    return calls


@pytest.fixture
def manifest() -> dict:
    return load_yaml(SLACK_MANIFEST)


def of(registered: dict[str, list], methods: tuple[str, ...]) -> list:
    return [what for method in methods for what in registered.get(method, [])]


def web_api_methods_called() -> set[str]:
    """WebClient methods called anywhere in the code (`client.chat_postMessage(...)`, `self._client...`)."""
    called = set()
    for folder in SLACK_CODE:
        for path in folder.rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            assert ".api_call(" not in text, f"{path}: name the method (client.x_y(...)) so its scope is known"
            for name in re.findall(r"\.([A-Za-z][A-Za-z0-9_]*)\(", text):
                if callable(getattr(WebClient, name, None)):
                    called.add(name)
    return called


def test_the_manifest_names_exactly_the_slash_commands_the_bot_registers(registered, manifest):
    commands = of(registered, COMMANDS)
    assert commands and all(isinstance(command, str) for command in commands)
    listed = [command["command"] for command in manifest["features"]["slash_commands"]]
    assert sorted(listed) == sorted(set(commands))


def test_each_command_says_what_it_does_and_hints_every_verb(manifest):
    for command in manifest["features"]["slash_commands"]:
        assert command["description"] and command["should_escape"] is False
        hinted = set(re.findall(r"[a-z]+", command["usage_hint"]))
        assert set(VERBS[command["command"]]) <= hinted, command["command"]


def test_interactivity_is_on_because_the_bot_registers_buttons_and_a_modal(registered, manifest):
    assert of(registered, INTERACTIONS)
    interactivity = manifest["settings"]["interactivity"]
    assert interactivity["is_enabled"] is True
    assert ("message_menu_options_url" in interactivity) == bool(of(registered, OPTIONS))


def test_events_and_shortcuts_are_exactly_those_registered(registered, manifest):
    events = of(registered, EVENTS)
    subscribed = (manifest["settings"].get("event_subscriptions") or {}).get("bot_events", [])
    assert sorted(subscribed) == sorted(set(events))
    shortcuts = manifest["features"].get("shortcuts", [])
    assert sorted(shortcut["callback_id"] for shortcut in shortcuts) == sorted(set(of(registered, SHORTCUTS)))


def test_the_scopes_are_those_of_the_methods_the_bot_calls(registered, manifest):
    called = web_api_methods_called()
    assert called, "no Web API call found: the scan no longer sees the bot's code"
    unknown = called - set(METHOD_SCOPES)
    assert not unknown, f"add these methods' scopes to METHOD_SCOPES: {sorted(unknown)}"
    needed = set().union(*(METHOD_SCOPES[method] for method in called))
    needed |= {"commands"} if of(registered, COMMANDS) else set()
    assert sorted(manifest["oauth_config"]["scopes"]["bot"]) == sorted(needed)
    assert "user" not in manifest["oauth_config"]["scopes"]


def test_every_url_is_the_events_route_on_the_prod_ingress_host(manifest):
    ingress = load_yaml(KUSTOMIZE / "overlays" / "prod" / "ingress.yaml")
    (rule,) = ingress["spec"]["rules"]
    urls = [command["url"] for command in manifest["features"]["slash_commands"]]
    urls += [manifest["settings"]["interactivity"]["request_url"]]
    urls += [url for url in [(manifest["settings"].get("event_subscriptions") or {}).get("request_url")] if url]
    for url in urls:
        parts = urlsplit(url)
        assert (parts.scheme, parts.hostname, parts.path) == ("https", rule["host"], SLACK_PATH), url
    assert [path["path"] for path in rule["http"]["paths"]] == [SLACK_PATH]
    assert manifest["settings"]["socket_mode_enabled"] is False
