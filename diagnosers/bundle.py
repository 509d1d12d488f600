"""Load an evidence bundle (a folder, or a .tar.gz of one) into Evidence.

Every file is optional. A file that cannot be read as what its place in the layout says
(bad JSON, binary junk, an empty file, an unknown Prometheus result) becomes a note in
`sources` and the rest of the bundle is still read. Archives are read member by member
without extracting anything to disk, so a hostile archive cannot write outside a folder.
"""

from __future__ import annotations

import io
import os
import tarfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from diagnosers.evidence import MISSING, OK, SOURCE_NAMES, Evidence
from diagnosers.parsers import json_sources
from diagnosers.parsers.json_sources import BadInput
from diagnosers.parsers.logs import LogParser, ParsedLog

# JSON is parsed whole; beyond this a file is skipped with a note rather than risk the host's memory.
MAX_JSON_BYTES = 256 << 20
# A file notes list this long is already unreadable in Slack; the rest are counted.
MAX_FILE_NOTES = 20
# Bytes looked at to tell a text log from binary junk.
SNIFF_BYTES = 8192
# Share of control bytes (other than tab, newline, CR, ESC, form feed) above which a log is binary.
BINARY_CONTROL_SHARE = 0.10

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


class NotABundle(Exception):
    """PATH is neither a bundle folder nor a .tar.gz of one."""


Opener = Callable[[], AbstractContextManager[BinaryIO]]


def load_bundle(path: Path, parser: LogParser | None = None) -> Evidence:
    loader = _Loader(parser or LogParser())
    try:
        for relative, size, opener in _entries(path):
            loader.add(relative, size, opener)
    except (tarfile.TarError, EOFError, zlib.error) as error:
        if not loader.recognised:
            raise NotABundle(f"{path}: the archive is damaged ({error})") from None
        loader.note(path.name, f"error: the archive is damaged or cut short ({error}); read what came before")
    if not loader.recognised:
        raise NotABundle(
            f"{path} holds none of bundle.json, logs/, k8s/, ray/, prometheus/ or steps/: it is not an evidence bundle"
        )
    return loader.finish()


def _entries(path: Path) -> Iterator[tuple[str, int, Opener]]:
    if path.is_dir():
        return _folder_entries(path)
    if path.is_file():
        if not tarfile.is_tarfile(path):
            raise NotABundle(f"{path} is a file but not a .tar.gz bundle; pass a bundle folder or archive")
        return _tar_entries(path)
    raise NotABundle(f"{path} does not exist")


def _folder_entries(root: Path) -> Iterator[tuple[str, int, Opener]]:
    """Files under the layout's own names only: never a walk of whatever folder was passed."""
    for name in sorted(LAYOUT_ROOTS):
        top = root / name
        if top.is_symlink():
            continue
        if top.is_file():
            yield name, top.stat().st_size, lambda top=top: top.open("rb")
            continue
        for folder, dirnames, filenames in os.walk(top):
            dirnames.sort()
            for filename in sorted(filenames):
                full = Path(folder) / filename
                if full.is_symlink() or not full.is_file():
                    continue
                relative = full.relative_to(root).as_posix()
                yield relative, full.stat().st_size, lambda full=full: full.open("rb")


def _tar_entries(path: Path) -> Iterator[tuple[str, int, Opener]]:
    with tarfile.open(path, "r|*") as archive:
        for member in archive:
            if not member.isfile():
                continue
            stream = archive.extractfile(member)
            if stream is None:
                continue
            relative = _layout_path(member.name)
            yield relative, member.size, lambda stream=stream: nullcontext(stream)


def _layout_path(name: str) -> str:
    """Member path relative to the bundle: `job-bundle/logs/a.log` -> `logs/a.log`."""
    parts = [part for part in PurePosixPath(name).parts if part not in ("", ".", "/")]
    if len(parts) > 1 and parts[0] not in LAYOUT_ROOTS:
        parts = parts[1:]
    return "/".join(parts)


class _Loader:
    def __init__(self, parser: LogParser) -> None:
        self.parser = parser
        self.evidence = Evidence()
        self.recognised = False
        self.present: set[str] = set()
        self.declared: dict[str, str] = {}
        self.notes: dict[str, str] = {}
        self.extra_notes = 0

    def add(self, relative: str, size: int, opener: Opener) -> None:
        top = relative.split("/", 1)[0]
        if top not in LAYOUT_ROOTS or (relative == top and top != "bundle.json"):
            return
        self.recognised = True
        try:
            if size == 0:
                raise BadInput("empty file")
            self._read(relative, top, size, opener)
            if top in SOURCE_NAMES:
                self.present.add(top)
        except BadInput as problem:
            self.note(relative, f"error: {problem}")
        except OSError as error:
            self.note(relative, f"error: cannot read ({error.strerror or error})")

    def _read(self, relative: str, top: str, size: int, opener: Opener) -> None:
        if top == "logs":
            self._read_log(relative, opener)
            return
        if relative.endswith(".json") and size > MAX_JSON_BYTES:
            raise BadInput(f"{size >> 20} MB is over the {MAX_JSON_BYTES >> 20} MB limit for a JSON file")
        with opener() as stream:
            raw = stream.read()
        if relative == "bundle.json":
            self.evidence.meta, self.declared = json_sources.read_meta(raw, relative)
        elif relative in JSON_READERS:
            JSON_READERS[relative](self.evidence, self.parser, raw, relative)
        elif top == "prometheus" and relative.endswith(".json"):
            json_sources.read_prometheus(self.evidence, raw, relative, PurePosixPath(relative).stem)
        elif top == "steps":
            bad = json_sources.read_steps(self.evidence, raw, relative)
            if bad:
                self.note(relative, f"error: {bad} line(s) are not step records; skipped them")
        else:
            raise BadInput("not part of the bundle layout; ignored")

    def _read_log(self, relative: str, opener: Opener) -> None:
        with opener() as raw_stream:
            stream = raw_stream if isinstance(raw_stream, io.BufferedReader) else io.BufferedReader(raw_stream)
            head = stream.peek(SNIFF_BYTES)[:SNIFF_BYTES]
            if _looks_binary(head):
                raise BadInput("binary content, not a text log; skipped")

            def on_long_line(line: int) -> None:
                self.note(relative, f"line {line} is longer than the scanner's window; evidence from it is cut")

            parsed = ParsedLog()
            try:
                self.parser.parse(relative, stream, on_long_line, into=parsed)
            finally:
                # A log cut short (a damaged archive) still gives what was read before the damage.
                self.evidence.add_signals(parsed.signals)
                self.evidence.exceptions.extend(parsed.exceptions)

    def note(self, relative: str, note: str) -> None:
        if len(self.notes) < MAX_FILE_NOTES:
            self.notes[relative] = note
        else:
            self.extra_notes += 1

    def finish(self) -> Evidence:
        sources = {name: OK if name in self.present else self.declared.get(name, MISSING) for name in SOURCE_NAMES}
        for name, status in self.declared.items():
            if name not in self.present:
                sources[name] = status
        sources.update(self.notes)
        if self.extra_notes:
            sources["more-files"] = f"error: {self.extra_notes} more file(s) could not be read"
        self.evidence.sources = sources
        return self.evidence


_CONTROL_BYTES = bytes(byte for byte in range(32) if byte not in (9, 10, 12, 13, 27))


def _looks_binary(head: bytes) -> bool:
    if not head:
        return False
    if b"\x00" in head:
        return True
    control = len(head) - len(head.translate(None, _CONTROL_BYTES))
    return control / len(head) > BINARY_CONTROL_SHARE
