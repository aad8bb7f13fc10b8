"""DecoderLM: parity with HF GPT-2 on copied weights, causality, KV cache == recomputation."""

import pytest
import torch
import transformers

from aiayn.config import DecoderLMConfig, lm_preset
from aiayn.convert.hf_gpt2 import config_from_hf, convert_state_dict, from_hf
from aiayn.errors import ConfigError, UserError
from aiayn.generation.lm import generate
from aiayn.models import DecoderLM


def _hf_gpt2(seed: int = 0, **overrides):
    """A randomly initialised small GPT-2, with weights spread wider than its N(0, 0.02) init so
    that the logits (and so any mismatch) are far from uniform."""
    torch.manual_seed(seed)
    cfg = dict(n_embd=16, n_layer=2, n_head=2, vocab_size=50, n_positions=64, bos_token_id=None,
               eos_token_id=None, pad_token_id=None, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    hf = transformers.GPT2LMHeadModel(transformers.GPT2Config(**{**cfg, **overrides}))
    with torch.no_grad():
        for p in hf.parameters():
            p.normal_(0.0, 0.4)
    return hf.eval()


def test_gpt2_logits_match_hf():
    hf = _hf_gpt2()
    model = from_hf(hf)
    tokens = torch.randint(0, 50, (3, 40))
    with torch.no_grad():
        expected, got = hf(tokens).logits, model(tokens)
    assert expected.abs().max() > 1.0  # not a near-uniform output that anything would match
    assert (expected - got).abs().max() <= 1e-4


def test_gpt2_greedy_continuation_matches_hf():
    hf = _hf_gpt2(seed=1)
    model = from_hf(hf)
    prompt = torch.randint(0, 50, (2, 5))
    with torch.no_grad():
        expected = hf.generate(prompt, max_new_tokens=20, do_sample=False, pad_token_id=0,
                               attention_mask=torch.ones_like(prompt))
    got = generate(model, prompt, 20, temperature=0)
    assert got.shape == (2, 25)
    assert torch.equal(expected, got)
    assert len(set(got[0, 5:].tolist())) > 2  # a continuation, not one token repeated


def test_gpt2_untied_head_and_relu_convert():
    hf = _hf_gpt2(tie_word_embeddings=False, activation_function="relu", n_inner=24)
    model = from_hf(hf)
    assert not model.config.tie_embeddings and model.config.d_ff == 24
    assert model.output.weight.data_ptr() != model.embed.tokens.weight.data_ptr()
    tokens = torch.randint(0, 50, (2, 9))
    with torch.no_grad():
        assert (hf(tokens).logits - model(tokens)).abs().max() <= 1e-4


def test_gpt2_config_maps_to_preset_shape():
    cfg = config_from_hf(transformers.GPT2Config())
    assert cfg.to_dict() == lm_preset("gpt2-small", pad_id=0, attn_dropout=0.1).to_dict()


def test_converter_errors_name_the_problem():
    with pytest.raises(UserError, match="scale_attn_by_inverse_layer_idx"):
        config_from_hf({"scale_attn_by_inverse_layer_idx": True})
    hf = _hf_gpt2()
    state = {k: v for k, v in hf.state_dict().items() if "h.1.mlp.c_fc.weight" not in k}
    with pytest.raises(UserError, match=r"h\.1\.mlp\.c_fc\.weight"):
        convert_state_dict(state, config_from_hf(hf.config))


def _tiny(**overrides) -> DecoderLM:
    torch.manual_seed(0)
    return DecoderLM(lm_preset("tiny", **overrides)).eval()


@pytest.mark.parametrize("overrides", [{}, dict(positions="sinusoidal", norm_first=False,
                                               scale_embeddings=True, activation="relu")])
def test_later_tokens_do_not_change_earlier_logits(overrides):
    model = _tiny(**overrides)
    tokens = torch.randint(4, 50, (2, 12))
    changed = tokens.clone()
    changed[:, 7:] = torch.randint(4, 50, (2, 5))
    with torch.no_grad():
        a, b = model(tokens), model(changed)
    assert torch.equal(a[:, :7], b[:, :7])
    assert (a[:, 7:] - b[:, 7:]).abs().max() > 1e-3


@pytest.mark.parametrize("positions", ["learned", "sinusoidal"])
def test_kv_cache_equals_full_recomputation(positions):
    model = _tiny(positions=positions)
    tokens = torch.randint(4, 50, (3, 15))
    with torch.no_grad():
        full = model(tokens)
        cache = model.new_cache()
        parts = [model(tokens[:, :6], cache), model(tokens[:, 6:10], cache)]  # prefill, a chunk
        parts += [model(tokens[:, t : t + 1], cache) for t in range(10, 15)]  # one at a time
    assert cache.length == 15
    assert (torch.cat(parts, dim=1) - full).abs().max() <= 1e-5


def test_cached_generation_equals_greedy_recomputation():
    model = _tiny()
    prompt = torch.randint(4, 50, (2, 4))
    seq = prompt
    with torch.no_grad():
        for _ in range(12):  # no cache: rerun the whole sequence for every new token
            seq = torch.cat([seq, model(seq)[:, -1].argmax(-1, keepdim=True)], dim=1)
    assert torch.equal(generate(model, prompt, 12, temperature=0), seq)


def test_attention_weights_are_causal_rows_summing_to_one():
    model = _tiny()
    tokens = torch.randint(4, 50, (2, 6))
    with torch.no_grad():
        logits, weights = model(tokens, return_attn=True)  # the explicit softmax path
        assert (logits - model(tokens)).abs().max() <= 1e-5  # == the fused SDPA path
    assert len(weights) == 2 and weights[0].shape == (2, 2, 6, 6)
    for w in weights:
        assert torch.allclose(w.sum(-1), torch.ones(2, 2, 6))
        assert w.triu(1).abs().max() == 0


def test_tied_embeddings_and_parameter_count():
    model = _tiny()
    assert model.output.weight is model.embed.tokens.weight
    untied = _tiny(tie_embeddings=False)
    assert untied.num_parameters() == model.num_parameters() + 50 * 16


def test_config_checks_name_the_field():
    with pytest.raises(ConfigError, match="positions='rotary'"):
        DecoderLMConfig(positions="rotary")
    with pytest.raises(ConfigError, match="n_layers=0"):
        lm_preset("tiny", n_layers=0)
    with pytest.raises(ConfigError, match="preset='gpt5'"):
        lm_preset("gpt5")
    assert DecoderLMConfig(norm_first=True).final_norm is True


def test_cache_grows_in_place_and_reorders_rows():
    model = _tiny()
    tokens = torch.randint(4, 50, (3, 20))
    with torch.no_grad():
        cache = model.new_cache()
        model(tokens[:, :3], cache)
        for t in range(3, 12):  # appends past the first buffer's capacity, twice
            model(tokens[:, t : t + 1], cache)
        assert cache.self_attn[0].k.shape == (3, 2, 12, 8)
        cache.reorder(torch.tensor([2, 0]))  # keep rows 2 and 0 (beam-search style)
        step = model(tokens[[2, 0], 12:13], cache)[:, -1]
        full = model(tokens[[2, 0], :13])[:, -1]
    assert (step - full).abs().max() <= 1e-5


def test_gpt2_folder_loads_offline(tmp_path):
    from aiayn.convert.hf_gpt2 import load_hf_folder

    hf = _hf_gpt2(seed=2)
    hf.save_pretrained(tmp_path)  # config.json + model.safetensors, as on the hub
    model = load_hf_folder(tmp_path)
    tokens = torch.randint(0, 50, (2, 11))
    with torch.no_grad():
        assert (hf(tokens).logits - model(tokens)).abs().max() <= 1e-4
    with pytest.raises(UserError, match="nowhere: folder not found"):
        load_hf_folder(tmp_path / "nowhere")
