import io
import random

import pytest

from diagnosers.logscan import (
    LONG_RUN_BYTES,
    LOOKAHEAD_BYTES,
    MAX_CONTEXT_LINES,
    MAX_LINE_BYTES,
    HyperscanMatcher,
    LogScanner,
    Needle,
    RegexMatcher,
)
from diagnosers.parsers.logs import REPEATS_KEPT, LogParser

NEEDLES = [
    Needle(b"NCCL WARN"),
    Needle(b"watchdog", caseless=True),
    Needle(b"Traceback", context_lines=MAX_CONTEXT_LINES),
]
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


@pytest.mark.parametrize("matcher_class", MATCHERS)
def test_a_needle_gets_as_many_lines_after_it_as_it_asks_for(matcher_class):
    needles = [Needle(b"wrapped", context_lines=2), Needle(b"plain"), *NEEDLES[2:]]
    text = b"a wrapped message\none\ntwo\nthree\nplain line\nnext\nwrapped and a Traceback\n" + b"x\n" * 200
    hits = list(LogScanner(needles, matcher_class(needles)).scan(io.BytesIO(text)))
    assert [hit.after for hit in hits[:2]] == [["one", "two"], []]
    assert len(hits[2].after) == MAX_CONTEXT_LINES


def test_a_compiled_matcher_is_kept_for_the_next_run_and_a_broken_copy_is_compiled_again(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINBOT_CACHE_DIR", str(tmp_path))
    text = b"ok\nNCCL WARN x\nTraceback (most recent call last):\n"
    first = [hit.line for hit in LogScanner(NEEDLES, HyperscanMatcher(NEEDLES)).scan(io.BytesIO(text))]
    (kept,) = tmp_path.glob("needles-*.hsdb")
    assert [hit.line for hit in LogScanner(NEEDLES, HyperscanMatcher(NEEDLES)).scan(io.BytesIO(text))] == first
    kept.write_bytes(b"not a database")
    assert [hit.line for hit in LogScanner(NEEDLES, HyperscanMatcher(NEEDLES)).scan(io.BytesIO(text))] == first
    assert kept.read_bytes() != b"not a database"
    assert first == [2, 3]


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


def channel_run(channels: int) -> list[str]:
    return [f"h1:5:6 [0] NCCL INFO Channel {ch:02d}/0 : 0[0] -> 1[1] via NET/Socket/0" for ch in range(channels)]


def channel_log(reinits: int, channels: int = 8) -> list[str]:
    """A communicator initialised again and again: the same channel lines each time, a new comm address; now and
    then a warning among them, one channel line changed, or the run inside longer first or last lines."""
    lines = []
    for reinit in range(reinits):
        lines += [f"step {reinit} loss 0.5", f"h1:5:6 [0] NCCL INFO comm 0x{reinit:x} rank 0 - Init COMPLETE"]
        run = channel_run(channels)
        if reinit % 11 == 10:
            run[channels // 2] = run[channels // 2].replace("Socket", "IB")
        if reinit % 13 == 12:
            run[0] = "[rank0]: " + run[0]
        if reinit % 17 == 16:
            run[-1] += " (again)"
        lines += run
        if reinit % 7 == 3:
            lines.append("h1:5:6 [0] NCCL WARN watchdog near a run")
    return lines


@pytest.mark.parametrize("matcher_class", MATCHERS)
@pytest.mark.parametrize("channels", [8, 40], ids=["short-runs", "long-runs"])
def test_lines_passed_over_give_no_hit_and_the_rest_keep_their_true_line_numbers(matcher_class, channels):
    needles = [*NEEDLES, Needle(b" via "), Needle(b"Init COMPLETE")]
    lines = channel_log(400, channels)
    assert channels < 40 or len("\n".join(lines[2 : 2 + channels])) > LONG_RUN_BYTES
    data = ("\n".join(lines) + "\n").encode()
    repeated = {line.encode() for line in channel_run(channels)}
    scanner = LogScanner(needles, matcher_class(needles), block_bytes=SMALL_BLOCK)
    hits = [(hit.line, hit.text) for hit in scanner.scan(io.BytesIO(data), passed_over=repeated)]
    expected = [
        (number, line)
        for number, line in enumerate(lines, start=1)
        if ("Init COMPLETE" in line or "NCCL WARN" in line or " via " in line) and line.encode() not in repeated
    ]
    assert hits == expected


def test_a_run_of_lines_passed_over_ends_where_it_stops_recurring():
    needles = [Needle(b" via "), Needle(b"NCCL WARN")]
    run = [f"h [0] NCCL INFO Channel {ch:02d}/0 : 0[0] -> 1[1] via P2P" for ch in range(4)]
    # The third time, the run's last line is a warning: a line not passed over, inside the remembered run.
    lines = [*run, "x", *run, "x", *run[:3], "h [0] NCCL WARN via the middle", *run, *run[:2]]
    data = ("\n".join(lines) + "\n").encode()
    hits = list(LogScanner(needles).scan(io.BytesIO(data), passed_over={line.encode() for line in run}))
    assert [(hit.line, hit.text) for hit in hits] == [(14, "h [0] NCCL WARN via the middle")]


def test_with_recount_lines_after_the_last_hit_are_never_counted():
    counted = []

    def recount(start: int, end: int) -> int:
        counted.append((start, end))
        return data[start:end].count(b"\n")

    lines = make_log(4, 6000)
    data = ("\n".join(lines) + "\n").encode()
    scanner = LogScanner(NEEDLES, block_bytes=SMALL_BLOCK)
    hits = [(hit.line, hit.text) for hit in scanner.scan(io.BytesIO(data), recount=recount)]
    assert hits == naive(lines)
    assert counted and max(end for _, end in counted) < data.rindex(naive(lines)[-1][1].encode())


def test_repeats_get_the_signals_matching_each_line_would_give():
    parser = LogParser()
    lines = channel_log(12)
    parsed = parser.parse("logs/a.log", io.BytesIO(("\n".join(lines) + "\n").encode()))
    kept = [number for number, line in enumerate(lines, start=1) if lines[: number - 1].count(line) < REPEATS_KEPT]
    expected = [signal for number in kept for signal in parser.parse_text("logs/a.log", number, lines[number - 1])]
    assert parsed.signals == expected
    assert any(lines.count(line) > REPEATS_KEPT for line in lines)
