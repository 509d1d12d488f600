"""The reference trainer's pieces in one process: data, parameters, the loop, checkpoints, its CLI."""

import math

import pytest
import torch

from workloads.model_checkpoint import NotAModelCheckpoint, read_model
from workloads.steps import StepTimer
from workloads.synthetic_text import SEQ_LEN, VOCAB_SIZE, SyntheticLanguage
from workloads.tiny_transformer import main
from workloads.train_config import TrainConfig
from workloads.training import LMTraining


def test_the_language_and_its_batches_are_a_function_of_seed_step_and_rank():
    language, again, other = SyntheticLanguage.generate(0), SyntheticLanguage.generate(0), SyntheticLanguage.generate(1)
    assert torch.equal(language.train, again.train) and torch.equal(language.val, again.val)
    assert not torch.equal(language.train, other.train)
    inputs, targets = language.batch(step=5, batch_size=4, rank=1, world_size=2)
    assert inputs.shape == targets.shape == (4, SEQ_LEN)
    assert torch.equal(inputs[:, 1:], targets[:, :-1])
    assert torch.equal(inputs, again.batch(step=5, batch_size=4, rank=1, world_size=2)[0])
    assert not torch.equal(inputs, language.batch(step=5, batch_size=4, rank=0, world_size=2)[0])
    assert not torch.equal(inputs, language.batch(step=6, batch_size=4, rank=1, world_size=2)[0])


def test_parameters_take_defaults_and_refuse_what_the_model_cannot_use():
    assert TrainConfig.from_mapping({}) == TrainConfig()
    assert TrainConfig.from_mapping({"d_model": 48.0, "lr": 1}).d_model == 48
    for values, message in [
        ({"x": 0.5}, "unknown parameter.*x; known: lr, batch_size"),
        ({"d_model": 57.5}, "d_model must be an integer"),
        ({"layers": True}, "layers must be an integer"),
        ({"lr": -0.1}, "lr must be a positive number"),
        ({"lr": "fast"}, "lr must be a number"),
        ({"epochs": 0}, "epochs must be at least 1"),
        ({"strategy": "zero"}, "strategy must be one of ddp, fsdp"),
    ]:
        with pytest.raises(ValueError, match=message):
            TrainConfig.from_mapping(values)


def test_training_pauses_at_epoch_ends_and_checkpoints_and_val_loss_falls(tmp_path):
    config = TrainConfig(epochs=2, steps_per_epoch=20, checkpoint_every=15)
    training = LMTraining(config, StepTimer(tmp_path / "steps", 0))
    boundaries = list(training.run())
    assert [(b.global_step, b.epochs_done, b.epoch_metrics is not None, b.checkpoint_due) for b in boundaries] == [
        (15, 0, False, True),
        (20, 1, True, False),
        (30, 1, False, True),
        (40, 2, True, True),
    ]
    first, second = boundaries[1].epoch_metrics, boundaries[3].epoch_metrics
    assert math.log(VOCAB_SIZE) > first["val_loss"] > second["val_loss"]
    assert first["step_s"] > first["data_s"] > 0 and first["comm_s"] == 0
    assert first["samples_per_s"] == pytest.approx(config.batch_size / first["step_s"])


def test_a_checkpoint_restores_weights_optimizer_and_step_and_rebuilds_the_model(tmp_path):
    config = TrainConfig(epochs=1, steps_per_epoch=3, d_model=16, layers=1)
    training = LMTraining(config, StepTimer(tmp_path / "steps", 0))
    list(training.run())
    training.save(tmp_path)
    assert LMTraining.checkpoint_step(tmp_path) == 3

    resumed = LMTraining(config, StepTimer(tmp_path / "steps", 0, first_step=3))
    resumed.restore(tmp_path)
    assert resumed.global_step == 3
    assert resumed.evaluate() == pytest.approx(training.evaluate())
    assert resumed.optimizer.state_dict()["state"][0]["step"] == 3

    model = read_model(tmp_path)
    tokens = training.language.val[:2, :-1]
    training.model.eval()  # read_model's is in eval mode, which takes PyTorch's fused encoder path
    with torch.no_grad():
        assert torch.allclose(model(tokens), training.model(tokens))
    with pytest.raises(NotAModelCheckpoint, match=r"no model\.json"):
        read_model(tmp_path / "steps")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--strategy", "zero"], "argument --strategy: invalid choice: 'zero'"),
        (["--lr", "-1"], "lr must be a positive number"),
        (["--epochs", "two"], "argument --epochs: invalid int value"),
        (["--num-workers", "0"], "--num-workers must be at least 1"),
    ],
)
def test_trainer_argument_mistakes_exit_2_with_one_line(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and message in err
