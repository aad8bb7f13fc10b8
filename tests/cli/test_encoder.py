"""`aiayn classify train | predict | eval`, `aiayn import hf-bert`, `aiayn embed`, the Python API."""

import io
import json
import random

import pytest
import torch

import aiayn
from aiayn.cli import main
from aiayn.tasks.text_encoder import TextEncoder

transformers = pytest.importorskip("transformers")

QUIET = ["train.progress=false", "train.tensorboard=false", "train.warmup_steps=10", "train.threads=1",
         "train.log_every=10"]
RED, BLUE = ("apple", "cherry", "ruby", "tomato"), ("sky", "ocean", "sapphire", "denim")
FILLER = "the a small big old new my your this that one thing here there is was".split()


def _examples(n: int, seed: int) -> list[tuple[str, str]]:
    """A learnable task: the label is the colour of the one coloured word among filler words."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        label = rng.choice(("red", "blue"))
        words = rng.sample(FILLER, rng.randint(2, 6))
        words.insert(rng.randint(0, len(words)), rng.choice(RED if label == "red" else BLUE))
        out.append((" ".join(words), label))
    return out


def _write_tsv(path, examples):
    path.write_text("".join(f"{t}\t{y}\n" for t, y in examples), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("classify")
    train = _write_tsv(root / "train.tsv", _examples(400, 0))
    valid = _write_tsv(root / "valid.tsv", _examples(60, 1))
    out = root / "model"
    argv = ["classify", "train", "tiny", *QUIET, "model.d_model=32", "model.d_ff=64",
            "data.vocab_size=200", "data.mlm_steps=40", "train.max_steps=150", "train.eval_every=50",
            "train.lr=3e-3", "--train", str(train), "--valid", str(valid), "--out", str(out)]
    assert main(argv) == 0
    return root, out


def test_training_learns_the_task(trained):
    root, out = trained
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r for r in rows if "valid_accuracy" in r][-1]["valid_accuracy"] >= 0.95
    meta = json.loads((out / "config.json").read_text())
    assert meta["family"] == "encoder" and meta["labels"] == ["blue", "red"]
    assert meta["model"]["n_labels"] == 2 and meta["special_ids"]["mask"] == meta["model"]["vocab_size"] - 1
    assert meta["example"] == (root / "valid.tsv").read_text().splitlines()[0].split("\t")[0]


def test_validation_scores_the_weights_the_folder_holds(tmp_path, monkeypatch):
    """With the running average on (the default), validation scores the averaged weights that
    each checkpoint holds, not the run's own (it scored the latter before)."""
    from safetensors.torch import load_file

    seen = []
    original = TextEncoder.predict_proba

    def spy(self, texts, batch_size=64):
        seen.append({k: v.detach().cpu().clone() for k, v in self.model.state_dict().items()})
        return original(self, texts, batch_size)

    monkeypatch.setattr(TextEncoder, "predict_proba", spy)
    train = _write_tsv(tmp_path / "train.tsv", _examples(100, 0))
    valid = _write_tsv(tmp_path / "valid.tsv", _examples(20, 1))
    argv = ["classify", "train", "tiny", *QUIET, "model.d_model=32", "model.d_ff=64",
            "data.vocab_size=200", "data.mlm_steps=0", "train.max_steps=20", "train.eval_every=10",
            "train.save_every=10", "train.keep_last_n=10", "train.lr=3e-3", "--train", str(train),
            "--valid", str(valid), "--out", str(tmp_path / "m")]
    assert main(argv) == 0
    held = load_file(str(tmp_path / "m" / "checkpoints" / "step_00000010.safetensors"))
    assert len(seen) == 2 and held.keys() <= seen[0].keys()
    for name, tensor in held.items():
        assert torch.equal(seen[0][name].to(tensor.dtype), tensor), name


def test_masked_lm_pretraining_stage(trained):
    _, out = trained
    pre = out / "pretrain"
    rows = [json.loads(line) for line in (pre / "metrics.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in rows if "loss" in r]
    assert rows[-1]["step"] == 40 and losses[-1] < losses[0]  # the masked LM learned something
    enc = TextEncoder.load(pre)
    assert enc.model.config.mlm_head and enc.model.config.n_labels == 0
    ids = enc.batch(["the apple is here"])
    assert enc.model.mlm_logits(ids).shape == (1, ids.shape[1], enc.model.config.vocab_size)


def test_predict_args_stdin_and_json(trained, capsys, monkeypatch):
    _, out = trained
    capsys.readouterr()
    assert main(["classify", "predict", "--model", str(out), "my ocean is big", "the old tomato"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("\t")[0] for line in lines] == ["blue", "red"]
    assert lines[0].split("\t")[2] == "my ocean is big"
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"a sapphire thing\n\nruby here\n")))
    assert main(["classify", "predict", "--model", str(out), "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["text"], r["label"]) for r in rows] == [("a sapphire thing", "blue"), ("ruby here", "red")]


def test_eval_and_python_api(trained, capsys):
    root, out = trained
    test = _write_tsv(root / "test.tsv", _examples(50, 2))
    capsys.readouterr()
    assert main(["classify", "eval", "--model", str(out), "--test", str(test)]) == 0
    line = capsys.readouterr().out
    enc = aiayn.load(out)
    assert isinstance(enc, TextEncoder)
    accuracy = enc.evaluate(_examples(50, 2))
    assert line.startswith(f"accuracy {100 * accuracy:.2f}%") and accuracy >= 0.9
    assert enc.embed(["my sky", "the sky"]).shape == (2, 32)


def test_classify_errors(trained, tmp_path, capsys, monkeypatch):
    root, out = trained
    monkeypatch.chdir(tmp_path)
    bad_label = _write_tsv(tmp_path / "v.tsv", [("my sky", "green")])
    cases = [
        (["classify", "train", "--valid", str(bad_label), "--out", "X"], "--valid goes with --train"),
        (["classify", "train", "--train", str(root / "train.tsv"), "--valid", str(bad_label), "--out", "X"],
         "label 'green' never occurs"),
        (["classify", "train", "model.vocab_size=5", "--train", str(root / "train.tsv"), "--out", "X"],
         "model.vocab_size: set by the data"),
        (["classify", "train", "model.init=somewhere", "model.n_layers=3", "--train",
          str(root / "train.tsv"), "--out", "X"], "drop model.n_layers"),
        (["classify", "eval", "--model", str(out)], "not trained on a built-in corpus"),
        (["classify", "eval", "--model", str(out), "--test", str(bad_label)], "label 'green' is not one"),
        (["classify", "train", "--train", str(root / "train.tsv"), "--out", str(out)], "already exists"),
    ]
    for argv, message in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, (argv, err)
    assert not (tmp_path / "X").exists()


# -- importing a BERT folder ------------------------------------------------------------------

def _bert_folder(path, seed=0):
    """A small random BERT saved by transformers, with a WordPiece tokenizer.json."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

    words = sorted(set(RED + BLUE + tuple(FILLER)))
    vocab = {tok: i for i, tok in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words])}
    torch.manual_seed(seed)
    cfg = transformers.BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=2,
                                  num_attention_heads=2, intermediate_size=32,
                                  max_position_embeddings=32)
    hf = transformers.BertModel(cfg).eval()
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if "LayerNorm" not in name:
                p.normal_(0.0, 0.3)
    hf.save_pretrained(path)
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    tok.save(str(path / "tokenizer.json"))
    return hf, tok


def test_import_embed_and_fine_tune(tmp_path, capsys):
    hf, tok = _bert_folder(tmp_path / "bert")
    out = tmp_path / "imported"
    assert main(["import", "hf-bert", str(tmp_path / "bert"), "--out", str(out)]) == 0
    texts = ["The Apple is here", "my ocean", "zebra"]  # upper case and an unknown word
    enc = TextEncoder.load(out)
    assert [enc.token_ids(t) for t in texts] == [e.ids for e in tok.encode_batch(texts)]
    ids = enc.batch(texts)
    with torch.no_grad():
        hidden = hf(input_ids=ids, attention_mask=(ids != 0).long()).last_hidden_state
    assert (enc.model(ids) - hidden).abs().max() <= 1e-4
    capsys.readouterr()
    assert main(["embed", "--model", str(out), "--json", *texts]) == 0
    got = torch.tensor([row["embedding"] for row in json.loads(capsys.readouterr().out)])
    m = (ids != 0).float()[..., None]
    expected = torch.nn.functional.normalize((hidden * m).sum(1) / m.sum(1), dim=-1)
    assert torch.allclose(got, expected, atol=1e-5)
    assert main(["embed", "--model", str(out), "--similarity", *texts]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("1.0000 ") and first.endswith("\tThe Apple is here")
    # fine-tune the imported encoder as a classifier (model.init), lr defaults to 5e-5
    train = _write_tsv(tmp_path / "train.tsv", _examples(64, 3))
    tuned = tmp_path / "tuned"
    assert main(["classify", "train", *QUIET, "model.init=" + str(out), "train.max_steps=5",
                 "--train", str(train), "--out", str(tuned)]) == 0
    meta = json.loads((tuned / "config.json").read_text())
    assert meta["special_ids"]["cls"] == 2 and meta["model"]["n_labels"] == 2
    assert torch.load(tuned / "train_state.pt", weights_only=True)["train_config"]["lr"] == 5e-5
    capsys.readouterr()
    assert main(["classify", "train", *QUIET, "model.init=" + str(out), "data.mlm_steps=5",
                 "--train", str(train), "--out", str(tmp_path / "no-mlm")]) == 2
    assert "has no masked-LM head" in capsys.readouterr().err


def test_resume_continues_fine_tuning(trained, tmp_path):
    import shutil

    root, out = trained
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    argv = ["classify", "train", "tiny", *QUIET, "model.d_model=32", "model.d_ff=64",
            "data.vocab_size=200", "data.mlm_steps=40", "train.max_steps=170", "train.eval_every=50",
            "train.lr=3e-3", "--train", str(root / "train.tsv"), "--valid", str(root / "valid.tsv"),
            "--out", str(copy), "--resume"]
    assert main(argv) == 0
    assert torch.load(copy / "train_state.pt", weights_only=True)["step"] == 170
    assert TextEncoder.load(copy).labels == ["blue", "red"]


def test_import_errors(tmp_path, capsys):
    (tmp_path / "pickled").mkdir()
    (tmp_path / "pickled" / "config.json").write_text("{}")
    (tmp_path / "pickled" / "pytorch_model.bin").write_bytes(b"pickle")
    cases = [
        (["import", "hf-bert", str(tmp_path / "nothing"), "--out", str(tmp_path / "o")], "folder not found"),
        (["import", "hf-bert", str(tmp_path / "pickled"), "--out", str(tmp_path / "o")], "safetensors only"),
    ]
    _bert_folder(tmp_path / "notok")
    (tmp_path / "notok" / "tokenizer.json").unlink()
    cases.append((["import", "hf-bert", str(tmp_path / "notok"), "--out", str(tmp_path / "o")],
                  "tokenizer.json: not found"))
    capsys.readouterr()  # transformers' save progress bar
    for argv, message in cases:
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "o").exists()


def test_import_hf_vit(tmp_path):
    torch.manual_seed(0)
    cfg = transformers.ViTConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                 intermediate_size=32, image_size=8, patch_size=4, num_labels=3)
    hf = transformers.ViTForImageClassification(cfg).eval()
    hf.save_pretrained(tmp_path / "vit")
    assert main(["import", "hf-vit", str(tmp_path / "vit"), "--out", str(tmp_path / "o")]) == 0
    clf = aiayn.load(tmp_path / "o")
    images = torch.rand(2, 3, 8, 8)
    with torch.no_grad():
        assert (clf.model(images) - hf(pixel_values=images).logits).abs().max() <= 1e-4
    assert clf.mode == "RGB" and clf.classes == ["0", "1", "2"]


@pytest.mark.parametrize("name", ["bert-gettext-origin", "bert-minilm-gettext-origin"])
def test_config_files_are_valid(name):
    from aiayn.tasks.text_classification import experiment

    exp = experiment(name)
    if "init" not in exp.model:
        cfg = exp.model_config(vocab_size=100, pad_id=0, n_labels=0)
        assert cfg.d_model == 128
        assert exp.train.lr == experiment(None, data={"corpus": "gettext-origin"}).train.lr
    else:  # fine-tuning a pretrained encoder starts from BERT's lower peak lr
        assert exp.train.lr == 5e-5 and exp.train.lr_schedule == "cosine"


def test_python_api_uses_the_same_defaults_as_the_cli():
    """Without a config, the classifier's recipe (the built-in config classify.yaml); fine-tuning
    a pretrained encoder (model.init) lowers its peak lr to the family table's, unless the config
    sets one."""
    import yaml

    from aiayn.config import TrainConfig
    from aiayn.config.experiment import CONFIG_DIR
    from aiayn.tasks.text_classification import experiment

    recipe = yaml.safe_load((CONFIG_DIR / "classify.yaml").read_text(encoding="utf-8"))["train"]
    data = {"corpus": "gettext-origin"}
    exp = experiment(None, data=data)
    assert exp.train == TrainConfig.from_dict(recipe)
    assert exp.train.lr_schedule == "cosine" and exp.train.label_smoothing == 0.0
    tuned = experiment(None, ["model.init=minilm"], data=data).train
    assert tuned == TrainConfig.from_dict({**recipe, "lr": 5e-5})
    assert experiment({"model": {"init": "minilm"}, "train": {"max_steps": 9}}, data=data).train \
        == TrainConfig.from_dict({**recipe, "lr": 5e-5, "max_steps": 9})
    assert experiment(None, ["model.init=minilm", "train.lr=2e-5"], data=data).train.lr == 2e-5
