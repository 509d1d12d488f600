import io
import random

import pytest

from diagnosers.logscan import (
    LOOKAHEAD_BYTES,
    MAX_LINE_BYTES,
    HyperscanMatcher,
    LogScanner,
    Needle,
    RegexMatcher,
)

NEEDLES = [Needle(b"NCCL WARN"), Needle(b"watchdog", caseless=True), Needle(b"Traceback", context=True)]
MATCHERS = [HyperscanMatcher, RegexMatcher]
SMALL_BLOCK = LOOKAHEAD_BYTES + MAX_LINE_BYTES + 4096


def naive(lines: list[str]) -> list[tuple[int, str]]:
    found = []
    for number, line in enumerate(lines, start=1):
        if "NCCL WARN" in line or "watchdog" in line.lower() or "Traceback" in line:
            found.append((number, line))
    return found


def make_log(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    special = [
        "h1:1:1 [0] NCCL WARN socket closed",
        "[Rank 3] WatchDog caught it",
        "Traceback (most recent call last):",
    ]
    lines = []
    for index in range(count):
        if rng.random() < 0.01:
            lines.append(rng.choice(special) + f" #{index}")
        else:
            lines.append(f"step {index} loss {rng.random():.4f} " + "x" * rng.randint(0, 300))
    return lines


@pytest.mark.parametrize("matcher_class", MATCHERS)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_scanner_finds_exactly_the_lines_a_naive_scan_finds_across_block_boundaries(matcher_class, seed):
    lines = make_log(seed, 6000)
    data = ("\n".join(lines) + "\n").encode()
    assert len(data) > 5 * SMALL_BLOCK
    scanner = LogScanner(NEEDLES, matcher_class(NEEDLES), block_bytes=SMALL_BLOCK)
    hits = [(hit.line, hit.text) for hit in scanner.scan(io.BytesIO(data))]
    assert hits == naive(lines)


@pytest.mark.parametrize("matcher_class", MATCHERS)
def test_a_line_with_several_needles_is_one_hit_with_all_of_them(matcher_class):
    scanner = LogScanner(NEEDLES, matcher_class(NEEDLES))
    hits = list(scanner.scan(io.BytesIO(b"ok\nNCCL WARN watchdog\n")))
    assert [(hit.line, sorted(hit.needles)) for hit in hits] == [(2, [0, 1])]


def test_context_lines_follow_a_traceback_header():
    text = b'noise\nTraceback (most recent call last):\n  File "a.py", line 1, in f\nValueError: bad\n'
    hit = next(LogScanner(NEEDLES).scan(io.BytesIO(text)))
    assert hit.line == 2
    assert hit.after[:2] == ['  File "a.py", line 1, in f', "ValueError: bad"]


@pytest.mark.parametrize("matcher_class", MATCHERS)
def test_context_is_kept_when_a_needle_wanting_it_is_not_the_first_on_its_line(matcher_class):
    text = b"NCCL WARN before the Traceback\nnext line\n"
    hit = next(LogScanner(NEEDLES, matcher_class(NEEDLES)).scan(io.BytesIO(text)))
    assert hit.needles == {0, 2} and hit.after[:1] == ["next line"]


def test_one_endless_line_streams_in_bounded_memory_and_is_quoted_as_a_window():
    body = b"x" * (5 * SMALL_BLOCK) + b" NCCL WARN here " + b"y" * (3 * SMALL_BLOCK)
    long_lines = []
    scanner = LogScanner(NEEDLES, block_bytes=SMALL_BLOCK)
    hits = list(scanner.scan(io.BytesIO(body + b"\nafter NCCL WARN\n"), long_lines.append))
    assert [hit.line for hit in hits] == [1, 2]
    assert hits[0].truncated and "NCCL WARN here" in hits[0].text
    assert len(hits[0].text) <= MAX_LINE_BYTES
    assert long_lines == [1]


def test_a_newline_just_before_the_split_is_not_an_over_long_line():
    first = b"x" * (SMALL_BLOCK - LOOKAHEAD_BYTES - 1) + b"\n"
    long_lines = []
    scanner = LogScanner(NEEDLES, block_bytes=SMALL_BLOCK)
    hits = list(scanner.scan(io.BytesIO(first + b"y\n" * SMALL_BLOCK + b"NCCL WARN\n"), long_lines.append))
    assert [hit.text for hit in hits] == ["NCCL WARN"]
    assert long_lines == []


def test_a_log_that_turns_binary_stops_at_that_block():
    text = b"NCCL WARN early\n" + b"step\n" * SMALL_BLOCK
    binary_from = []
    scanner = LogScanner(NEEDLES, block_bytes=SMALL_BLOCK)
    stream = io.BytesIO(text + b"\x00" * (4 * SMALL_BLOCK) + b"\nNCCL WARN late\n")
    hits = list(scanner.scan(stream, on_binary=binary_from.append))
    assert [hit.text for hit in hits] == ["NCCL WARN early"]
    assert len(binary_from) == 1 and 1 < binary_from[0] <= SMALL_BLOCK + 1


def test_invalid_utf8_is_replaced_not_fatal():
    hit = next(LogScanner(NEEDLES).scan(io.BytesIO(b"\xff\xfe NCCL WARN \xc3\n")))
    assert "NCCL WARN" in hit.text and "\ufffd" in hit.text


def test_blocks_must_leave_room_for_the_lookahead():
    with pytest.raises(ValueError, match="larger than the look-ahead"):
        LogScanner(NEEDLES, block_bytes=LOOKAHEAD_BYTES)
