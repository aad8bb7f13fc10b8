"""The relative-bias figure: it plots the model's own learned table and the bias the model adds
at each offset (nn/relative_position.py); `aiayn viz relative-bias` writes it for a model folder
and refuses, in one line, a model without one."""

from __future__ import annotations

import numpy as np
import torch

from aiayn import Transformer, preset
from aiayn.cli import main
from aiayn.folder.families import TRANSLATION
from aiayn.folder.weights import save_model
from aiayn.viz.relative_position import bias_by_offset, plot_relative_bias


def _t5_tiny() -> Transformer:
    torch.manual_seed(0)
    return Transformer(preset("t5-small", d_model=16, n_heads=2, d_ff=32, n_layers=2,
                              vocab_size=50, relative_attention_num_buckets=8,
                              relative_attention_max_distance=12)).eval()


def test_the_figure_plots_the_learned_table_and_the_bias_by_offset():
    model = _t5_tiny()
    fig = plot_relative_bias(model, max_offset=20)
    tables = [ax.get_images()[0].get_array() for ax in fig.axes if ax.get_images()]
    assert len(tables) == 2  # encoder, decoder
    np.testing.assert_allclose(np.asarray(tables[0]),
                               model.encoder.relative_bias.weight.detach().numpy().T)
    offsets, values = bias_by_offset(model.encoder.relative_bias, 20)
    assert offsets[0] == -20 and offsets[-1] == 20 and values.shape == (2, 41)
    # the bias at offset k is the table's value at bucket(k); far offsets share one bucket
    full = model.encoder.relative_bias(41, 41)[0, :, 20].detach().numpy()  # query at 20
    np.testing.assert_allclose(values, full)
    assert np.allclose(values[:, -1], values[:, -2])
    causal, _ = bias_by_offset(model.decoder.relative_bias, 20)
    assert causal[-1] == 0  # a decoder's keys are never after its query


def test_cli_writes_the_figure_and_refuses_a_model_without_a_relative_bias(tmp_path, capsys):
    save_model(tmp_path / "t5", TRANSLATION, _t5_tiny(), {"task": "translation"})
    assert main(["viz", "relative-bias", "--model", str(tmp_path / "t5"), "--out",
                 str(tmp_path / "fig")]) == 0
    assert (tmp_path / "fig" / "relative-bias.png").is_file()
    torch.manual_seed(0)
    save_model(tmp_path / "paper", TRANSLATION, Transformer(preset("tiny")),
               {"task": "translation"})
    capsys.readouterr()
    assert main(["viz", "relative-bias", "--model", str(tmp_path / "paper"), "--out",
                 str(tmp_path / "fig2")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no relative position bias" in err, err
