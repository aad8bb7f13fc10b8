"""torch.compile: every family's forward compiles to one graph (no graph break), and
train.compile=true trains the model eager training trains."""

import json

import pytest
import torch

from aiayn import DecoderLM, Transformer, preset
from aiayn.cli import main
from aiayn.config import DecoderLMConfig, EncoderConfig, ViTConfig
from aiayn.models.encoder import EncoderModel
from aiayn.models.vit import VisionTransformer
from tests.builders import write_config

pytestmark = pytest.mark.slow


def padded(rows, cols, pad_from):
    ids = torch.randint(3, 50, (rows, cols), generator=torch.Generator().manual_seed(0))
    ids[0, pad_from:] = 0  # padding: the attention masks have rows of both kinds
    return ids


def graph_breaks(model, *inputs):
    torch._dynamo.reset()
    explained = torch._dynamo.explain(model)(*inputs)
    return explained.graph_break_count, [b.reason for b in explained.break_reasons]


@pytest.mark.parametrize("family", ["transformer", "decoder_lm", "encoder", "vit"])
def test_forward_has_no_graph_break(family):
    torch.manual_seed(0)
    if family == "transformer":
        model, inputs = Transformer(preset("tiny")), (padded(3, 9, 5), padded(3, 7, 4))
    elif family == "decoder_lm":
        model, inputs = DecoderLM(DecoderLMConfig.preset("tiny")), (padded(3, 9, 9),)
    elif family == "encoder":
        model = EncoderModel(EncoderConfig.preset("tiny", n_labels=2))
        inputs = (padded(3, 9, 5),)
    else:
        model, inputs = VisionTransformer(ViTConfig.preset("tiny")), (torch.rand(2, 1, 8, 8),)
    model.train()
    assert graph_breaks(model, *inputs) == (0, [])


def test_train_compile_trains_what_eager_training_trains(tmp_path):
    config = write_config(tmp_path, max_steps=8, save_every=0, log_every=1)
    common = ["train", str(config), "model.dropout=0", "train.precision=fp32"]
    assert main([*common, "train.compile=true", "--out", str(tmp_path / "compiled")]) == 0
    assert main([*common, "--out", str(tmp_path / "eager")]) == 0

    def losses(folder):
        rows = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
        return [r["loss"] for r in rows if "loss" in r], [r for r in rows if "valid_loss" in r][-1]

    (compiled, valid_c), (eager, valid_e) = losses(tmp_path / "compiled"), losses(tmp_path / "eager")
    assert len(compiled) == len(eager) == 8
    assert compiled == pytest.approx(eager, rel=1e-4)
    assert valid_c["valid_loss"] == pytest.approx(valid_e["valid_loss"], rel=1e-4)
    meta = json.loads((tmp_path / "compiled" / "config.json").read_text())
    assert meta["experiment"]["train"]["compile"] is True
