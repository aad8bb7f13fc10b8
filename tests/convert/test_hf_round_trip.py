"""HF -> aiayn -> HF is an identity: `aiayn import hf-*` then `aiayn export hf` gives back the
folder transformers wrote (convert/hf_original.py): every config.json key the original set, with
its value; every tokenizer / generation / preprocessor file byte for byte (so the same token ids);
and weights that compute the original's logits in float64. T5 and Marian, whose ids the import
moves onto aiayn's special ids, get their vocabulary rows back at the original ids, also after the
aiayn model changed (as fine-tuning changes it)."""

import json

import pytest
import torch

import aiayn
from aiayn.cli import main
from aiayn.convert.hf_original import KEPT_FILES
from tests.convert.test_hf_bart import hf_bart_folder  # noqa: F401 (a fixture)
from tests.convert.test_hf_export import hf_gpt2_folder, opus_mt_folder  # noqa: F401 (fixtures)
from tests.convert.test_hf_t5 import (  # noqa: F401 (fixtures)
    SENTENCES,
    _t5_id,
    hf_t5_v10_folder,
    hf_t5_v11_folder,
)
from tests.parity import assert_same_function

transformers = pytest.importorskip("transformers")
WEIGHTS = "model.safetensors"


def round_trip(kind: str, original, tmp_path):
    """`aiayn import KIND original` then `aiayn export hf`: (the aiayn folder, the HF folder)."""
    mt, back = tmp_path / "mt", tmp_path / "back"
    assert main(["import", kind, str(original), "--out", str(mt)]) == 0
    assert main(["export", "hf", "--model", str(mt), "--out", str(back)]) == 0
    return mt, back


def assert_gives_back(original, back, changed=()):
    """`back` holds the files of `original`: config.json's every key with its value (but those
    named in `changed`), every other file but the weights byte for byte, and no file more than
    an aiayn note in config.json."""
    ours = json.loads((back / "config.json").read_text())
    theirs = json.loads((original / "config.json").read_text())
    for key, value in theirs.items():
        if key not in changed:
            assert ours.get(key, "absent") == value, key
    assert set(ours) - set(theirs) <= {"aiayn", *changed}, set(ours) - set(theirs)
    names = sorted(p.name for p in original.iterdir() if p.name not in ("config.json", WEIGHTS))
    assert names and set(names) <= set(KEPT_FILES), names
    assert sorted(p.name for p in back.iterdir()) == sorted([*names, "config.json", WEIGHTS])
    for name in names:
        assert (back / name).read_bytes() == (original / name).read_bytes(), name


def assert_same_logits(model_class, original, back, output="logits", **inputs):
    """The exported model computes the original's logits (`output`): in float64 to 1e-10
    (relative to their size), in fp32 within 2x the original's own error (tests/parity.py)."""
    a = model_class.from_pretrained(original).eval()
    b = model_class.from_pretrained(back).eval()

    def run(model):
        @torch.no_grad()
        def logits(dtype):
            given = {k: v.to(dtype) if v.is_floating_point() else v for k, v in inputs.items()}
            return getattr(model.to(dtype)(**given), output)
        return logits

    assert_same_function(run(b), run(a))
    assert run(a)(torch.float64).std() > 0.1  # not a flat distribution


@pytest.mark.parametrize("version", ["v1.0", "v1.1"])
def test_a_t5_comes_back_with_its_ids_config_and_tokenizer(request, version, tmp_path):
    folder = request.getfixturevalue({"v1.0": "hf_t5_v10_folder",
                                      "v1.1": "hf_t5_v11_folder"}[version])
    mt, back = round_trip("hf-t5", folder, tmp_path)
    assert_gives_back(folder, back)  # vocab_size, pad / eos / decoder_start ids, spiece.model ...
    tok = transformers.AutoTokenizer.from_pretrained(back)
    batch = tok(SENTENCES[:3], return_tensors="pt", padding=True)
    assert batch["input_ids"].tolist() == \
        transformers.AutoTokenizer.from_pretrained(folder)(SENTENCES[:3], padding=True)["input_ids"]
    decoder = torch.tensor([[0, 9, 5, 12, 7, 30, 4, 8]] * 3)  # T5's ids, from its <pad>
    assert_same_logits(transformers.T5ForConditionalGeneration, folder, back,
                       decoder_input_ids=decoder, **batch)


@pytest.mark.parametrize("version", ["v1.0", "v1.1"])
def test_a_changed_t5_exports_its_changes_at_the_original_ids(request, version, tmp_path):
    """Every weight and the dropout changed in aiayn (as a fine-tuning changes them): the export
    computes the aiayn model's logits at T5's ids (its <s> row is T5's <pad> row, the decoder's
    start), and config.json changes in dropout_rate only."""
    from safetensors.torch import load_file, save_file

    folder = request.getfixturevalue({"v1.0": "hf_t5_v10_folder",
                                      "v1.1": "hf_t5_v11_folder"}[version])
    mt = tmp_path / "mt"
    assert main(["import", "hf-t5", str(folder), "--out", str(mt)]) == 0
    state = load_file(mt / WEIGHTS)
    noise = torch.Generator().manual_seed(0)
    save_file({k: v + 0.1 * torch.randn(v.shape, generator=noise) for k, v in state.items()},
              mt / WEIGHTS)
    meta = json.loads((mt / "config.json").read_text())
    meta["model"].update(dropout=0.25, attn_dropout=0.25, activation_dropout=0.25)
    (mt / "config.json").write_text(json.dumps(meta))
    assert main(["export", "hf", "--model", str(mt), "--out", str(tmp_path / "back")]) == 0
    assert_gives_back(folder, tmp_path / "back", changed=("dropout_rate",))
    assert json.loads((tmp_path / "back" / "config.json").read_text())["dropout_rate"] == 0.25
    assert_t5_export_computes_the_folder(aiayn.load(mt), tmp_path / "back")


def assert_t5_export_computes_the_folder(ours, back) -> None:
    """transformers' T5 in `back` computes the logits of the aiayn translator `ours` at T5's
    ids, in float64 (fp32 within 2x transformers' own error)."""
    hf = transformers.T5ForConditionalGeneration.from_pretrained(back).eval()
    src = torch.tensor([ours.encode_source(SENTENCES[1])])
    tgt_in = torch.tensor([[1, 9, 5, 12, 7, 30]])  # aiayn's ids, from <s>
    columns = torch.tensor([_t5_id(i) for i in range(1, ours.model.config.vocab_size)])

    @torch.no_grad()
    def aiayn_logits(dtype):  # (aiayn's <pad> column is T5's <pad> row no more: left out)
        return ours.model.to(dtype)(src, tgt_in)[..., 1:]

    @torch.no_grad()
    def exported(dtype):
        return hf.to(dtype)(input_ids=src.clone().apply_(_t5_id),
                            decoder_input_ids=tgt_in.clone().apply_(_t5_id)).logits[..., columns]

    assert_same_function(aiayn_logits, exported)


def test_a_marian_comes_back_with_its_ids_config_and_tokenizer(
        opus_mt_folder, tmp_path):  # noqa: F811
    folder, sentences = opus_mt_folder
    _, back = round_trip("hf-marian", folder, tmp_path)
    assert_gives_back(folder, back)  # <pad> last and the decoder's start, vocab.json, *.spm ...
    tok = transformers.AutoTokenizer.from_pretrained(back)
    batch = tok(sentences[:3], return_tensors="pt", padding=True)
    assert batch["input_ids"].tolist() == \
        transformers.AutoTokenizer.from_pretrained(folder)(sentences[:3], padding=True)["input_ids"]
    pad = json.loads((folder / "config.json").read_text())["pad_token_id"]
    decoder = torch.tensor([[pad, 9, 5, 12, 7, 30, 4]] * 3)
    assert_same_logits(transformers.MarianMTModel, folder, back, decoder_input_ids=decoder,
                       **batch)


def test_a_bart_comes_back_with_its_ids_config_and_tokenizer(
        hf_bart_folder, tmp_path):  # noqa: F811
    folder, sentences = hf_bart_folder
    _, back = round_trip("hf-bart", folder, tmp_path)
    assert_gives_back(folder, back)  # vocab.json, merges.txt, tokenizer.json ...
    tok = transformers.AutoTokenizer.from_pretrained(back)
    batch = tok(sentences[:3], return_tensors="pt", padding=True)
    assert batch["input_ids"].tolist() == \
        transformers.AutoTokenizer.from_pretrained(folder)(sentences[:3], padding=True)["input_ids"]
    decoder = torch.tensor([[2, 0, 9, 14, 7, 30]] * 3)  # </s> <s> ...
    assert_same_logits(transformers.BartForConditionalGeneration, folder, back,
                       decoder_input_ids=decoder, **batch)


def test_a_kept_file_of_another_name_is_refused_nothing_written(
        hf_bart_folder, tmp_path, capsys):  # noqa: F811
    """The export writes only the names an import keeps: a folder whose meta names another
    file (a path outside the export) is refused in one line, nothing written."""
    folder, _ = hf_bart_folder
    mt = tmp_path / "mt"
    assert main(["import", "hf-bart", str(folder), "--out", str(mt)]) == 0
    meta = json.loads((mt / "config.json").read_text())
    meta["hf_original"]["files"]["../planted.json"] = {"text": "{}"}
    (mt / "config.json").write_text(json.dumps(meta))
    capsys.readouterr()
    assert main(["export", "hf", "--model", str(mt), "--out", str(tmp_path / "hf")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'../planted.json' is not a file an import keeps" in err, err
    assert not (tmp_path / "hf").exists() and not (tmp_path / "planted.json").exists()


def test_a_gpt2_comes_back_with_its_ids_config_and_tokenizer(
        hf_gpt2_folder, tmp_path):  # noqa: F811
    folder, eot = hf_gpt2_folder
    _, back = round_trip("hf-gpt2", folder, tmp_path)
    assert_gives_back(folder, back)  # n_inner null, the summary_* keys, vocab.json, merges.txt
    text = ["the lazy fox", "def parse(path):"]
    assert transformers.AutoTokenizer.from_pretrained(back)(text)["input_ids"] == \
        transformers.AutoTokenizer.from_pretrained(folder)(text)["input_ids"]
    ids = torch.tensor([[eot, 5, 9, 14, 7, 30, 4]])
    assert_same_logits(transformers.GPT2LMHeadModel, folder, back, input_ids=ids)


@pytest.fixture(scope="module")
def hf_bert_folder(tmp_path_factory):
    """A BertModel written by transformers (random weights) with BertTokenizer's files of a
    WordPiece vocabulary written here."""
    folder = tmp_path_factory.mktemp("bert")
    words = "the quick brown fox jumps over lazy dog a cat sat on mat ##s ##ing".split()
    (folder / "vocab.txt").write_text("\n".join(
        ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\n")
    tok = transformers.BertTokenizerFast(vocab_file=str(folder / "vocab.txt"))
    tok.save_pretrained(folder)
    config = transformers.BertConfig(vocab_size=len(tok), hidden_size=16, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=32,
                                     max_position_embeddings=32)
    torch.manual_seed(0)
    transformers.BertModel(config).save_pretrained(folder)
    return folder


def test_a_bert_comes_back_with_its_ids_config_and_tokenizer(hf_bert_folder, tmp_path):
    _, back = round_trip("hf-bert", hf_bert_folder, tmp_path)
    assert_gives_back(hf_bert_folder, back)
    text = ["the quick fox jumps", "a cat sat on the mats"]
    batch = transformers.AutoTokenizer.from_pretrained(back)(text, return_tensors="pt",
                                                             padding=True)
    assert batch["input_ids"].tolist() == transformers.AutoTokenizer.from_pretrained(
        hf_bert_folder)(text, padding=True)["input_ids"]
    assert_same_logits(transformers.BertModel, hf_bert_folder, back,
                       output="last_hidden_state", **batch)


@pytest.fixture(scope="module")
def hf_vit_folder(tmp_path_factory):
    """A ViTForImageClassification written by transformers (random weights) with its image
    processor's file."""
    folder = tmp_path_factory.mktemp("vit")
    config = transformers.ViTConfig(hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                    intermediate_size=32, image_size=8, patch_size=4,
                                    num_labels=3, initializer_range=0.5)  # varied logits
    torch.manual_seed(0)
    transformers.ViTForImageClassification(config).save_pretrained(folder)
    transformers.ViTImageProcessor(size={"height": 8, "width": 8}).save_pretrained(folder)
    return folder


def test_a_vit_comes_back_with_its_config_and_image_processor(hf_vit_folder, tmp_path):
    _, back = round_trip("hf-vit", hf_vit_folder, tmp_path)
    assert_gives_back(hf_vit_folder, back)  # id2label, preprocessor_config.json's normalising
    images = torch.rand(3, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    assert_same_logits(transformers.ViTForImageClassification, hf_vit_folder, back,
                       pixel_values=images)
