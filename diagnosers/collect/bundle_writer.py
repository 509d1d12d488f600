"""A bundle folder being written: files in the BUNDLE.md layout, each source's status, then bundle.json."""

from __future__ import annotations

import json
import tarfile
import threading
from pathlib import Path, PurePosixPath
from typing import Any

OK = "ok"
UNREACHABLE = "unreachable"
NOT_CONFIGURED = "not-configured"
MAX_STATUS_CHARS = 300


def error_status(text: str) -> str:
    return f"error: {' '.join(text.split())[:MAX_STATUS_CHARS]}"


class BundleWriter:
    """Thread-safe; once closed, late writes from a source that missed the deadline are dropped."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self._sources: dict[str, str] = {}
        self._meta: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._closed = False

    def write_bytes(self, relative: str, data: bytes) -> None:
        path = self._path(relative)
        with self._lock:
            if self._closed:
                return
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)

    def write_json(self, relative: str, document: Any) -> None:
        self.write_bytes(relative, json.dumps(document, ensure_ascii=False).encode())

    def source(self, name: str, status: str) -> None:
        """Record a source's status; a worse status is never overwritten by `ok`."""
        with self._lock:
            if self._closed:
                return
            if status == OK and self._sources.get(name, OK) != OK:
                return
            self._sources[name] = status

    def meta(self, key: str, value: Any) -> None:
        """A bundle.json field a source found out (which of a sweep's trials the steps are from)."""
        with self._lock:
            if not self._closed:
                self._meta[key] = value

    def sources(self) -> dict[str, str]:
        with self._lock:
            return dict(self._sources)

    def finish(self, meta: dict[str, Any]) -> Path:
        """Write bundle.json (meta plus every source's status) and refuse any later write."""
        with self._lock:
            self._closed = True
            document = {**meta, **self._meta, "sources": dict(self._sources)}
        (self.root / "bundle.json").write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
        return self.root

    def _path(self, relative: str) -> Path:
        pure = PurePosixPath(relative)
        if pure.is_absolute() or ".." in pure.parts or not pure.parts:
            raise ValueError(f"bundle path {relative!r} must stay inside the bundle")
        return self.root.joinpath(*pure.parts)


def archive(folder: Path, out: Path) -> Path:
    """The bundle as a .tar.gz whose single top folder is the bundle (what `trainbot diagnose` reads)."""
    with tarfile.open(out, "w:gz") as tar:
        tar.add(folder, arcname=folder.name)
    return out
