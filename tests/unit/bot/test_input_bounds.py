"""What a person types is read strictly, in the CLI and in Slack alike (one grammar): numbers are ASCII
digits within bounds, and a sweep's metric is one its trials report."""

import argparse

import pytest

from actions.errors import BadRequest
from actions.jobs.planning import plan_job
from actions.jobs.requests import LaunchRequest, SweepOptions
from actions.settings import Settings
from bot.cli.main import build_parser
from bot.commands.jobs import parse_job_words
from bot.slack.listeners.train import TRAIN

OUT_OF_BOUNDS = [
    (["jobs", "--limit", "-5"], "argument --limit: '-5' is not a whole number from 1 to 1000"),
    (["jobs", "--limit", "0"], "argument --limit: '0' is not a whole number from 1 to 1000"),
    (["jobs", "--limit", "99999999999999999999"], "argument --limit: '99999999999999999999' is not a whole number"),
    (["jobs", "--limit", "\u0663"], "argument --limit: '\u0663' is not a whole number"),
    (["logs", "j", "--tail", "-1"], "argument --tail: '-1' is not a whole number from 0 to 100000"),
    (
        ["sweep", "tiny-transformer", "--trials", "\uff11\uff10", "lr=uniform(0.1,0.2)"],
        "argument --trials: '\uff11\uff10'",
    ),
    (["launch", "tiny-transformer", "--workers", "\u0662"], "argument --workers: '\u0662' is not a whole number"),
]


class Refused(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # type: ignore[override]
        raise Refused(message)


@pytest.mark.parametrize(("words", "message"), OUT_OF_BOUNDS)
def test_the_cli_refuses_counts_that_are_not_ascii_whole_numbers_within_bounds(words, message, monkeypatch):
    monkeypatch.setattr(argparse.ArgumentParser, "error", _Parser.error)
    with pytest.raises(Refused) as refused:
        parse_job_words(build_parser(), words)
    assert str(refused.value) == message or str(refused.value).startswith(message)


@pytest.mark.parametrize(("words", "message"), OUT_OF_BOUNDS)
def test_slack_refuses_the_same_counts_in_one_message(words, message):
    with pytest.raises(BadRequest) as refused:
        TRAIN.parse(" ".join(words))
    first_line = str(refused.value).splitlines()[0]
    assert first_line.startswith(f"/train {words[0]}: {message}"), first_line


def test_counts_within_bounds_are_read():
    assert TRAIN.parse("jobs --limit 1000").args.limit == 1000
    assert TRAIN.parse("logs j --tail 0").args.tail == 0


@pytest.mark.parametrize(
    ("word", "message"),
    [
        ("epochs=\u0663", "parameter epochs: '\u0663' is not an integer"),
        ("lr=\uff11e-3", "parameter lr: '\uff11e-3' is not a number"),
        ("lr=1e-\u0663", "parameter lr: '1e-\u0663' is not a number"),
        ("lr=\U0001d7cf", "parameter lr: '\U0001d7cf' is not a number"),
    ],
)
def test_other_scripts_digits_are_no_number_for_a_parameter(tmp_path, word, message):
    with pytest.raises(BadRequest) as refused:
        plan_job(Settings(data_dir=tmp_path), LaunchRequest(template="tiny-transformer", params=(word,), requester="a"))
    assert str(refused.value) == message


def test_a_sweep_metric_is_one_its_trials_report(tmp_path):
    settings = Settings(data_dir=tmp_path)

    def metric_of(metric: str | None) -> str:
        options = SweepOptions(trials=2, metric=metric)
        request = LaunchRequest(
            template="tiny-transformer", params=("lr=uniform(0.1,0.2)",), requester="a", backend="local", sweep=options
        )
        argv = plan_job(settings, request).argv
        return argv[argv.index("--metric") + 1]

    assert (metric_of(None), metric_of("train_loss")) == ("val_loss", "train_loss")
    for wrong in ("accuracy", "val_loss; rm -rf /", "x" * 5000):
        with pytest.raises(BadRequest) as refused:
            metric_of(wrong)
        assert str(refused.value) == (f"--metric {wrong!r}: its trials report val_loss, train_loss; choose one of them")


def test_a_model_version_is_ascii_digits_in_the_cli_and_in_slack(monkeypatch):
    from bot.slack.listeners.model import MODEL  # noqa: PLC0415

    with pytest.raises(BadRequest, match="'\u0663' is not a model version number"):
        MODEL.parse("promote tiny \u0663 staging")
    monkeypatch.setattr(argparse.ArgumentParser, "error", _Parser.error)
    with pytest.raises(Refused, match="'\u0663' is not a model version number"):
        parse_job_words(build_parser(), ["model", "promote", "tiny", "\u0663", "staging"])
