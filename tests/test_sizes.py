"""Sizes checked before allocating, crafted folders refused in one line (issue 9)."""

import json

import pytest

from aiayn import sizes
from aiayn.cli import main
from aiayn.config import DecoderLMConfig, TransformerConfig, ViTConfig, encoder_preset, preset
from aiayn.errors import UserError
from tests.builders import run, write_config


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hard")
    assert main(["train", str(write_config(tmp, max_steps=2)), "--out", str(tmp / "m")]) == 0
    return tmp / "m"


def crafted_copy(folder, tmp_path, model=None, **top):
    """A copy of `folder` (checkpoints included) whose config.json has `model` keys and top-level
    keys replaced."""
    crafted = tmp_path / "crafted"
    for f in folder.rglob("*"):
        if f.is_file():
            target = crafted / f.relative_to(folder)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(f.read_bytes())
    meta = json.loads((crafted / "config.json").read_text())
    meta["model"].update(model or {})
    meta.update(top)
    (crafted / "config.json").write_text(json.dumps(meta))
    return crafted


@pytest.mark.parametrize("config", [
    TransformerConfig(vocab_size=300, d_model=32, n_heads=4, d_ff=64, n_layers=2, max_len=50),
    TransformerConfig(vocab_size=300, d_model=32, n_heads=4, d_ff=64, n_encoder_layers=1,
                      n_decoder_layers=3, max_len=50),
    TransformerConfig(vocab_size=300, d_model=32, n_heads=4, d_ff=64, n_encoder_layers=0,
                      n_decoder_layers=2, max_len=50, positions="learned"),
    TransformerConfig(vocab_size=300, d_model=32, n_heads=4, d_ff=64, tgt_vocab_size=200,
                      head_dim=4, value_dim=16, n_layers=3, max_len=50),
    preset("t5-tiny", n_layers=3), preset("t5-tiny", gated_ffn=True, tie_output=False,
                                           scale_output=False, activation="gelu_tanh"),
    preset("bart-tiny", n_encoder_layers=3),
    DecoderLMConfig(vocab_size=300, d_model=32, n_heads=4, d_ff=64, n_layers=3, max_len=40,
                    positions="learned"),
    encoder_preset("bert-small-cpu", n_layers=3, n_labels=5),
    ViTConfig(image_size=32, patch_size=8, d_model=32, n_heads=4, d_ff=64, n_layers=3,
              n_classes=10),
], ids=lambda c: type(c).__name__)
def test_the_meta_count_is_the_real_models_count(config):
    """One counter (the model on the meta device, extended from one and two layers per stack)
    for the memory checks and Table 3: exactly the real model's parameters, and with buffers
    its buffers (a sinusoid table) too."""
    from aiayn.config import EncoderConfig
    from aiayn.models import DecoderLM, EncoderModel, Transformer, VisionTransformer

    model = {TransformerConfig: Transformer, DecoderLMConfig: DecoderLM, EncoderConfig: EncoderModel,
             ViTConfig: VisionTransformer}[type(config)](config)
    params = sum(p.numel() for p in model.parameters())
    assert sizes.count_parameters(config) == params
    assert sizes.count_parameters(config, buffers=True) == \
        params + sum(b.numel() for b in model.buffers())


@pytest.mark.parametrize("override", ["model.d_ff=2000000000", "model.n_layers=100000000",
                                      "model.max_len=1000000000"])
def test_a_huge_training_config_is_refused_before_allocating(tmp_path, capsys, override,
                                                             monkeypatch):
    from aiayn.tasks import seq2seq

    def built(*args, **kwargs):  # the refusal comes before the model is built
        raise AssertionError("the model was built")

    monkeypatch.setattr(seq2seq, "Transformer", built)
    code, out, err = run(capsys, "train", write_config(tmp_path), override, "--out", tmp_path / "m")
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert "parameters need" in err and sizes.SKIP_ENV in err
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize("key, value", [("d_model", 65536), ("n_encoder_layers", 10**8),
                                        ("max_len", 10**11)])  # > any machine's memory
def test_a_crafted_folder_is_refused_before_allocating(folder, tmp_path, capsys, key, value):
    crafted = crafted_copy(folder, tmp_path, {key: value, **({"n_heads": 1} if key == "d_model" else {})})
    code, out, err = run(capsys, "translate", "--model", crafted, "1 2")
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert "parameters need" in err


def test_the_check_can_be_skipped(monkeypatch):
    monkeypatch.setenv(sizes.SKIP_ENV, "1")
    sizes.check_fits(TransformerConfig(d_ff=2_000_000_000), "x", training=True)  # no error
    monkeypatch.delenv(sizes.SKIP_ENV)
    with pytest.raises(UserError, match="parameters need"):
        sizes.check_fits(TransformerConfig(d_ff=2_000_000_000), "x", training=True)


def test_config_sizes_that_do_not_match_the_weights_are_one_line(folder, tmp_path, capsys):
    crafted = crafted_copy(folder, tmp_path, {"d_ff": 48})
    code, out, err = run(capsys, "translate", "--model", crafted, "1 2")
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert "weights do not match the config" in err and "(48" in err and "by the config (and 11 more)" in err


@pytest.mark.parametrize("value", ["oops", 3, ["a"]])
def test_a_folder_whose_experiment_is_not_an_object_is_refused(folder, tmp_path, capsys, value):
    crafted = crafted_copy(folder, tmp_path, experiment=value)
    config = folder.parent / "exp.yaml"  # the folder's own config
    code, out, err = run(capsys, "train", config, "--out", crafted, "--resume")
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert "'experiment' must be an object" in err






def test_a_train_state_naming_weights_outside_the_folder_is_refused(folder, tmp_path, capsys):
    import torch

    crafted = crafted_copy(folder, tmp_path)
    state = torch.load(crafted / "train_state.pt", weights_only=True)
    state["weights"] = "../../../etc/passwd"
    torch.save(state, crafted / "train_state.pt")
    code, out, err = run(capsys, "train", folder.parent / "exp.yaml", "--out", crafted, "--resume")
    last = err.strip().splitlines()[-1]  # after the run's own progress lines
    assert code == 2 and "Traceback" not in err
    assert last.startswith("aiayn: error: ") and "names weights outside the folder" in last


def test_many_thin_layers_are_refused_though_their_weights_are_small():
    """10^7 layers of width 2 are 2.4e8 weights (1 GB) but ~50 KiB of Python objects each."""
    config = DecoderLMConfig(vocab_size=10, d_model=2, n_heads=1, d_ff=2, n_layers=10**7, max_len=4)
    assert sizes.count_parameters(config) * sizes.LOAD_BYTES_PER_PARAM < 2**31
    with pytest.raises(UserError, match="parameters need"):
        sizes.check_fits(config, "x")


def test_check_count_names_the_flag_the_need_and_the_bound(monkeypatch):
    monkeypatch.delenv(sizes.SKIP_ENV, raising=False)
    monkeypatch.setattr(sizes, "available_bytes", lambda device=None: 2**30)
    with pytest.raises(UserError) as e:
        sizes.check_count("--num-samples", 10**9, 1000, "the batch")
    assert str(e.value) == ("--num-samples 1000000000: would need ~931.3 GiB for the batch; at "
                            "most 1,073,741 fit in the 1.0 GiB of memory available (set "
                            f"{sizes.SKIP_ENV}=1 to try anyway)")
    sizes.check_count("--batch-size", 10**9, 1000, "the batch", used=1000)  # 1000 are used
    monkeypatch.setenv(sizes.SKIP_ENV, "1")
    sizes.check_count("--num-samples", 10**9, 1000, "the batch")


def test_a_decoding_row_is_estimated_at_its_real_size_not_its_worst():
    """GPT-2 small continuing a 5-token prompt by 100 tokens: ~20 MB a row (keys and values of
    105 positions in 12 layers, the prompt's logits), so 64 samples fit a laptop."""
    from aiayn.config import lm_preset

    row = sizes.row_bytes(lm_preset("gpt2-small"), new=5, keys=105, kept=100)
    assert 10 * 2**20 < row < 40 * 2**20
