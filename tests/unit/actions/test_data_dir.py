"""The data directory is chosen once: the setting, else the nearest .trainbot upward, else the per-user folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from actions.settings import Settings


@pytest.fixture
def nested(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory two levels under tmp_path, with no setting and a per-user folder of the test's own."""
    here = tmp_path / "project" / "sub" / "deeper"
    here.mkdir(parents=True)
    monkeypatch.chdir(here)
    monkeypatch.delenv("TRAINBOT_DATA_DIR", raising=False)
    monkeypatch.delenv("TRAINBOT_CONFIG", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    return here


def test_the_setting_wins_over_a_trainbot_folder_above(nested, monkeypatch, tmp_path):
    (tmp_path / "project" / ".trainbot").mkdir()
    monkeypatch.setenv("TRAINBOT_DATA_DIR", str(tmp_path / "named"))
    settings = Settings()
    assert (settings.data_dir, settings.data_dir_reason()) == (tmp_path / "named", "TRAINBOT_DATA_DIR")


def test_a_config_file_that_names_it_is_said(nested, monkeypatch, tmp_path):
    config = tmp_path / "trainbot.yaml"
    config.write_text(f"data_dir: {tmp_path / 'from-yaml'}\n")
    monkeypatch.setenv("TRAINBOT_CONFIG", str(config))
    settings = Settings()
    assert (settings.data_dir, settings.data_dir_reason()) == (tmp_path / "from-yaml", f"data_dir in {config}")


def test_the_nearest_trainbot_folder_upward_is_the_data_directory_from_anywhere_below(nested, tmp_path):
    (tmp_path / ".trainbot").mkdir()  # further up: the nearer one wins
    project = tmp_path / "project"
    (project / ".trainbot").mkdir()
    settings = Settings()
    assert settings.data_dir == project / ".trainbot"
    assert settings.data_dir_reason() == f"found .trainbot in {project}"


def test_a_file_named_trainbot_is_not_a_data_directory(nested, tmp_path):
    (tmp_path / "project" / ".trainbot").write_text("not a folder")
    assert Settings().data_dir == tmp_path / "xdg" / "trainbot"


def test_with_neither_it_is_the_per_user_folder(nested, tmp_path):
    settings = Settings()
    assert (settings.data_dir, settings.data_dir_reason()) == (tmp_path / "xdg" / "trainbot", "per-user default")
    assert settings.shown()["data_dir_chosen_by"] == "per-user default"


def test_a_data_dir_given_in_code_is_kept_as_given(nested):
    settings = Settings(data_dir=Path("relative/dir"))
    assert settings.data_dir == Path("relative/dir")
