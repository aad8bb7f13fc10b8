"""Attention figures: the plotted values are the model's own weights, one panel per head, a page
per (kind, layer); the `aiayn viz attention` CLI for every model family with attention views.

The tiny model folders built here are reused by tests/viz/test_server*.py (make_*_folder)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from matplotlib.image import AxesImage

from aiayn.cli import main
from aiayn.config import DecoderLMConfig, EncoderConfig, TransformerConfig
from aiayn.data.special import BOS, BOS_TOKEN
from aiayn.data.tokenizer import Tokenizer
from aiayn.folder.weights import save_model
from aiayn.viz.attention import attention_figures, attention_maps, plot_attention
from aiayn.viz.inspect import Inspector

SENTENCES = ["the cat sat on the mat", "a dog ran in the park", "march 5 2024 was a tuesday",
             "der hund lief im park", "die katze sass auf der matte", "am 5. märz 2024"] * 3


def _sharpen(model: torch.nn.Module, scale: float = 4.0) -> None:
    """Random weights give near-uniform attention; larger q/k projections give distinct heads."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("q_proj.weight", "k_proj.weight")):
                p.mul_(scale)


def make_translation_folder(path, seed: int = 0, meta: dict | None = None):
    """A random-weight 2-layer, 2-head Transformer (d_model 16) with a trained BPE tokenizer."""
    from aiayn.models.transformer import Transformer
    tok = Tokenizer.train(SENTENCES, 140, "bpe")
    torch.manual_seed(seed)
    model = Transformer(TransformerConfig(vocab_size=tok.vocab_size, d_model=16, n_heads=2, d_ff=32,
                                          n_layers=2, max_len=40, dropout=0.0)).eval()
    _sharpen(model)
    save_model(path, "transformer", model, meta)
    tok.save(path)
    return path


def make_lm_folder(path, seed: int = 0):
    from aiayn.models.decoder_lm import DecoderLM
    tok = Tokenizer.train(SENTENCES, 60, "char")
    torch.manual_seed(seed)
    model = DecoderLM(DecoderLMConfig(vocab_size=tok.vocab_size, d_model=16, n_heads=2, d_ff=32,
                                      n_layers=2, max_len=48, dropout=0.0)).eval()
    _sharpen(model)
    save_model(path, "decoder_lm", model)
    tok.save(path)
    return path


def make_encoder_folder(path, seed: int = 0):
    from aiayn.models.encoder import EncoderModel
    from aiayn.tasks.text_encoder import TextEncoder
    tok = Tokenizer.train(SENTENCES, 140, "bpe")
    torch.manual_seed(seed)
    model = EncoderModel(EncoderConfig(vocab_size=tok.vocab_size, d_model=16, n_heads=2, d_ff=32,
                                       n_layers=2, max_len=32, dropout=0.0, attn_dropout=0.0))
    TextEncoder(model, tok, {"pad": 0, "cls": 1, "sep": 2}).save(path)
    return path


def make_vit_folder(path, seed: int = 0):
    """A random-weight ViT (16x16 grey images, 4x4 patches -> [CLS] + 16 tokens, 2 heads)."""
    from aiayn.config import vit_preset
    from aiayn.models.vit import VisionTransformer
    from aiayn.tasks.image_classification import ImageClassifier
    torch.manual_seed(seed)
    model = VisionTransformer(vit_preset("tiny", image_size=16)).eval()
    _sharpen(model)
    ImageClassifier(model, ["a", "b", "c"], "L").save(path)
    return path


def _write_png(path, size: int = 16):
    from PIL import Image
    y, x = np.mgrid[:size, :size]
    Image.fromarray(((x + 2 * y) * 255 // (3 * size - 3)).astype(np.uint8), "L").save(path)
    return path


@pytest.fixture(scope="module")
def tr_dir(tmp_path_factory):
    return make_translation_folder(tmp_path_factory.mktemp("tr"))


def _images(fig) -> list[np.ndarray]:
    return [np.asarray(im.get_array()) for ax in fig.axes for im in ax.get_images()
            if isinstance(im, AxesImage)]


def test_translation_figures_plot_the_models_weights(tr_dir):
    insp = Inspector.load(tr_dir)
    result = insp.run("the cat sat on the mat", beam=2)
    tr = insp.obj
    src_ids = tr.tokenizer.encode("the cat sat on the mat")
    assert result.labels["source"] == [tr.tokenizer.id_to_token(i) for i in src_ids]
    assert result.labels["source"] == tr.tokenizer.tokens("the cat sat on the mat")
    out_ids = [tr.tokenizer.token_to_id(t) for t in result.labels["target"][1:]]
    assert result.labels["target"][0] == BOS_TOKEN
    # The oracle: the model run directly (teacher-forced on <s> + the translation).
    _, attn = tr.model(torch.tensor([src_ids]), torch.tensor([[BOS, *out_ids]]), return_attn=True)
    pages = attention_figures(result.maps)
    names = [n for n, _ in pages]
    assert names == [f"{k}-layer{i}" for k in ("encoder", "decoder-self", "cross") for i in (1, 2)]
    kinds = {"encoder": "encoder", "decoder-self": "decoder_self", "cross": "cross"}
    for name, fig in pages:
        kind, layer = name.rsplit("-layer", 1)
        images = _images(fig)
        assert len(images) == 2  # one panel per head
        expected = attn[kinds[kind]][int(layer) - 1][0].detach().numpy()
        for h, img in enumerate(images):
            np.testing.assert_allclose(img, expected[h], atol=1e-6)
        vmaxes = {im.get_clim() for ax in fig.axes for im in ax.get_images()}
        assert len(vmaxes) == 1  # one colour scale shared by the panels
    cross = next(f for n, f in pages if n == "cross-layer1")
    panel = [ax for ax in cross.axes if ax.get_images()][0]
    assert [t.get_text() for t in panel.get_xticklabels()] == result.labels["source"]
    assert [t.get_text() for t in panel.get_yticklabels()] == result.labels["target"]
    assert any(ax.get_label() == "<colorbar>" for ax in cross.axes)


def test_layer_head_and_mean_selection(tr_dir):
    result = Inspector.load(tr_dir).run("a dog ran", beam=1)
    enc = result.maps[0]
    (name, fig), = attention_figures([enc], layer=1, head=1)
    assert name == "encoder-layer2-head2"
    np.testing.assert_allclose(_images(fig)[0], enc.layers[1][1], atol=1e-6)
    (_, fig), = attention_figures([enc], layer=0, mean=True)
    np.testing.assert_allclose(_images(fig)[0], enc.layers[0].mean(0), atol=1e-6)
    with pytest.raises(ValueError, match="head 3 is out of range"):
        plot_attention(enc.layers[0], enc.q_labels, enc.k_labels, heads=[2])


def test_rows_are_distributions_and_decoder_is_causal(tr_dir):
    result = Inspector.load(tr_dir).run("march 5 2024", beam=2)
    for m in result.maps:
        for w in m.layers:
            np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-5)
    dec = next(m for m in result.maps if m.kind == "decoder_self")
    assert np.all(np.triu(dec.layers[0][0], 1) == 0)


def test_lm_and_encoder_families(tmp_path):
    lm = Inspector.load(make_lm_folder(tmp_path / "lm")).run("the cat", max_new_tokens=5)
    assert lm.family == "decoder_lm" and [m.kind for m in lm.maps] == ["self"]
    n = len(lm.labels["tokens"])
    assert lm.labels["tokens"][:8] == [BOS_TOKEN, *list("the cat")] and n <= 1 + 7 + 5
    assert lm.maps[0].layers[0].shape == (2, n, n)
    assert np.all(np.triu(lm.maps[0].layers[1][1], 1) == 0)  # causal
    enc = Inspector.load(make_encoder_folder(tmp_path / "enc")).run("the cat sat")
    assert enc.family == "encoder" and enc.output is None
    assert enc.maps[0].layers[0].shape[1] == len(enc.labels["tokens"])
    assert json.loads(json.dumps(enc.to_json()))["kinds"][0]["kind"] == "self"


def test_attention_maps_checks_labels():
    w = torch.softmax(torch.randn(1, 2, 3, 4), -1)
    with pytest.raises(ValueError, match="needs labels for 'target'"):
        attention_maps({"cross": [w]}, {"source": list("abcd")})
    with pytest.raises(ValueError, match="do not match"):
        attention_maps({"cross": [w]}, {"source": list("abc"), "target": list("abc")})


@pytest.mark.slow
def test_cli_attention_writes_pages(tr_dir, tmp_path, capsys):
    out = tmp_path / "figs"
    assert main(["viz", "attention", "--model", str(tr_dir), "the cat sat", "--out", str(out),
                 "--format", "both", "--beam", "1"]) == 0
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert pngs == sorted(f"attention-{k}-layer{i}.png" for k in ("encoder", "decoder-self", "cross")
                          for i in (1, 2))
    assert len(list(out.glob("*.svg"))) == 6
    assert main(["viz", "attention", "--model", str(tr_dir), "the cat", "--out", str(out),
                 "--layer", "2", "--head", "1", "--kind", "cross", "--name", "one"]) == 0
    assert [p.name for p in out.glob("one-*")] == ["one-cross-layer2-head1.png"]


@pytest.mark.parametrize("argv, message", [
    (["--layer", "3"], "--layer 3: the model has 2 layers"),
    (["--head", "0"], "--head 0: the model has 2 heads"),
    (["--kind", "self"], "this model has encoder, decoder_self, cross"),
])
def test_cli_attention_bad_options(tr_dir, tmp_path, capsys, argv, message):
    assert main(["viz", "attention", "--model", str(tr_dir), "x y", "--out", str(tmp_path),
                 *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("aiayn: error:") and message in err and "Traceback" not in err


def test_cli_attention_missing_folder_and_empty_text(tr_dir, tmp_path, capsys):
    assert main(["viz", "attention", "--model", str(tmp_path / "nope"), "x"]) == 2
    assert "model folder not found" in capsys.readouterr().err
    assert main(["viz", "attention", "--model", str(tr_dir), "  "]) == 2
    assert "empty" in capsys.readouterr().err


@pytest.mark.slow
def test_vit_family_labels_patches_and_draws_cls_on_the_image(tmp_path, capsys):
    from aiayn.viz.patches import plot_patch_attention
    folder, png = make_vit_folder(tmp_path / "vit"), _write_png(tmp_path / "in.png")
    insp = Inspector.load(folder)
    result = insp.run(str(png))
    assert result.family == "vit" and result.output.split(" (p=")[0] in ("a", "b", "c")
    labels = result.labels["tokens"]
    assert labels[:3] == ["[CLS]", "r1c1", "r1c2"] and labels[-1] == "r4c4" and len(labels) == 17
    # The oracle: the model's own weights for the same pixels.
    from aiayn.data.images import load_image
    image = load_image(png, "L", 16)
    with torch.no_grad():
        _, weights = insp.obj.model.features(image[None], return_attn=True)
    np.testing.assert_allclose(result.maps[0].layers[1], weights[1][0].numpy(), atol=1e-6)
    np.testing.assert_allclose(result.image, image[0].numpy())
    fig = plot_patch_attention(result.image, result.maps[0], 1, result.patch_size)
    heads = [ax for ax in fig.axes if ax.get_label().startswith("head")]
    assert len(heads) == 2
    for h, ax in enumerate(heads):  # [CLS] row, patch keys, laid out row-major on the 4x4 grid
        overlay = np.asarray(ax.get_images()[1].get_array())
        np.testing.assert_allclose(overlay, weights[1][0, h, 0, 1:].reshape(4, 4).numpy(), atol=1e-6)
    out = tmp_path / "figs"
    assert main(["viz", "attention", "--model", str(folder), str(png), "--out", str(out)]) == 0
    assert sorted(p.name for p in out.glob("*.png")) == sorted(
        f"attention-{k}-layer{i}.png" for k in ("self", "cls-patches") for i in (1, 2))
    assert "output: " in capsys.readouterr().out
    assert main(["viz", "attention", "--model", str(folder), str(tmp_path / "no.png")]) == 2
    assert "image file not found" in capsys.readouterr().err
