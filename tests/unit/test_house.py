"""The house rules for tests, read from the source: no module under tests/ imports a test module (what tests
share lives in helper modules and conftest.py), and the product neither imports tests nor raises
AssertionError (a stand-in's waiting and failing belongs under tests/)."""

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("bot", "actions", "diagnosers")


def modules(folder: Path) -> list[Path]:
    """The Python modules under `folder`, the test corpus's data left out."""
    return sorted(path for path in folder.rglob("*.py") if "corpus" not in path.relative_to(ROOT).parts[1:2])


def imported(path: Path, root: Path = ROOT) -> Iterator[str]:
    """The modules `path` (under `root`) imports, absolute, relative ones resolved against its package."""
    package = path.relative_to(root).with_suffix("").parts[:-1]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else ()
            module = ".".join((*base, *([node.module] if node.module else [])))
            # `from tests.unit import test_cli` imports a module by its name, not from it.
            yield from (f"{module}.{alias.name}" for alias in node.names)


def is_test_module(name: str) -> bool:
    parts = name.split(".")
    return parts[0] == "tests" and any(part.startswith("test_") for part in parts)


def raises_assertion_error(path: Path) -> list[int]:
    """Lines of `path` that raise AssertionError by name (an `assert` statement is not counted)."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Raise) and node.exc is not None:
            raised = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(raised, ast.Name) and raised.id == "AssertionError":
                lines.append(node.lineno)
    return lines


@pytest.mark.parametrize("path", modules(ROOT / "tests"), ids=lambda path: str(path.relative_to(ROOT)))
def test_no_module_under_tests_imports_a_test_module(path):
    assert [name for name in imported(path) if is_test_module(name)] == []


@pytest.mark.parametrize("room", PRODUCT)
def test_the_product_never_imports_tests(room):
    found = {
        str(path.relative_to(ROOT)): names
        for path in modules(ROOT / room)
        if (names := [name for name in imported(path) if name.split(".")[0] == "tests"])
    }
    assert found == {}


@pytest.mark.parametrize("room", PRODUCT)
def test_the_product_never_raises_assertion_error(room):
    found = {
        str(path.relative_to(ROOT)): lines for path in modules(ROOT / room) if (lines := raises_assertion_error(path))
    }
    assert found == {}


def test_the_rules_see_what_they_forbid(tmp_path):
    """The checks above would catch a breach: a relative and an absolute test-module import, and a raise."""
    breach = tmp_path / "tests" / "unit" / "breach.py"
    breach.parent.mkdir(parents=True)
    breach.write_text("from .test_cli import x\nfrom tests.unit import test_store\nraise AssertionError('expected')\n")
    names = [name for name in imported(breach, tmp_path) if is_test_module(name)]
    assert names == ["tests.unit.test_cli.x", "tests.unit.test_store"]
    assert raises_assertion_error(breach) == [3]
