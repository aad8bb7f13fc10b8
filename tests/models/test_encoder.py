"""EncoderModel (BERT-style): parity with HF BERT on copied weights, padding, heads, round trips."""

import pytest
import torch

from aiayn.config import EncoderConfig, encoder_preset
from aiayn.convert.hf_bert import config_from_hf, convert_state_dict, from_hf
from aiayn.errors import ConfigError, UserError
from aiayn.folder.load import load_model
from aiayn.folder.weights import save_model
from aiayn.models import EncoderModel
from aiayn.models.encoder import IGNORE_INDEX, mean_pool, mlm_loss

transformers = pytest.importorskip("transformers")


def _hf_bert(cls_name: str = "BertModel", seed: int = 0, **overrides):
    """A randomly initialised small BERT with weights spread wider than its N(0, 0.02) init, so
    the outputs (and any mismatch) are far from trivial."""
    torch.manual_seed(seed)
    cfg = dict(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
               intermediate_size=32, max_position_embeddings=64, type_vocab_size=2, pad_token_id=0)
    hf = getattr(transformers, cls_name)(transformers.BertConfig(**{**cfg, **overrides}))
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if "LayerNorm" not in name:
                p.normal_(0.0, 0.3)
    return hf.eval()


def _batch(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, 50, (3, 12), generator=g)
    ids[1, 7:] = 0  # padding
    ids[2, 3:] = 0
    segments = torch.zeros_like(ids)
    segments[:, 5:] = 1
    return ids, segments, (ids != 0).long()


def test_bert_hidden_states_and_pooler_match_hf():
    hf = _hf_bert()
    model = from_hf(hf)
    ids, segments, attention_mask = _batch()
    with torch.no_grad():
        ref = hf(input_ids=ids, token_type_ids=segments, attention_mask=attention_mask)
        hidden = model(ids, segments)
    assert ref.last_hidden_state.abs().max() > 1.0
    # every position, padding included (BERT computes those too)
    assert (hidden - ref.last_hidden_state).abs().max() <= 1e-4
    assert (model.pool(hidden, ids) - ref.pooler_output).abs().max() <= 1e-4


def test_bert_all_layers_match_hf():
    hf = _hf_bert(num_hidden_layers=3)
    model = from_hf(hf)
    ids, segments, attention_mask = _batch(1)
    with torch.no_grad():
        ref = hf(input_ids=ids, token_type_ids=segments, attention_mask=attention_mask,
                 output_hidden_states=True).hidden_states
        x = model.embed(ids, segments)
        assert (x - ref[0]).abs().max() <= 1e-4
        for layer, expected in zip(model.encoder.layers, ref[1:], strict=True):
            x = layer(x, model.attention_mask(ids))
            assert (x - expected).abs().max() <= 1e-4


def test_bert_mlm_head_matches_hf():
    hf = _hf_bert("BertForMaskedLM", seed=2)
    model = from_hf(hf)
    assert model.config.mlm_head and model.mlm.output.weight is model.embed.tokens.weight
    ids, segments, attention_mask = _batch(2)
    with torch.no_grad():
        ref = hf(input_ids=ids, token_type_ids=segments, attention_mask=attention_mask).logits
        got = model.mlm_logits(ids, segments)
    assert (got - ref).abs().max() <= 1e-4


def test_bert_classifier_matches_hf():
    hf = _hf_bert("BertForSequenceClassification", seed=3, num_labels=4)
    model = from_hf(hf)
    assert model.config.n_labels == 4
    ids, segments, attention_mask = _batch(3)
    with torch.no_grad():
        ref = hf(input_ids=ids, token_type_ids=segments, attention_mask=attention_mask).logits
        got = model.classify(ids, segments)
    assert ref.abs().max() > 0.5
    assert (got - ref).abs().max() <= 1e-4


def test_converter_rejects_unknown_parameters_and_settings():
    hf = _hf_bert()
    state = dict(hf.state_dict())
    state["encoder.layer.0.mystery.weight"] = torch.zeros(2)
    with pytest.raises(UserError, match="mystery"):
        convert_state_dict(state, config_from_hf(hf.config, state))
    with pytest.raises(UserError, match="position_embedding_type"):
        config_from_hf({"position_embedding_type": "relative_key"})
    with pytest.raises(UserError, match="hidden_act"):
        config_from_hf({"hidden_act": "mish"})  # swish (SiLU) is known now


def test_padding_does_not_change_real_positions():
    model = EncoderModel(encoder_preset("tiny")).eval()
    ids = torch.tensor([[5, 6, 7, 8]])
    padded = torch.tensor([[5, 6, 7, 8, 0, 0, 0]])
    with torch.no_grad():
        a, b = model(ids), model(padded)
        assert torch.allclose(a, b[:, :4], atol=1e-6)
        emb_a, emb_b = model.sentence_embedding(ids), model.sentence_embedding(padded)
    assert torch.allclose(emb_a, emb_b, atol=1e-6)
    assert torch.allclose(emb_a.norm(dim=-1), torch.ones(1))


def test_batch_independence():
    model = EncoderModel(encoder_preset("tiny", n_labels=3)).eval()
    ids = torch.randint(1, 50, (4, 9))
    with torch.no_grad():
        together = model.classify(ids)
        alone = torch.cat([model.classify(ids[i:i + 1]) for i in range(4)])
    assert torch.allclose(together, alone, atol=1e-5)


def test_mean_pool_ignores_masked_positions():
    hidden = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]]])
    keep = torch.tensor([[True, True, False]])
    assert torch.equal(mean_pool(hidden, keep), torch.tensor([[2.0, 3.0]]))


def test_mlm_loss_counts_masked_positions_only():
    torch.manual_seed(0)
    logits = torch.randn(2, 5, 11, requires_grad=True)
    labels = torch.full((2, 5), IGNORE_INDEX)
    labels[0, 1], labels[1, 3] = 4, 7
    loss = mlm_loss(logits, labels)
    loss.backward()
    grad_norm_per_position = logits.grad.abs().sum(-1)
    chosen = labels != IGNORE_INDEX
    assert (grad_norm_per_position[~chosen] == 0).all()
    assert (grad_norm_per_position[chosen] > 0).all()
    changed = logits.detach().clone()
    changed[~chosen] = torch.randn_like(changed[~chosen]) * 10  # other positions do not matter
    assert torch.allclose(mlm_loss(changed, labels), loss)
    expected = torch.nn.functional.cross_entropy(logits[chosen], labels[chosen])
    assert torch.allclose(loss, expected)
    assert mlm_loss(logits, torch.full((2, 5), IGNORE_INDEX)).item() == 0.0  # no NaN


def test_save_load_round_trip(tmp_path):
    model = EncoderModel(encoder_preset("tiny", n_labels=2)).eval()
    save_model(tmp_path / "m", "encoder", model)
    loaded, meta = load_model(tmp_path / "m")
    assert meta["family"] == "encoder" and isinstance(loaded, EncoderModel)
    assert loaded.mlm.output.weight is loaded.embed.tokens.weight  # the tie survives
    ids = torch.randint(1, 50, (2, 7))
    with torch.no_grad():
        assert torch.equal(model.mlm_logits(ids), loaded.mlm_logits(ids))
        assert torch.equal(model.classify(ids), loaded.classify(ids))


def test_heads_absent_raise_and_attention_weights():
    model = EncoderModel(encoder_preset("tiny", mlm_head=False, type_vocab_size=0)).eval()
    ids = torch.tensor([[3, 4, 5, 0]])
    with pytest.raises(ValueError, match="masked-LM"):
        model.mlm_logits(ids)
    with pytest.raises(ValueError, match="classification"):
        model.classify(ids)
    with pytest.raises(ValueError, match="segment"):
        model(ids, torch.zeros_like(ids))
    with pytest.raises(ValueError, match="max_len"):
        model(torch.ones(1, 65, dtype=torch.long))
    hidden, weights = model(ids, return_attn=True)
    assert len(weights) == 2 and weights[0].shape == (1, 2, 4, 4)
    assert torch.allclose(weights[0].sum(-1), torch.ones(1, 2, 4))
    assert (weights[0][..., 3] == 0).all()  # nobody attends to the padding


@pytest.mark.parametrize("field, value", [("pool", "max"), ("pad_id", 50), ("n_labels", -1),
                                          ("type_vocab_size", -2), ("max_len", 0)])
def test_config_checks(field, value):
    with pytest.raises(ConfigError, match=field):
        EncoderConfig.from_dict({**encoder_preset("tiny").to_dict(), field: value})


def test_presets():
    minilm = encoder_preset("minilm-l6")
    assert (minilm.d_model, minilm.n_layers, minilm.n_heads, minilm.d_ff) == (384, 6, 12, 1536)
    assert encoder_preset("bert-base").activation == "gelu"
    assert encoder_preset("bert-base").layer_norm_eps == 1e-12 and not encoder_preset("bert-base").norm_first
    with pytest.raises(ConfigError, match="preset"):
        encoder_preset("bert-huge")


def test_training_mlm_loss_projects_only_chosen_positions():
    """classify.masked_lm_loss (vocabulary projection on the chosen positions only) gives the
    same loss and gradients as mlm_loss on all logits."""
    from aiayn.data.mlm import mask_tokens
    from aiayn.tasks.text_classification import masked_lm_loss

    torch.manual_seed(0)
    model = EncoderModel(encoder_preset("tiny")).eval()
    ids = torch.randint(5, 50, (4, 16))
    inputs, labels = mask_tokens(ids, 4, 50, (0, 1, 2, 3), torch.Generator().manual_seed(0), rate=0.3)
    loss, n, _ = masked_lm_loss(model, (inputs, labels))
    loss.backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    full = mlm_loss(model.mlm_logits(inputs), labels) * n
    full.backward()
    assert n == int((labels != IGNORE_INDEX).sum()) > 0
    assert torch.allclose(loss, full, atol=1e-5)
    for name, p in model.named_parameters():
        if p.grad is not None:
            assert torch.allclose(grads[name], p.grad, atol=1e-6), name
