"""The in-memory replay guard in front of Bolt: a signature is taken once per process within its window,
and memory stays bounded however many requests come."""

from bot.slack import entry as slack_entry
from bot.slack.entry import RecentSignatures

NOW = 1_800_000_000.0
WINDOW_S = 300.0


def test_a_signature_is_taken_once_until_its_window_ends():
    recent = RecentSignatures()
    assert recent.first_here("a", NOW + WINDOW_S, NOW) is True
    assert recent.first_here("a", NOW + WINDOW_S, NOW + 10) is False
    assert recent.first_here("a", NOW + 2 * WINDOW_S, NOW + WINDOW_S + 1) is True


def test_past_its_bound_it_forgets_the_expired_then_the_oldest(monkeypatch):
    monkeypatch.setattr(slack_entry, "MAX_REMEMBERED", 3)
    recent = RecentSignatures()
    recent.first_here("expired", NOW + 1, NOW)
    recent.first_here("old", NOW + WINDOW_S, NOW)
    recent.first_here("newer", NOW + WINDOW_S, NOW)
    assert recent.first_here("newest", NOW + WINDOW_S, NOW + 2) is True  # the expired one makes room
    assert recent.first_here("another", NOW + WINDOW_S, NOW + 2) is True  # none expired: the oldest goes
    assert len(recent._expiries) == 3
    assert recent.first_here("old", NOW + WINDOW_S, NOW + 2) is True  # forgotten, so taken again here
    assert recent.first_here("newest", NOW + WINDOW_S, NOW + 2) is False
