"""The metrics log: TensorBoard scalars grouped into train/ and valid/."""


def test_tensorboard_scalars_are_grouped_into_train_and_valid(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from aiayn.training.metrics import MetricsLog

    log = MetricsLog(tmp_path, tensorboard=True)
    log.log(5, {"loss": 2.0, "lr": 1e-3, "nll": 1.5})
    log.log(5, {"valid_loss": 2.5, "valid_bleu": 12.0})
    log.close()
    events = EventAccumulator(str(tmp_path / "tb"))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert tags == {"train/loss", "train/lr", "train/nll", "valid/loss", "valid/bleu"}
    assert events.Scalars("valid/bleu")[0].value == 12.0

