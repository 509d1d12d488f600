"""Load an evidence bundle (a folder, or a .tar.gz, .tar.bz2, .tar.xz or .tar of one) into Evidence.

Every file is optional. A file that cannot be read as what its place in the layout says
(bad JSON, binary junk, an empty file, an unknown Prometheus result) becomes a note in
`sources` and the rest of the bundle is still read. Archives are read member by member
without extracting anything to disk, so a hostile archive cannot write outside a folder;
links, devices, absolute and `..` names are refused. Reading is bounded (diagnosers.limits):
decompressed bytes per file and in all, seconds, JSON memory, matched lines and step
records; whatever is cut is noted under `sources`.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import tarfile
import zlib
from collections.abc import Callable, Collection, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from functools import partial
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO

from diagnosers import forked, packed
from diagnosers.evidence import MISSING, OK, SOURCE_NAMES, Evidence
from diagnosers.limits import MIB, Budget, BudgetSpent, CountedReader, Limits
from diagnosers.parsers import json_sources
from diagnosers.parsers.json_sources import BadInput
from diagnosers.parsers.logs import LogParser, ParsedLog

# JSON is parsed whole: beyond this many bytes a file is not even read into memory.
MAX_JSON_BYTES = 64 * MIB
# What parsing a JSON file may take: its bytes about three times over (the bytes, the text the quotes are
# found in, the strings) and a Python object per value, so `[{},{},...]` is refused before it is parsed.
JSON_MEMORY_BYTES = 256 * MIB
JSON_BYTES_PER_VALUE = 128
# A file notes list this long is already unreadable in Slack; the rest are counted.
MAX_FILE_NOTES = 20
# Bytes looked at to tell a text log from binary junk.
SNIFF_BYTES = 8192
# Matched lines kept from one log, and from all of them: each holds a quoted line of up to 4 KB.
MAX_HITS_PER_LOG = 10_000
MAX_HITS_PER_BUNDLE = 50_000
# Step records kept from one steps file, and from all of them (a few hundred bytes each).
MAX_STEPS_PER_FILE = 100_000
MAX_STEPS_PER_BUNDLE = 400_000
# Prometheus samples kept from all files: 40 bytes each, packed (a 64-GPU, 6-hour bundle has about a million).
MAX_SAMPLES_PER_BUNDLE = 5_000_000

JSON_READERS = {
    "k8s/events.json": json_sources.read_events,
    "k8s/pods.json": json_sources.read_pods,
    "k8s/rayjob.json": json_sources.read_custom_resource,
    "k8s/raycluster.json": json_sources.read_custom_resource,
    "ray/jobs.json": json_sources.read_ray_jobs,
    "ray/nodes.json": json_sources.check_ray_nodes,
    "ray/tasks.json": json_sources.read_ray_tasks,
}
LAYOUT_ROOTS = frozenset({*SOURCE_NAMES, "bundle.json"})
ARCHIVE_ERRORS = (tarfile.TarError, EOFError, zlib.error, lzma.LZMAError, OSError)


class NotABundle(Exception):
    """PATH is neither a bundle folder nor an archive of one."""


class Refused(Exception):
    """An archive member the loader will not read (a link, a device, a name outside the bundle)."""


# Opens a file of the bundle: its bytes counted against the budget (a refused member raises Refused).
Opener = Callable[[], CountedReader]
# A file of the bundle: its layout path, its size, how to open it, and where it lies on disk (None in an archive).
Entry = tuple[str, int, Opener, Path | None]
# Bytes read at a time when a log's lines are counted again from its file.
RECOUNT_CHUNK_BYTES = 1 * MIB
# A folder bundle's logs and Prometheus files are read by two processes (diagnosers.forked), each file whole by
# one of them, once they come to this many bytes; below it a fork costs more than it saves.
READ_BESIDE_MIN_BYTES = 32 * MIB
READ_BESIDE = frozenset({"logs", "prometheus"})
# The exporters whose metric files are named after the metric they hold (the collector writes METRIC.json).
EXPORTER_PREFIXES = ("DCGM_FI_", "ray_")
# How long past the bundle's time limit the other process may take before it is stopped.
READ_BESIDE_GRACE_S = 5.0


def load_bundle(
    path: Path, parser: LogParser | None = None, limits: Limits | None = None, metrics: Collection[str] | None = None
) -> Evidence:
    """Everything the bundle holds; with `metrics`, a Prometheus file named after an exporter's metric (DCGM_FI_*,
    ray_*) that is not among them is passed over undecoded (most of a bundle's bytes are metrics no rule reads)."""
    loader = _Loader(parser or LogParser(), Budget(limits or Limits()), metrics)
    try:
        entries = _entries(path, loader.budget)
        read_beside: dict[int, _FileRead | str] = {}
        if path.is_dir():
            entries = list(entries)
            read_beside = _read_beside(entries, loader)
        for index, entry in enumerate(entries):
            if index in read_beside:
                loader.take(entry, read_beside[index])
            else:
                loader.add(*entry)
    except BudgetSpent as spent:
        after = f"; nothing after {loader.last} was read" if loader.last else ""
        loader.note_bundle(path.name, f"error: {spent}{after}")
    except ARCHIVE_ERRORS as error:
        if not loader.recognised:
            raise NotABundle(f"{path}: the archive is damaged ({error})") from None
        loader.note_bundle(path.name, f"error: the archive is damaged or cut short ({error}); read what came before")
    if not loader.recognised:
        raise NotABundle(
            f"{path} holds none of bundle.json, logs/, k8s/, ray/, prometheus/ or steps/: it is not an evidence bundle"
        )
    return loader.finish()


def _entries(path: Path, budget: Budget) -> Iterator[Entry]:
    if path.is_dir():
        return _folder_entries(path, budget)
    if path.is_file():
        if not tarfile.is_tarfile(path):
            raise NotABundle(f"{path} is a file but not a .tar.gz bundle; pass a bundle folder or archive")
        return _tar_entries(path, budget)
    raise NotABundle(f"{path} does not exist")


def _folder_entries(root: Path, budget: Budget) -> Iterator[Entry]:
    """Files under the layout's own names only: never a walk of whatever folder was passed."""
    for name in sorted(LAYOUT_ROOTS):
        top = root / name
        if top.is_symlink():
            continue
        if top.is_file():
            yield name, top.stat().st_size, lambda top=top: CountedReader(top.open("rb"), budget), top
            continue
        for folder, dirnames, filenames in os.walk(top):
            dirnames.sort()
            for filename in sorted(filenames):
                full = Path(folder) / filename
                if full.is_symlink() or not full.is_file():
                    continue
                relative = full.relative_to(root).as_posix()
                yield relative, full.stat().st_size, lambda full=full: CountedReader(full.open("rb"), budget), full


def _tar_entries(path: Path, budget: Budget) -> Iterator[Entry]:
    """Members in archive order. Every decompressed byte, a skipped one too, is counted below tarfile."""
    with ExitStack() as stack:
        plain = _decompressed(stack.enter_context(path.open("rb")))
        stack.callback(plain.close)
        counted = io.BufferedReader(CountedReader(plain, budget, archive=True))
        archive = stack.enter_context(tarfile.open(fileobj=counted, mode="r|"))
        for member in archive:
            relative = _layout_path(member.name)
            refusal = _refusal(member)
            if refusal:
                yield relative, member.size, lambda refusal=refusal: _refuse(refusal), None
                continue
            stream = archive.extractfile(member)
            if stream is not None:
                yield (
                    relative,
                    member.size,
                    lambda stream=stream: CountedReader(stream, budget, budget.limits.file_bytes),
                    None,
                )


def _decompressed(raw: BinaryIO) -> BinaryIO:
    """The tar stream inside gzip, bz2 or xz (by their leading bytes), or raw for a plain tar."""
    magic = raw.read(6)
    raw.seek(0)
    # Closed by the caller's ExitStack.
    if magic.startswith(b"\x1f\x8b"):
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    if magic.startswith(b"BZh"):
        return bz2.BZ2File(raw)  # type: ignore[return-value]
    if magic.startswith(b"\xfd7zXZ\x00"):
        return lzma.LZMAFile(raw)  # type: ignore[return-value]
    return raw


def _refusal(member: tarfile.TarInfo) -> str:
    if member.name.startswith("/") or ".." in PurePosixPath(member.name).parts:
        return "its name leads outside the bundle; not read"
    if member.issym() or member.islnk():
        return "a link, not a file; not followed"
    if not member.isfile():
        return "not a regular file; not read"
    return ""


def _refuse(refusal: str) -> CountedReader:
    raise Refused(refusal)


def _layout_path(name: str) -> str:
    """Member path relative to the bundle: `job-bundle/logs/a.log` -> `logs/a.log`."""
    parts = [part for part in PurePosixPath(name).parts if part not in ("", ".", "/")]
    if len(parts) > 1 and parts[0] not in LAYOUT_ROOTS:
        parts = parts[1:]
    return "/".join(parts)


class _Loader:
    def __init__(self, parser: LogParser, budget: Budget, metrics: Collection[str] | None = None) -> None:
        self.parser = parser
        self.budget = budget
        self.metrics = metrics
        self.evidence = Evidence()
        self.recognised = False
        self.present: set[str] = set()
        self.declared: dict[str, str] = {}
        self.notes: dict[str, str] = {}
        self.bundle_notes: dict[str, str] = {}
        self.extra_notes = 0
        self.last = ""
        self.hits = 0
        self.steps = 0
        self.samples = 0

    def add(self, relative: str, size: int, opener: Opener, on_disk: Path | None = None) -> None:
        top = relative.split("/", 1)[0]
        if top not in LAYOUT_ROOTS or (relative == top and top != "bundle.json"):
            return
        self.recognised = True
        self.last = relative
        if self.passes_over(relative):
            self.present.add(top)
            return
        try:
            with opener() as counted:
                if size == 0:
                    raise BadInput("empty file")
                self._read(relative, top, counted, on_disk)
            if top in SOURCE_NAMES:
                self.present.add(top)
            if counted.cut:
                self.note(relative, f"error: {_cut(self.budget.limits)}; read what came before")
        except BadInput as problem:
            self.note(relative, f"error: {problem}")
        except Refused as refusal:
            self.note(relative, f"error: {refusal}")
        except BudgetSpent as spent:
            self.note(relative, f"error: {spent}; the rest of this file was not read")
            raise
        except OSError as error:
            self.note(relative, f"error: cannot read ({error.strerror or error})")

    def passes_over(self, relative: str) -> bool:
        """A metric file that no reader wants: named after an exporter's metric that is not among `metrics`."""
        if self.metrics is None or not relative.startswith("prometheus/"):
            return False
        metric = PurePosixPath(relative).stem
        return metric.startswith(EXPORTER_PREFIXES) and metric not in self.metrics

    def _read(self, relative: str, top: str, counted: CountedReader, on_disk: Path | None) -> None:
        stream = io.BufferedReader(counted, SNIFF_BYTES)
        if top == "logs":
            self._read_log(relative, stream, on_disk)
        elif top == "steps":
            self._read_steps(relative, stream)
        else:
            self._read_json(relative, top, _json_bytes(stream, counted, self.budget.limits))

    def _read_json(self, relative: str, top: str, raw: bytes) -> None:
        if relative == "bundle.json":
            self.evidence.meta, self.declared = json_sources.read_meta(raw, relative)
        elif relative in JSON_READERS:
            JSON_READERS[relative](self.evidence, self.parser, raw, relative)
        elif top == "prometheus" and relative.endswith(".json"):
            self._read_prometheus(relative, raw)
        else:
            raise BadInput("not part of the bundle layout; ignored")

    def _read_prometheus(self, relative: str, raw: bytes) -> None:
        if self.samples >= MAX_SAMPLES_PER_BUNDLE:
            raise BadInput(f"not read: the bundle already gave {MAX_SAMPLES_PER_BUNDLE:,} samples, the limit")
        known = {metric: len(series) for metric, series in self.evidence.series.items()}
        json_sources.read_prometheus(self.evidence, raw, relative, PurePosixPath(relative).stem)
        for metric, series in self.evidence.series.items():
            self.samples += sum(len(one.values) for one in series[known.get(metric, 0) :])

    def _read_steps(self, relative: str, stream: io.BufferedReader) -> None:
        room = min(MAX_STEPS_PER_FILE, MAX_STEPS_PER_BUNDLE - self.steps)
        if room <= 0:
            raise BadInput(f"not read: the bundle already gave {MAX_STEPS_PER_BUNDLE} step records, the limit")
        read = json_sources.read_steps(self.evidence, stream, relative, room)
        self.steps += read.kept
        problems = []
        if read.bad:
            problems.append(f"{read.bad} line(s) are not step records; skipped them")
        if read.stopped_at:
            problems.append(f"stopped at line {read.stopped_at}: {read.why}")
        if problems:
            self.note(relative, "error: " + "; ".join(problems))

    def _read_log(self, relative: str, stream: io.BufferedReader, on_disk: Path | None) -> None:
        if _looks_binary(stream.peek(SNIFF_BYTES)[:SNIFF_BYTES]):
            raise BadInput("binary content, not a text log; skipped")
        room = min(MAX_HITS_PER_LOG, MAX_HITS_PER_BUNDLE - self.hits)
        if room <= 0:
            raise BadInput(
                f"not scanned: the bundle's logs already gave {MAX_HITS_PER_BUNDLE} matching lines, the limit"
            )

        def on_long_line(line: int) -> None:
            self.note(relative, f"line {line} is longer than the scanner's window; evidence from it is cut")

        parsed = ParsedLog()
        try:
            recount = partial(_newlines_between, on_disk) if on_disk else None
            self.parser.parse(relative, stream, on_long_line, into=parsed, max_hits=room, recount=recount)
        finally:
            # A log cut short (a damaged archive, a spent budget) still gives what was read before the cut.
            self.hits += parsed.hits
            self.evidence.add_signals(parsed.signals)
            self.evidence.exceptions.extend(parsed.exceptions)
        if parsed.binary_at:
            self.note(relative, f"error: binary content from line {parsed.binary_at}; the rest was not scanned")
        elif parsed.stopped_at:
            self.note(
                relative,
                f"error: stopped at line {parsed.stopped_at}: {room} lines matched trainbot's patterns, the limit; "
                "the rest was not scanned",
            )

    def take(self, entry: Entry, read: _FileRead | str) -> None:
        """A file read by the other process (or why it was not), taken in bundle order as `add` would have read it.
        Where the bundle-wide limits would have read it otherwise (fewer matched lines left, no samples left), it
        is read again here, so the diagnosis is the same whichever process read what."""
        relative = entry[0]
        top = relative.split("/", 1)[0]
        self.recognised = True
        self.last = relative
        if isinstance(read, str):
            self.note(relative, read)
            return
        room = min(MAX_HITS_PER_LOG, MAX_HITS_PER_BUNDLE - self.hits)
        # The reading process stopped at its own limit, which was tighter than the bundle's is here.
        cut_short = read.room < room and read.hits >= read.room
        if (top == "logs" and (room <= 0 or read.hits > room or cut_short)) or (
            top == "prometheus" and (self.samples >= MAX_SAMPLES_PER_BUNDLE or not read.samples_left)
        ):
            self.add(*entry)
            return
        self.hits += read.hits
        for signals in read.evidence.signals.values():
            self.evidence.add_signals(signals)
        self.evidence.exceptions.extend(read.evidence.exceptions)
        for metric, series in read.evidence.series.items():
            self.evidence.series[metric].extend(series)
            self.samples += sum(len(one.values) for one in series)
        self.present |= read.present
        for noted, note in read.notes:
            self.note(noted, note)
        if read.spent:
            raise BudgetSpent(read.spent)

    def note(self, relative: str, note: str) -> None:
        if len(self.notes) < MAX_FILE_NOTES:
            self.notes[relative] = note
        else:
            self.extra_notes += 1

    def note_bundle(self, name: str, note: str) -> None:
        """A note about the bundle as a whole: never counted away among the files' notes."""
        self.bundle_notes[name] = note

    def finish(self) -> Evidence:
        sources = {name: OK if name in self.present else self.declared.get(name, MISSING) for name in SOURCE_NAMES}
        for name, status in self.declared.items():
            if name not in self.present:
                sources[name] = status
        sources.update(self.notes)
        if self.extra_notes:
            sources["more-files"] = f"error: {self.extra_notes} more file(s) could not be read"
        sources.update(self.bundle_notes)
        self.evidence.sources = sources
        return self.evidence


@dataclass(slots=True)
class _FileRead:
    """What reading one file gave, kept apart for the loader to take in bundle order."""

    evidence: Evidence
    notes: list[tuple[str, str]]
    present: set[str]
    hits: int
    # Why the bundle's budget ran out while reading it, where it did.
    spent: str
    # What the bundle-wide limits left the reading process, which counts only what it read itself (_Tally).
    room: int
    samples_left: bool

    def __reduce__(self) -> tuple[Callable[..., _FileRead], tuple[object, ...]]:
        fields = (self.notes, self.present, self.hits, self.spent, self.room, self.samples_left)
        return _unpacked, (packed.pack(self.evidence), *fields)


def _unpacked(evidence: packed.Packed, *fields: Any) -> _FileRead:
    return _FileRead(packed.unpack(evidence), *fields)


class _OneFile(_Loader):
    """Reads one file as the loader would, into its own Evidence, keeping its notes in the order they came."""

    def __init__(self, parser: LogParser, budget: Budget) -> None:
        super().__init__(parser, budget)
        self.notes_made: list[tuple[str, str]] = []

    def note(self, relative: str, note: str) -> None:
        self.notes_made.append((relative, note))


@dataclass(slots=True)
class _Tally:
    """What one process has kept of the files it read, so that it too stays within the bundle-wide limits."""

    hits: int = 0
    samples: int = 0


def _read_one(entry: Entry, parser: LogParser, budget: Budget, tally: _Tally) -> _FileRead:
    one = _OneFile(parser, budget)
    one.hits, one.samples = tally.hits, tally.samples
    room = min(MAX_HITS_PER_LOG, MAX_HITS_PER_BUNDLE - tally.hits)
    samples_left = tally.samples < MAX_SAMPLES_PER_BUNDLE
    spent = ""
    try:
        one.add(*entry)
    except BudgetSpent as error:
        spent = str(error)
    read = _FileRead(one.evidence, one.notes_made, one.present, one.hits - tally.hits, spent, room, samples_left)
    tally.hits, tally.samples = one.hits, one.samples
    return read


def _read_beside(entries: list[Entry], loader: _Loader) -> dict[int, _FileRead | str]:
    """The big independent files of a folder bundle, read by this process and a forked one; by entry index, each
    file's read, or the note for one whose reader failed. Empty where two processes would not pay or not be safe."""
    chosen = [
        index
        for index, (relative, _, _, on_disk) in enumerate(entries)
        if on_disk is not None and relative.split("/", 1)[0] in READ_BESIDE and not loader.passes_over(relative)
    ]
    total = sum(entries[index][1] for index in chosen)
    if total < READ_BESIDE_MIN_BYTES or len(chosen) > forked.MAX_JOBS:
        return {}
    if not (forked.can_fork() and forked.an_idle_core()):
        return {}
    # The slowest first, so neither process is left with a slow one at the end while the other waits: Prometheus
    # JSON takes about 50 times longer a byte to decode than a log to scan; then by size.
    chosen.sort(key=lambda index: (not entries[index][0].startswith("prometheus/"), -entries[index][1]))
    # Each process has a tally of its own (the fork copies it).
    read = partial(_read_one, parser=loader.parser, budget=loader.budget, tally=_Tally())
    timeout_s = loader.budget.limits.seconds + READ_BESIDE_GRACE_S
    shared = forked.share([entries[index] for index in chosen], read, timeout_s)
    found: dict[int, _FileRead | str] = {chosen[job]: result for job, result in shared.results.items()}
    for job, why in shared.lost.items():
        found[chosen[job]] = f"error: the process reading it beside the main one failed ({why}); not read"
    return found


def _newlines_between(path: Path, start: int, end: int) -> int:
    """Newlines in bytes [start, end) of a file, read again in chunks."""
    count = 0
    with path.open("rb", buffering=0) as file:
        file.seek(start)
        while start < end:
            chunk = file.read(min(end - start, RECOUNT_CHUNK_BYTES))
            if not chunk:
                break
            count += chunk.count(b"\n")
            start += len(chunk)
    return count


def _cut(limits: Limits) -> str:
    return f"cut at {limits.file_bytes // MIB} MB, the limit for one file of an archive (TRAINBOT_BUNDLE_MAX_FILE_MB)"


def _json_bytes(stream: io.BufferedReader, counted: CountedReader, limits: Limits) -> bytes:
    """The whole file, when it fits what parsing it may cost."""
    raw = stream.read(MAX_JSON_BYTES + 1)
    if len(raw) > MAX_JSON_BYTES:
        raise BadInput(f"over {MAX_JSON_BYTES // MIB} MB, the limit for a JSON file; skipped")
    if counted.cut:
        raise BadInput(f"{_cut(limits)}; skipped")
    values = raw.count(b",") + raw.count(b"[") + raw.count(b"{") + 1
    needed = 3 * len(raw) + JSON_BYTES_PER_VALUE * values
    if needed > JSON_MEMORY_BYTES:
        raise BadInput(
            f"{len(raw) // MIB} MB holding about {values:,} JSON values would take about {needed // MIB} MB "
            f"to read, over the {JSON_MEMORY_BYTES // MIB} MB limit for a JSON file; skipped"
        )
    return raw


_CONTROL_BYTES = bytes(byte for byte in range(32) if byte not in (9, 10, 12, 13, 27))
# Share of control bytes (other than tab, newline, CR, ESC, form feed) above which a log is binary.
BINARY_CONTROL_SHARE = 0.10


def _looks_binary(head: bytes) -> bool:
    if not head:
        return False
    if b"\x00" in head:
        return True
    control = len(head) - len(head.translate(None, _CONTROL_BYTES))
    return control / len(head) > BINARY_CONTROL_SHARE
