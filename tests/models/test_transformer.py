import pytest
import torch

from aiayn import Transformer, TransformerConfig, preset
from aiayn.masks import causal_mask
from tests.parity import assert_same_function

PAD = 0


# BART's options (learned positions from row 2, embedding LayerNorm, GELU, output bias)
BART = dict(positions="learned", position_offset=2, embedding_norm=True, output_bias=True,
            activation="gelu", scale_embeddings=False)
# T5's options: no absolute positions but a relative position bias (8 buckets: the log-spaced
# ones are reached within these short sequences), pre-norm RMSNorm, no biases, no 1/sqrt(d_k);
# v1.0: ReLU, tied output scaled by d_model^-0.5; v1.1: gated GELU, untied output.
T5 = dict(positions="none", relative_attention_num_buckets=8, relative_attention_max_distance=12,
          norm="rms_norm", norm_first=True, bias=False, scale_attention=False,
          scale_embeddings=False, scale_output=True)
# (v1.1 here also with heads narrower than d_model / n_heads, as t5-v1_1-small's: head_dim)
T5_V11 = dict(T5, scale_output=False, tie_output=False, gated_ffn=True, activation="gelu_tanh",
              head_dim=4)


def _tiny(**kw) -> Transformer:
    torch.manual_seed(0)
    model = Transformer(preset("tiny", **kw)).eval()
    if model.output.bias is not None:  # BART's final_logits_bias, not left at zero
        torch.nn.init.normal_(model.output.bias)
    return model


def _copy_attn(ref_attn, ours):
    ref_attn.in_proj_weight.copy_(torch.cat([ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight]))
    ref_attn.in_proj_bias.copy_(torch.cat([ours.q_proj.bias, ours.k_proj.bias, ours.v_proj.bias]))
    ref_attn.out_proj.weight.copy_(ours.out_proj.weight)
    ref_attn.out_proj.bias.copy_(ours.out_proj.bias)


def _copy_linear_norm(dst, src):
    dst.weight.copy_(src.weight)
    dst.bias.copy_(src.bias)


def _torch_reference(model: Transformer) -> torch.nn.Transformer:
    cfg = model.config
    ref = torch.nn.Transformer(cfg.d_model, cfg.n_heads, cfg.n_encoder_layers, cfg.n_decoder_layers,
                               cfg.d_ff, dropout=0.0, batch_first=True).eval()
    with torch.no_grad():
        for r, o in zip(ref.encoder.layers, model.encoder.layers, strict=True):
            _copy_attn(r.self_attn, o.self_attn)
            _copy_linear_norm(r.linear1, o.ffn.w1)
            _copy_linear_norm(r.linear2, o.ffn.w2)
            _copy_linear_norm(r.norm1, o.attn_residual.norm)
            _copy_linear_norm(r.norm2, o.ffn_residual.norm)
        for r, o in zip(ref.decoder.layers, model.decoder.layers, strict=True):
            _copy_attn(r.self_attn, o.self_attn)
            _copy_attn(r.multihead_attn, o.cross_attn)
            _copy_linear_norm(r.linear1, o.ffn.w1)
            _copy_linear_norm(r.linear2, o.ffn.w2)
            _copy_linear_norm(r.norm1, o.self_residual.norm)
            _copy_linear_norm(r.norm2, o.cross_residual.norm)
            _copy_linear_norm(r.norm3, o.ffn_residual.norm)
        _copy_linear_norm(ref.encoder.norm, model.encoder.norm)
        _copy_linear_norm(ref.decoder.norm, model.decoder.norm)
    return ref


def test_equals_torch_nn_transformer_with_copied_weights():
    # post-norm, ReLU, no positions; torch.nn.Transformer always ends each stack with a LayerNorm.
    model = _tiny(positions="none", final_norm=True, n_layers=2, d_model=32, n_heads=4, d_ff=64)
    ref = _torch_reference(model)
    src = torch.randint(4, 50, (3, 7))
    src[1, 4:] = PAD
    src[2, 6:] = PAD
    tgt = torch.randint(4, 50, (3, 5))
    src_pad = src == PAD  # torch: True = ignore

    @torch.no_grad()
    def ours(dtype):  # the logits and the encoder's output at the real tokens
        m = model.to(dtype)
        return torch.cat([m(src, tgt).flatten(), m.encode(src)[~src_pad].flatten()])

    @torch.no_grad()
    def theirs(dtype):
        r, m = ref.to(dtype), model.to(dtype)
        h = r(m.src_embed.tokens(src), m.tgt_embed.tokens(tgt), tgt_mask=~causal_mask(5)[0, 0],
              src_key_padding_mask=src_pad, memory_key_padding_mask=src_pad)
        memory = r.encoder(m.src_embed.tokens(src), src_key_padding_mask=src_pad)
        return torch.cat([m.output(h).flatten(), memory[~src_pad].flatten()])

    # the same function in float64; in fp32 within 2x torch's own error against float64
    assert_same_function(ours, theirs)


@pytest.mark.parametrize("kw", [{}, BART, T5], ids=["paper", "bart", "t5"])
def test_causality_later_targets_do_not_change_earlier_outputs(kw):
    model = _tiny(**kw)
    src = torch.randint(4, 50, (2, 6))
    tgt = torch.randint(4, 50, (2, 8))
    t = 3
    changed = tgt.clone()
    changed[:, t + 1:] = torch.randint(4, 50, (2, 8 - t - 1))
    with torch.no_grad():
        a, b = model(src, tgt), model(src, changed)
    assert (a[:, : t + 1] - b[:, : t + 1]).abs().max() <= 1e-6
    assert (a[:, t + 1:] - b[:, t + 1:]).abs().max() > 1e-4


@pytest.mark.parametrize("kw", [{}, BART, T5], ids=["paper", "bart", "t5"])
def test_padded_source_positions_change_nothing(kw):
    model = _tiny(**kw)
    src = torch.randint(4, 50, (2, 6))
    src[:, 4:] = PAD
    tgt = torch.randint(4, 50, (2, 5))
    longer = torch.cat([src, torch.full((2, 3), PAD)], dim=1)
    with torch.no_grad():
        a = model(src, tgt)
        b = model(longer, tgt)
    assert (a - b).abs().max() <= 1e-5


@pytest.mark.parametrize("kw", [{}, {"norm_first": True}, {"positions": "learned"}, BART, T5,
                                T5_V11, {"head_dim": 2, "value_dim": 8}])  # the last: Table 3 (B)
def test_incremental_decoding_with_cache_equals_recompute(kw):
    model = _tiny(**kw)
    src = torch.randint(4, 50, (3, 6))
    src[0, 4:] = PAD
    tgt = torch.randint(4, 50, (3, 7))
    with torch.no_grad():
        memory = model.encode(src)
        src_mask = model.src_mask(src)
        cache = model.new_cache()
        for t in range(tgt.shape[1]):
            step = model.decode(tgt[:, t:t + 1], memory, src_mask, cache)
            full = model.decode(tgt[:, : t + 1], memory, src_mask)
            assert (step[:, 0] - full[:, t]).abs().max() <= 1e-5
        assert cache.length == tgt.shape[1]


def test_cache_reorder_selects_batch_rows():
    model = _tiny()
    src = torch.randint(4, 50, (3, 5))
    tgt = torch.randint(4, 50, (3, 4))
    with torch.no_grad():
        memory, src_mask = model.encode(src), model.src_mask(src)
        cache = model.new_cache()
        model.decode(tgt[:, :3], memory, src_mask, cache)
        order = torch.tensor([2, 0, 0])
        cache.reorder(order)
        step = model.decode(tgt[order, 3:4], memory[order], src_mask[order], cache)
        full = model.decode(tgt[order], memory[order], src_mask[order])
    assert (step[:, 0] - full[:, 3]).abs().max() <= 1e-5


def test_return_attn_gives_every_layer_and_kind():
    model = _tiny()
    src, tgt = torch.randint(4, 50, (2, 6)), torch.randint(4, 50, (2, 4))
    with torch.no_grad():
        logits, attn = model(src, tgt, return_attn=True)
    assert (logits - model(src, tgt)).abs().max() <= 1e-5
    assert [w.shape for w in attn["encoder"]] == [(2, 2, 6, 6)] * 2
    assert [w.shape for w in attn["decoder_self"]] == [(2, 2, 4, 4)] * 2
    assert [w.shape for w in attn["cross"]] == [(2, 2, 4, 6)] * 2
    assert torch.triu(attn["decoder_self"][0][0, 0], diagonal=1).abs().max() == 0


def test_embeddings_are_shared_and_scaled():
    model = _tiny()
    assert model.src_embed.tokens.weight is model.tgt_embed.tokens.weight is model.output.weight
    ids = torch.tensor([[5]])
    expected = model.src_embed.tokens.weight[5] * 16**0.5  # §3.4: times sqrt(d_model)
    assert torch.allclose(model.src_embed.tokens(ids)[0, 0], expected)
    separate = Transformer(preset("tiny", tgt_vocab_size=30))
    assert separate.src_embed.tokens.weight is not separate.tgt_embed.tokens.weight
    assert separate.output.weight is separate.tgt_embed.tokens.weight
    assert separate.output.out_features == 30


@pytest.mark.parametrize("name,paper_millions", [("base", 65), ("big", 213)])
def test_parameter_counts_match_table_3(name, paper_millions):
    with torch.device("meta"):
        model = Transformer(preset(name, vocab_size=37000))
    n = model.num_parameters() / 1e6
    assert abs(n - paper_millions) / paper_millions <= 0.03, n


def test_pre_norm_variant_has_final_norms():
    model = Transformer(preset("tiny", norm_first=True))
    assert model.encoder.norm is not None and model.decoder.norm is not None
    assert model.encoder.layers[0].attn_residual.norm_first
    assert Transformer(preset("tiny")).encoder.norm is None  # the paper's post-norm has none


def test_config_is_the_models_config():
    cfg = TransformerConfig(vocab_size=40, d_model=16, n_heads=2, d_ff=32, n_layers=1)
    assert Transformer(cfg).config is cfg


def test_selected_positions_give_the_same_loss_and_gradients_as_all_positions():
    """Training's forward(select=non-pad targets) skips the padding in the output projection; the
    label-smoothed loss, its token count and every gradient equal the full forward's."""
    from aiayn.data.batching import collate
    from aiayn.tasks.seq2seq_loss import seq2seq_loss

    torch.manual_seed(1)
    pairs = [([5, 6, 7, 8, 9], [10, 11]), ([12, 13], [14, 15, 16, 17, 18, 19]), ([20], [21])]
    batch = collate(pairs)
    assert (batch.tgt_out == PAD).any()  # the test needs padded targets

    def run(selected: bool):
        model = _tiny()
        if selected:
            loss, n, _ = seq2seq_loss(0.1)(model, batch)
        else:  # the reference: logits at every position, padding masked in the loss
            from aiayn.training.losses import label_smoothed_nll
            loss, _, n = label_smoothed_nll(model(batch.src, batch.tgt_in), batch.tgt_out, 0.1, PAD)
        loss.backward()
        return loss.detach(), n, {k: p.grad.clone() for k, p in model.named_parameters()}

    (loss_s, n_s, g_s), (loss_a, n_a, g_a) = run(True), run(False)
    assert n_s == n_a == int((batch.tgt_out != PAD).sum())
    torch.testing.assert_close(loss_s, loss_a, rtol=1e-6, atol=1e-6)
    for name in g_a:
        torch.testing.assert_close(g_s[name], g_a[name], rtol=1e-5, atol=1e-7, msg=name)


def test_initialisation_is_fairseqs():
    """fairseq's `transformer`: attention projections Xavier-uniform (q/k/v with gain 1/sqrt(2),
    the output projection's bias zero); feed-forward layers and q/k/v biases nn.Linear's own
    U(+-1/sqrt(fan_in)); embeddings N(0, d^-0.5). Checked by each tensor's bound and spread."""
    torch.manual_seed(0)
    model = Transformer(preset("small"))
    d, d_ff = model.config.d_model, model.config.d_ff

    def xavier_bound(p, gain=1.0):
        fan_out, fan_in = p.shape
        return gain * (6 / (fan_in + fan_out)) ** 0.5

    def uniform_like(p, bound):  # within the bound, and spread over it (std of U(-b, b) = b/sqrt(3))
        p = p.detach()
        assert float(p.abs().max()) <= bound
        assert abs(float(p.std()) - bound / 3 ** 0.5) < 0.1 * bound / 3 ** 0.5

    layer = model.encoder.layers[0]
    for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
        uniform_like(proj.weight, xavier_bound(proj.weight, 2 ** -0.5))
        uniform_like(proj.bias, d ** -0.5)
    uniform_like(layer.self_attn.out_proj.weight, xavier_bound(layer.self_attn.out_proj.weight))
    assert not layer.self_attn.out_proj.bias.any()
    uniform_like(layer.ffn.w1.weight, d ** -0.5)
    uniform_like(layer.ffn.w1.bias, d ** -0.5)
    uniform_like(layer.ffn.w2.weight, d_ff ** -0.5)  # 2.2x smaller than Xavier's at 256 x 1024
    uniform_like(layer.ffn.w2.bias, d_ff ** -0.5)
    cross = model.decoder.layers[-1].cross_attn
    uniform_like(cross.k_proj.weight, xavier_bound(cross.k_proj.weight, 2 ** -0.5))
    emb = model.src_embed.tokens.weight.detach()
    assert abs(float(emb.std()) - d ** -0.5) < 0.05 * d ** -0.5


def test_bart_options_read_positions_from_row_2_and_normalise_the_embedding_sum():
    """BART's table keeps 2 unused rows before position 0; the sum is normalised before dropout;
    the output layer has a bias. The paper's defaults have none of these."""
    model = _tiny(**BART)
    table = model.src_embed.positions.weight
    assert table.shape == (64 + 2, 16) and model.tgt_embed.positions.weight.shape == (66, 16)
    ids = torch.randint(4, 50, (2, 5))
    with torch.no_grad():
        expected = torch.nn.functional.layer_norm(
            model.src_embed.tokens.weight[ids] + table[2:7], (16,),
            model.src_embed.norm.weight, model.src_embed.norm.bias, 1e-5)
        assert (model.src_embed(ids) - expected).abs().max() <= 1e-6
        assert model.src_embed.positions(3, offset=61).shape == (3, 16)  # the last positions
    with pytest.raises(ValueError, match="exceeds max_len=64"):
        model.src_embed.positions(4, offset=61)
    assert model.output.bias is not None and model.output.weight is model.src_embed.tokens.weight
    plain = _tiny()
    assert plain.src_embed.norm is None and plain.output.bias is None


def test_a_position_offset_needs_a_learned_table():
    with pytest.raises(ValueError, match="position_offset=2: offsets a learned table"):
        TransformerConfig(position_offset=2)
    with pytest.raises(ValueError, match="position_offset=-1"):
        TransformerConfig(positions="learned", position_offset=-1)


@pytest.mark.parametrize("kw", [T5, T5_V11], ids=["v1.0", "v1.1"])
def test_t5_options_build_t5s_block(kw):
    """T5: RMSNorm everywhere (no biases), a relative bias table per stack and none in the
    layers, unscaled attention, a final norm per stack; v1.1 a gated FFN and its own output."""
    model = _tiny(**kw)
    names = dict(model.named_parameters())
    assert not any(n.endswith(".bias") for n in names)
    assert names["encoder.relative_bias.weight"].shape == (8, model.config.n_heads)
    assert names["decoder.relative_bias.weight"].shape == (8, model.config.n_heads)
    assert sum("relative_bias" in n for n in names) == 2
    assert model.config.final_norm and model.encoder.norm is not None
    assert all(m.scale == 1.0 for m in model.modules() if hasattr(m, "scale") and
               type(m).__name__ == "MultiHeadAttention")
    attn = model.encoder.layers[0].self_attn  # T5 folds 1/sqrt(d_k) into the query's init
    d_k = model.config.d_k
    assert attn.q_proj.weight.shape == (model.config.n_heads * d_k, model.config.d_model)
    ratio = attn.q_proj.weight.detach().std() / attn.k_proj.weight.detach().std()
    assert abs(float(ratio) - d_k ** -0.5) < 0.15
    gated = kw.get("gated_ffn", False)
    assert (model.decoder.layers[0].ffn.w3 is not None) == gated
    assert (model.output.weight is model.tgt_embed.tokens.weight) == (not gated)


def test_t5_relative_bias_makes_the_encoder_order_aware_without_positions():
    """positions="none" alone: permuting the source permutes the encoder's output (no notion
    of order); with T5's relative bias it does not."""
    src = torch.randint(4, 50, (1, 6))
    perm = torch.tensor([3, 1, 5, 0, 2, 4])
    for kw, order_aware in (({"positions": "none"}, False), (T5, True)):
        model = _tiny(**kw)
        with torch.no_grad():
            a, b = model.encode(src)[:, perm], model.encode(src[:, perm])
        assert ((a - b).abs().max() > 1e-4) == order_aware


def test_t5_small_preset_has_t5_smalls_parameter_count():
    """transformers' T5ForConditionalGeneration(T5Config()) (google-t5/t5-small) has 60,506,624
    parameters: the shared embedding, two relative bias tables, no biases, RMSNorm gains."""
    assert Transformer(preset("t5-small")).num_parameters() == 60_506_624


def test_bart_base_preset_has_bart_bases_parameter_count():
    """transformers' BartForConditionalGeneration of facebook/bart-base's config has 139,420,416
    parameters; aiayn's bart-base has those and final_logits_bias (a buffer there, a parameter
    here: the output layer's bias), one per token of the 50,265."""
    with torch.device("meta"):  # the count, without allocating 140M weights
        model = Transformer(preset("bart-base"))
    assert model.num_parameters() == 139_420_416 + 50_265
    assert model.src_embed.positions.weight.shape == (1024 + 2, 768)
