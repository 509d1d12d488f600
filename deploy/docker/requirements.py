"""Print trainbot's runtime requirements from pyproject.toml, one a line, for an image's `pip install -r`.

    python deploy/docker/requirements.py --without torch ray --extra postgres

`--without` drops packages by name (the bot image has no torch and no Ray: it never imports them with the
kuberay backend); `--extra` adds an optional-dependency group. Standard library only: it runs in a bare
python image before anything is installed.
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def normalized(name: str) -> str:
    """A distribution name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    found = NAME.match(requirement.strip())
    if found is None:
        raise ValueError(f"not a requirement: {requirement!r}")
    return normalized(found.group())


def requirements(pyproject: Path, without: set[str], extras: list[str]) -> list[str]:
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    optional = project.get("optional-dependencies", {})
    unknown = [extra for extra in extras if extra not in optional]
    if unknown:
        raise ValueError(f"{pyproject} has no optional dependencies {', '.join(unknown)}")
    chosen = list(project["dependencies"]) + [req for extra in extras for req in optional[extra]]
    dropped = {normalized(name) for name in without}
    return [req for req in chosen if requirement_name(req) not in dropped]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--without", nargs="*", default=[], help="package names to leave out")
    parser.add_argument("--extra", action="append", default=[], help="an optional-dependency group to add")
    parser.add_argument("--pyproject", type=Path, default=PYPROJECT)
    args = parser.parse_args(argv)
    try:
        lines = requirements(args.pyproject, set(args.without), args.extra)
    except (OSError, ValueError, KeyError, tomllib.TOMLDecodeError) as error:
        print(f"requirements.py: {error}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
