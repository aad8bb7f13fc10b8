"""`aiayn lm train / lm eval / generate` end to end on tiny models: learning, resume, errors."""

import json

import pytest
import torch
from safetensors.torch import load_file

import aiayn
from aiayn.cli import build_parser, main
from aiayn.tasks.language_model import LanguageModel

FOX = "the quick brown fox jumps over the lazy dog\n"
QUIET = ["train.tensorboard=false", "train.progress=false", "train.eval_every=0"]




def _train(tmp_path, out, *extra, text=None):
    if text is None:
        text = tmp_path / "fox.txt"
        text.write_text(FOX * 300, encoding="utf-8")
    args = ["lm", "train", "tiny", "model.d_model=32", "model.d_ff=64", "data.tokenizer=char",
            "data.vocab_size=64", "train.max_tokens=1536", "train.lr=3e-3",
            "train.warmup_steps=20", *QUIET, *extra, "--text", str(text), "--out", str(out)]
    return main(args)


@pytest.mark.slow
def test_learns_a_sentence_then_generates_and_evaluates_from_the_cli(tmp_path, capsys):
    out = tmp_path / "fox"
    assert _train(tmp_path, out, "train.max_steps=300") == 0
    capsys.readouterr()
    # Stated accuracy: the greedy continuation is the training text, character for character,
    # for 50 characters (past the end of a sentence into the next one).
    assert main(["generate", "--model", str(out), "--prompt", "the quick", "--temperature", "0",
                 "--max-new-tokens", "50"]) == 0
    printed = capsys.readouterr().out
    assert printed == (FOX * 3)[:59] + "\n"
    assert main(["lm", "eval", "--model", str(out)]) == 0
    line = capsys.readouterr().out
    bpb = float(line.split(" bits/byte")[0].rsplit(" ", 1)[-1])
    assert bpb < 0.3, line  # a deterministic text: far below the 4.5 bits of 23 characters
    lm = aiayn.load(out)
    assert isinstance(lm, LanguageModel)
    assert lm.generate("the lazy", 10, temperature=0) == " dog\nthe q"


def test_resume_continues_exactly_where_it_stopped(tmp_path):
    text = tmp_path / "fox.txt"
    text.write_text(FOX * 40, encoding="utf-8")
    steps = ["train.max_steps=6", "train.save_every=3", "train.seed=1"]
    assert _train(tmp_path, tmp_path / "once", *steps, text=text) == 0
    assert _train(tmp_path, tmp_path / "twice", "train.max_steps=3", "train.seed=1",
                  text=text) == 0
    assert _train(tmp_path, tmp_path / "twice", *steps, "--resume", text=text) == 0
    a = load_file(str(tmp_path / "once" / "model.safetensors"))
    b = load_file(str(tmp_path / "twice" / "model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    meta = json.loads((tmp_path / "twice" / "config.json").read_text())
    assert meta["family"] == "decoder_lm" and meta["experiment"]["data"]["tokenizer"] == "char"


def test_config_file_with_sections_and_overrides(tmp_path, capsys):
    (tmp_path / "fox.txt").write_text(FOX * 40, encoding="utf-8")
    cfg = tmp_path / "lm.yaml"
    cfg.write_text("out: %s\nmodel:\n  preset: tiny\n  n_layers: 1\ndata:\n  tokenizer: char\n"
                   "  vocab_size: 40\n  block_len: 32\ntrain:\n  max_steps: 2\n  lr: 1.0e-3\n"
                   % (tmp_path / "m"), encoding="utf-8")
    assert main(["lm", "train", str(cfg), *QUIET, "--text", str(tmp_path / "fox.txt")]) == 0
    meta = json.loads((tmp_path / "m" / "config.json").read_text())
    assert meta["model"]["n_layers"] == 1 and meta["model"]["vocab_size"] == 28 + 4  # a pangram: 26 letters, space, newline
    assert meta["experiment"]["data"]["block_len"] == 32
    assert meta["example"] == "the quick brown fox"  # the explorer's opening prompt
    assert "trained 2 steps" in capsys.readouterr().out


@pytest.mark.parametrize("args, message", [
    (["lm", "train", "tiny", "model.n_layerz=2", "--text", "x", "--out", "o"], "n_layerz"),
    (["lm", "train", "tiny", "data.block_len=0", "--text", "x", "--out", "o"], "block_len=0"),
    (["lm", "train", "tiny", "--text", "missing.txt", "--out", "o"], "missing.txt: no such file"),
    (["lm", "train", "tiny", "--out", "o"], "no training text"),
    (["lm", "train", "nope.yaml", "--text", "x", "--out", "o"], "nope.yaml: config file not found"),
    (["generate", "--model", "no-such-dir", "--prompt", "x"], "no-such-dir: model folder not found"),
])
def test_bad_input_is_one_line_exit_2(args, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("aiayn: error: ") and message in err and err.count("\n") == 1


def test_existing_run_is_not_overwritten(tmp_path, capsys):
    (tmp_path / "fox.txt").write_text(FOX * 40, encoding="utf-8")
    assert _train(tmp_path, tmp_path / "m", "train.max_steps=1", text=tmp_path / "fox.txt") == 0
    assert _train(tmp_path, tmp_path / "m", "train.max_steps=1", text=tmp_path / "fox.txt") == 2
    assert "--resume" in capsys.readouterr().err
    assert _train(tmp_path, tmp_path / "m", "train.max_steps=2", "data.vocab_size=50",
                  "--resume", text=tmp_path / "fox.txt") == 2
    assert "data.vocab_size=50 differs from the run" in capsys.readouterr().err


def test_python_api_trains_saves_and_loads(tmp_path):
    from aiayn.tasks.language_model import experiment, train

    text = tmp_path / "fox.txt"
    text.write_text(FOX * 40, encoding="utf-8")
    exp = experiment({"model": {"preset": "tiny", "positions": "sinusoidal"},
                      "data": {"tokenizer": "char", "vocab_size": 64, "block_len": 32},
                      "train": {"lr_schedule": "constant", "lr": 1e-3, "warmup_steps": 2,
                                "max_steps": 3, "max_tokens": 512, "tensorboard": False,
                                "progress": False}})
    result = train(exp, out=tmp_path / "m", say=lambda s: None, texts=[text])
    assert result.step == 3 and "valid_loss" in result.metrics and result.folder == tmp_path / "m"
    lm = LanguageModel.load(tmp_path / "m")
    assert lm.model.config.positions == "sinusoidal" and lm.model.config.vocab_size == 32
    assert isinstance(lm.generate("the", 5, temperature=0.8, top_p=0.9, seed=0), str)


def test_python_api_uses_the_same_defaults_as_the_cli(tmp_path):
    """An experiment built in Python gets the language model's recipe (cosine, AdamW, no label
    smoothing: the built-in config lm.yaml), not TrainConfig's translation defaults, exactly as
    `aiayn lm train` does; a config's train section is layered over the recipe's."""
    import yaml

    from aiayn.config import TrainConfig
    from aiayn.config.experiment import CONFIG_DIR
    from aiayn.tasks.language_model import experiment

    recipe = yaml.safe_load((CONFIG_DIR / "lm.yaml").read_text(encoding="utf-8"))["train"]
    assert experiment().train == TrainConfig.from_dict(recipe)
    assert experiment({"train": {"max_steps": 7}}).train == \
        TrainConfig.from_dict({**recipe, "max_steps": 7})
    exp = experiment("lm-char")
    assert exp.train.lr_schedule == "cosine" and exp.train.label_smoothing == 0.0
    text = tmp_path / "fox.txt"
    text.write_text(FOX * 40, encoding="utf-8")
    common = ["train.max_steps=1", "train.progress=false", "train.tensorboard=false",
              "data.block_len=16", "model.n_layers=1", "model.d_model=32", "model.n_heads=2",
              "model.d_ff=32"]
    assert main(["lm", "train", "lm-char", *common, "--text", str(text),
                 "--out", str(tmp_path / "cli")]) == 0
    from aiayn.tasks.language_model import train
    train(experiment("lm-char", common), texts=[str(text)], out=tmp_path / "py",
          say=lambda s: None)
    from aiayn.folder.checkpoint import load_train_state

    saved = [json.loads((tmp_path / d / "config.json").read_text())["experiment"]
             for d in ("cli", "py")]
    train = [load_train_state(tmp_path / d)["train_config"] for d in ("cli", "py")]
    assert saved[0] == saved[1] and train[0] == train[1]
    assert train[0]["lr_schedule"] == "cosine" and train[0]["weight_decay"] == 0.1


def test_aiayn_train_trains_the_task_its_config_names(tmp_path, capsys):
    """`aiayn train lm-char ...` trains a language model exactly as `aiayn lm train lm-char ...`
    does, with the common flags (--out, overrides). A flag of `aiayn lm train` alone (--text) is
    refused by `aiayn train` with the command that has it, and a run that would need one says so."""
    from aiayn.folder.checkpoint import load_train_state

    args = ["lm-char", "data.corpus=python-stdlib", "data.max_bytes=20000", "data.eval_tokens=2000",
            "data.block_len=32", "model.n_layers=1", "model.d_model=32", "model.n_heads=2",
            "model.d_ff=32", "train.max_steps=2", "train.max_tokens=256", *QUIET]
    assert main(["train", *args, "--out", str(tmp_path / "train")]) == 0
    assert "generate with: aiayn generate" in capsys.readouterr().out
    assert main(["lm", "train", *args, "--out", str(tmp_path / "lm")]) == 0
    saved = [(json.loads((tmp_path / d / "config.json").read_text())["experiment"],
              load_train_state(tmp_path / d)["train_config"]) for d in ("train", "lm")]
    assert saved[0] == saved[1] and saved[0][1]["max_steps"] == 2
    assert isinstance(aiayn.load(tmp_path / "train"), LanguageModel)
    capsys.readouterr()

    text = tmp_path / "fox.txt"
    text.write_text(FOX, encoding="utf-8")
    assert main(["train", "lm-char", "--text", str(text), "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "--text is an option of `aiayn lm train`" in err and "aiayn lm train lm-char" in err
    assert main(["train", "lm-char", "--out", str(tmp_path / "y")]) == 2
    err = capsys.readouterr().err
    assert "no training text" in err and "`aiayn lm train`" in err and err.count("\n") == 1
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


@pytest.mark.parametrize("name", ["lm-stdlib", "lm-char"])
def test_shipped_configs_are_valid(name):
    from aiayn.tasks.language_model import experiment

    exp = experiment(name, data={"corpus": None})
    cfg = exp.model_config(vocab_size=256, pad_id=0)
    assert cfg.norm_first and cfg.positions == "learned" and not cfg.scale_embeddings
    assert (exp.data.block_len or cfg.max_len) <= cfg.max_len and exp.train.label_smoothing == 0.0


def test_overrides_may_follow_the_text_files(tmp_path, capsys):
    """`--text FILE... key=value`: the override is not taken for a file name."""
    text = tmp_path / "fox.txt"
    text.write_text(FOX * 40, encoding="utf-8")
    assert main(["lm", "train", "tiny", "data.tokenizer=char", "data.vocab_size=64",
                 "data.block_len=16", "--text", str(text), "train.max_steps=2",
                 "train.progress=false", "train.tensorboard=false",
                 "--out", str(tmp_path / "m")]) == 0
    assert "trained 2 steps" in capsys.readouterr().out


def test_generate_samples_like_nanogpt_by_default():
    args = build_parser().parse_args(["generate", "--model", "m"])
    assert (args.temperature, args.top_k) == (0.8, 200)

