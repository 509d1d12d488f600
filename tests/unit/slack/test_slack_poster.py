"""The poster against the local Slack over HTTP: one message a second per channel, 429s waited out as long
as Retry-After says, and posts found again by key (also by a second poster on the same store)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest

from actions.state.posts import SlackPosts
from bot.render.blocks import notice
from bot.slack.poster import ChannelPacer, SlackPoster, paced_client
from tests.standins.slack_standin import SlackStandIn


@pytest.fixture
def posts(state_store_url) -> SlackPosts:
    store = SlackPosts(state_store_url)
    store.create_schema()
    return store


def poster_for(slack: SlackStandIn, posts: SlackPosts) -> SlackPoster:
    return SlackPoster(paced_client("xoxb-test", slack.api_url, timeout_s=10), posts)


def test_the_pacer_gives_each_channel_one_slot_a_second_and_channels_do_not_wait_for_each_other():
    now = [100.0]
    slept: list[float] = []
    pacer = ChannelPacer(interval_s=1.0, clock=lambda: now[0], sleep=slept.append)
    for _ in range(3):
        pacer.wait("C1")
    pacer.wait("C2")
    assert slept == [1.0, 2.0]  # C1's second and third wait for their slots; C2 goes at once
    now[0] = 110.0
    pacer.wait("C1")  # long after: no wait
    assert slept == [1.0, 2.0]


def test_messages_to_one_channel_are_a_second_apart_even_from_many_threads(slack, posts):
    poster = poster_for(slack, posts)
    threads = [threading.Thread(target=poster.post, args=("C0ML", notice(f"m{n}"))) for n in range(4)]
    threads.append(threading.Thread(target=poster.post, args=("C0OTHER", notice("other"))))
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    calls = slack.wait_for("chat.postMessage", 5)
    assert time.monotonic() - started >= 3.0  # four to one channel: three intervals
    assert sorted(call.params["text"] for call in calls) == ["m0", "m1", "m2", "m3", "other"]


def test_a_429_is_waited_out_for_its_retry_after_and_the_message_still_goes(slack, posts):
    slack.rate_limits["chat.postMessage"] = [2]
    started = time.monotonic()
    post = poster_for(slack, posts).post("C0ML", notice("after the limit"), key="job:a")
    assert time.monotonic() - started >= 2.0
    assert [call.method for call in slack.calls] == ["chat.postMessage (429)", "chat.postMessage"]
    assert posts.find("job:a") == post


def test_replies_and_edits_find_the_parent_by_key_across_posters(slack, posts):
    first = poster_for(slack, posts)
    parent = first.post("C0ML", notice("job started"), key="job:b")
    again = poster_for(slack, posts)  # as after a restart
    assert again.reply("job:b", notice("job finished")) is not None
    assert again.update("job:b", notice("job b: SUCCEEDED")) == parent
    assert again.reply("job:unknown", notice("nobody hears this")) is None
    reply = slack.wait_for("chat.postMessage", 2)[1]
    assert reply.params["thread_ts"] == parent.ts
    [edit] = slack.wait_for("chat.update")
    assert (edit.params["channel"], edit.params["ts"], edit.params["text"]) == ("C0ML", parent.ts, "job b: SUCCEEDED")


def test_a_state_is_shown_once_however_many_watchers_see_it(posts):
    with ThreadPoolExecutor(8) as pool:
        told = list(pool.map(lambda _: posts.show("job:a", "RUNNING"), range(16)))
    assert told.count(True) == 1
    assert posts.show("job:a", "RUNNING") is False
    assert posts.show("job:a", "SUCCEEDED") is True  # a change is told again


def test_threads_not_at_an_end_are_found_by_prefix_and_a_like_pattern_in_a_key_is_literal(posts):
    for key, state in (("job:a", "RUNNING"), ("job:b", "SUCCEEDED"), ("job:c", "PENDING"), ("jobs:x", "RUNNING")):
        posts.show(key, state)
    ended = ("SUCCEEDED", "FAILED", "STOPPED")
    assert sorted(posts.showing_other_than("job:", ended)) == ["job:a", "job:c"]
    assert posts.showing_other_than("job%", ended) == []


def test_one_bot_at_a_time_holds_a_turn_and_a_dead_holders_turn_lapses(state_store_url, posts):
    other = SlackPosts(state_store_url)  # another bot on the same store
    at, lease = datetime.now(UTC), timedelta(minutes=2)
    with ThreadPoolExecutor(8) as pool:
        taken = list(pool.map(lambda store: store.claim("turn:x", at, lease), [posts, other] * 8))
    assert taken.count(True) == 1
    assert not other.claim("turn:x", at + lease - timedelta(seconds=1), lease)
    assert other.claim("turn:x", at + lease, lease)  # its holder died: the lease ran out
    other.release("turn:x")
    with posts.turn("turn:x") as ours:
        assert ours
        with other.turn("turn:x") as theirs:
            assert not theirs
    with other.turn("turn:x") as theirs:
        assert theirs
    assert posts.find("turn:x") is None
