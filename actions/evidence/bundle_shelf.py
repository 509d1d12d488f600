"""Evidence bundles kept for the diagnoses posted in Slack, by key.

A diagnosis is a pure function of its bundle, so keeping the bundle keeps the diagnosis: a "Show evidence"
click names the key and the bundle is diagnosed again. Keys are folder names under the shelf, so only
[a-z0-9-] is accepted: a key from a click can never name a path outside it.
"""

from __future__ import annotations

import re
import secrets
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from actions.errors import BadRequest

if TYPE_CHECKING:
    from actions.settings import Settings

KEY = re.compile(r"[a-z0-9][a-z0-9-]{0,99}")
# Room for "-" and the random suffix within a key's 100 characters.
JOB_PART_CHARS = 80


class BundleShelf:
    def __init__(self, root: Path) -> None:
        self.root = root

    @classmethod
    def of(cls, settings: Settings) -> BundleShelf:
        """The shelf in the data directory: <data_dir>/bundles."""
        return cls(settings.data_dir / "bundles")

    def keep(self, bundle: Path, job: str) -> str:
        """Copy the bundle folder onto the shelf; the key it is kept under (named after `job`)."""
        key = f"{_slug(job)}-{secrets.token_hex(4)}"
        self.root.mkdir(parents=True, exist_ok=True)
        # Copied under a name that is not a key, then renamed: a click never finds half a bundle.
        partial = self.root / f".{key}.partial"
        shutil.copytree(bundle, partial, symlinks=True)
        partial.rename(self._folder(key))
        return key

    def find(self, key: str) -> Path | None:
        """The bundle folder kept under `key`; None when there is none (any more)."""
        folder = self._folder(key)
        return folder if folder.is_dir() else None

    def _folder(self, key: str) -> Path:
        if not KEY.fullmatch(key):
            raise BadRequest(f"{key!r} is not a bundle key: keys are up to 100 of a-z, 0-9 and '-'")
        return self.root / key


def _slug(job: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", job.lower()).strip("-")[:JOB_PART_CHARS].rstrip("-") or "bundle"
