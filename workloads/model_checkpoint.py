"""The model part of a checkpoint: weights plus what rebuilds the module, so any process can load it.

A checkpoint folder holds model.pt (a plain state_dict) and model.json:
{"builder": "package.module:Class", "config": {keyword arguments of the builder}}.
The sweep driver reads only this pair, so it needs no knowledge of the trainable that wrote it.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import torch
from torch import nn

WEIGHTS_FILE = "model.pt"
MANIFEST_FILE = "model.json"


class NotAModelCheckpoint(ValueError):
    """The folder lacks model.json or model.pt, or model.json does not name an importable builder."""


def write_model(
    folder: Path, state_dict: dict[str, torch.Tensor], builder: type[nn.Module], config: dict[str, Any]
) -> None:
    torch.save(state_dict, folder / WEIGHTS_FILE)
    manifest = {"builder": f"{builder.__module__}:{builder.__qualname__}", "config": config}
    (folder / MANIFEST_FILE).write_text(json.dumps(manifest), encoding="utf-8")


def has_model(folder: Path) -> bool:
    return (folder / MANIFEST_FILE).is_file() and (folder / WEIGHTS_FILE).is_file()


def read_model(folder: Path) -> nn.Module:
    """The module rebuilt from its builder and config, with the saved weights, in eval mode."""
    if not has_model(folder):
        raise NotAModelCheckpoint(f"{folder} has no {MANIFEST_FILE} and {WEIGHTS_FILE}")
    manifest = json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8"))
    module_name, _, builder_name = str(manifest.get("builder", "")).partition(":")
    try:
        builder = getattr(importlib.import_module(module_name), builder_name)
    except (ImportError, AttributeError, ValueError) as error:
        raise NotAModelCheckpoint(
            f"{folder / MANIFEST_FILE}: cannot import builder {manifest.get('builder')!r} ({error})"
        ) from None
    model = builder(**manifest.get("config", {}))
    model.load_state_dict(torch.load(folder / WEIGHTS_FILE, map_location="cpu", weights_only=True))
    return model.eval()
