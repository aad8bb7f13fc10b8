"""Fine-tuning an imported T5 (`aiayn train` with model.init), then `aiayn export hf`, gives the
original folder back with the fine-tuned weights: the fine-tuned folder keeps what the import's
meta says of the vocabulary, ids, source markers and original folder (hf_original), so the export
has T5's config.json (but the dropout the fine-tuning changed), tokenizer files and ids, and
computes the fine-tuned model's logits in float64. The fine-tuning's loss is T5's own: the
sources end with </s>, and T5's <pad> row (aiayn's <pad> and <s>) counts once in its softmax."""

import json

import pytest
import torch
import yaml

import aiayn
from aiayn.cli import main
from aiayn.data.batching import collate
from aiayn.tasks import seq2seq
from tests.convert.test_hf_round_trip import (
    WEIGHTS,
    assert_gives_back,
    assert_t5_export_computes_the_folder,
)
from tests.convert.test_hf_t5 import (  # noqa: F401 (fixtures)
    SENTENCES,
    _t5_id,
    hf_t5_v10_folder,
    hf_t5_v11_folder,
)

transformers = pytest.importorskip("transformers")
PAIRS = [("the dog reads", "der Hund liest"), ("a cat sat on the mat", "eine Katze"),
         ("my house", "mein Haus"), ("the house is small", "das Haus ist klein"),
         ("a small cat", "eine kleine Katze"), ("my friend reads a book", "mein Freund liest")]
FOLDERS = {"v1.0": "hf_t5_v10_folder", "v1.1": "hf_t5_v11_folder"}


def fine_tune_config(tmp_path, init) -> str:
    """A few steps on PAIRS from the folder `init`, with another dropout."""
    for side, name in ((0, "src"), (1, "tgt")):
        (tmp_path / f"pairs.{name}").write_text("".join(p[side] + "\n" for p in PAIRS))
    files = {f"{split}_{name}": str(tmp_path / f"pairs.{name}")
             for split in ("train", "valid") for name in ("src", "tgt")}
    config = {"out": str(tmp_path / "tuned"), "model": {"init": str(init), "dropout": 0.1},
              "data": {**files, "valid_pairs": 2},
              "train": {"max_steps": 3, "max_tokens": 200, "lr": 3e-3, "warmup_steps": 1,
                        "eval_every": 0, "save_every": 0, "log_every": 1, "tensorboard": False,
                        "progress": False, "threads": 1, "precision": "fp32"}}
    (tmp_path / "tune.yaml").write_text(yaml.safe_dump(config))
    return str(tmp_path / "tune.yaml")


@pytest.mark.parametrize("version", list(FOLDERS))
def test_a_fine_tuned_t5_exports_as_the_original_with_its_new_weights(request, version,
                                                                     tmp_path, capsys):
    folder = request.getfixturevalue(FOLDERS[version])
    mt, tuned, back = tmp_path / "mt", tmp_path / "tuned", tmp_path / "back"
    assert main(["import", "hf-t5", str(folder), "--out", str(mt)]) == 0
    capsys.readouterr()
    assert main(["train", fine_tune_config(tmp_path, mt)]) == 0
    said = "".join(capsys.readouterr())  # data.source_eos is false by default: T5's reading wins
    assert "data: sources end with </s>, as the imported model (hf-t5, model.init)" in said
    imported, ours = aiayn.load(mt), aiayn.load(tuned)
    assert any(not torch.equal(a, b) for a, b in zip(imported.model.state_dict().values(),
                                                      ours.model.state_dict().values(), strict=True))
    hf_tok = transformers.AutoTokenizer.from_pretrained(folder)
    for text in SENTENCES:  # the tuned folder reads its sources as T5 does: ... </s>
        assert [_t5_id(i) for i in ours.encode_source(text)] == hf_tok(text)["input_ids"]
    assert ours.search_ids()["counted_once"] == [0] and ours.meta["generation"] == \
        imported.meta["generation"]  # T5's own search, as its generation_config.json says
    assert main(["export", "hf", "--model", str(tuned), "--out", str(back)]) == 0
    assert_gives_back(folder, back, changed=("dropout_rate",))  # config, tokenizer files, ids
    assert json.loads((back / "config.json").read_text())["dropout_rate"] == 0.1
    assert_t5_export_computes_the_folder(ours, back)
    assert (back / WEIGHTS).is_file()


def test_the_fine_tuning_loss_is_t5s_own(hf_t5_v10_folder, tmp_path):  # noqa: F811 (a fixture)
    """seq2seq_loss of an imported T5 (its <pad> column counted once) on a padded batch of
    PAIRS as fine-tuning encodes them: transformers' summed loss on T5's labels, the plain one
    and the label-smoothed one (torch's label_smoothing over T5's vocabulary). The loss is
    computed in fp32: within 2x transformers' own fp32 error against its float64 loss."""
    assert main(["import", "hf-t5", str(hf_t5_v10_folder), "--out", str(tmp_path / "mt")]) == 0
    mt = aiayn.load(tmp_path / "mt")
    hf = transformers.T5ForConditionalGeneration.from_pretrained(hf_t5_v10_folder).eval()
    hf_tok = transformers.AutoTokenizer.from_pretrained(hf_t5_v10_folder)
    ids = seq2seq.encode_pairs(mt.tokenizer, PAIRS, 64, source_eos=mt.meta["source_eos"])
    batch = collate(ids)
    inputs = hf_tok([s for s, _ in PAIRS], return_tensors="pt", padding=True)
    labels = hf_tok(text_target=[t for _, t in PAIRS], return_tensors="pt",
                    padding=True)["input_ids"]
    labels[labels == 0] = -100
    assert torch.equal(batch.src.clone().apply_(_t5_id), inputs["input_ids"])

    for eps in (0.0, 0.1):
        loss_fn = seq2seq.seq2seq_loss(eps, counted_once=mt.search_ids()["counted_once"])

        @torch.no_grad()
        def theirs(dtype, eps=eps):
            logits = hf.to(dtype)(**inputs, labels=labels).logits
            return torch.nn.functional.cross_entropy(logits.transpose(1, 2), labels,
                                                     label_smoothing=eps, reduction="sum")

        with torch.no_grad():
            ours, n, extra = loss_fn(mt.model.float(), batch)
        assert n == int((labels != -100).sum())
        truth = float(theirs(torch.float64))
        bound = 2 * abs(float(theirs(torch.float32)) - truth) + \
            4 * torch.finfo(torch.float32).eps * abs(truth)
        assert abs(float(ours) - truth) <= bound, (eps, float(ours), truth, bound)
        if eps == 0.0:
            assert abs(float(extra["nll"]) - truth) <= bound
