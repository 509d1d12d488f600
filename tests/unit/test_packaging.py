"""Installing is quiet: the package builds without a setuptools warning, and `make install` shows pip's output
only when the install fails (the person then needs it), keeping it in a log under the environment."""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# What the build reads: the metadata, the readme and licence it names, and the packages it finds.
BUILD_INPUTS = ("pyproject.toml", "README.md", "LICENSE", "actions", "bot", "diagnosers", "playbooks", "workloads")
WARNINGS = ("Warning", "would be ignored", "deprecated")
NOISE_LINES = 200


@pytest.fixture(scope="module")
def built_wheel(tmp_path_factory) -> tuple[str, Path]:
    """The wheel of a copy of this checkout (a build writes build/ and *.egg-info beside its sources), and
    everything the build printed."""
    source = tmp_path_factory.mktemp("source")
    for name in BUILD_INPUTS:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(ROOT / name, source / name)
    out = tmp_path_factory.mktemp("wheel")
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", out, source]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    (wheel,) = out.glob("*.whl")
    return result.stdout + result.stderr, wheel


def test_the_package_builds_without_a_setuptools_warning(built_wheel):
    output, _ = built_wheel
    assert [line for line in output.splitlines() if any(word in line for word in WARNINGS)] == []


def test_the_wheel_carries_the_templates_playbooks_and_licence(built_wheel):
    _, wheel = built_wheel
    names = zipfile.ZipFile(wheel).namelist()
    assert "bot/render/templates/diagnosis.j2" in names
    assert any(name.startswith("playbooks/") and name.endswith(".md") for name in names)
    assert "trainbot-0.1.0.dist-info/licenses/LICENSE" in names
    metadata = zipfile.ZipFile(wheel).read("trainbot-0.1.0.dist-info/METADATA").decode()
    assert "License-Expression: Apache-2.0" in metadata
    assert not any(name.startswith("tests/") or "__pycache__" in name for name in names)


def fake_python(venv: Path, script: str) -> None:
    """A `python` in `venv` that runs `script` instead of pip, so `make install` runs without the network."""
    python = venv / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f"#!/bin/sh\n{script}\n")
    python.chmod(0o755)


def make_install(venv: Path) -> subprocess.CompletedProcess[str]:
    command = ["make", "--no-print-directory", "-C", ROOT, f"VENV={venv}", "install"]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def test_make_install_keeps_pips_output_in_a_log_when_it_succeeds(tmp_path):
    venv = tmp_path / "venv"
    fake_python(venv, f'for i in $(seq {NOISE_LINES}); do echo "SetuptoolsDeprecationWarning line $i" >&2; done')
    result = make_install(venv)
    assert result.returncode == 0, result.stderr
    assert "SetuptoolsDeprecationWarning" not in result.stdout + result.stderr
    assert len((result.stdout + result.stderr).splitlines()) == 1  # what it is doing and where the log is
    assert "SetuptoolsDeprecationWarning line 200" in (venv / "install.log").read_text()
    assert (venv / ".installed").is_file()


def test_make_install_shows_pips_output_when_it_fails(tmp_path):
    venv = tmp_path / "venv"
    fake_python(venv, 'echo "ERROR: No matching distribution found for torch==2.13.0" >&2; exit 1')
    result = make_install(venv)
    assert result.returncode != 0
    assert "No matching distribution found for torch==2.13.0" in result.stdout
    assert f"the output above is in {venv}/install.log" in result.stderr
    assert not (venv / ".installed").exists()
