"""Typed model configs with the paper's names, one per model family, and their named presets
(aiayn.config.presets): BlockConfig (the attention + feed-forward block they share),
TransformerConfig (§3's encoder-decoder), DecoderLMConfig (GPT-style), EncoderConfig (BERT-style)
and ViTConfig.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from aiayn.config.base import Config, _fail
from aiayn.config.presets import (
    DECODER_LM_PRESETS,
    ENCODER_PRESETS,
    TRANSFORMER_PRESETS,
    VIT_PRESETS,
)

ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "silu")
POSITIONS = ("sinusoidal", "learned", "none")
NORMS = ("layer_norm", "rms_norm")  # nn/norm.py


@dataclass
class BlockConfig(Config):
    """What one attention + feed-forward block needs; every model family's config extends it."""

    d_model: int = field(default=512, metadata={
        "help": "width of every token vector (the residual stream); §3.1: 512"})
    n_heads: int = field(default=8, metadata={
        "help": "attention heads; d_model must divide by it (§3.2.2: h = 8)"})
    d_ff: int = field(default=2048, metadata={
        "help": "inner width of the position-wise feed-forward network (§3.3: 2048)"})
    dropout: float = field(default=0.1, metadata={
        "help": "§5.4 residual dropout, also on embedding + position sums"})
    # Not in the paper (tensor2tensor's base config has 0): dropout on attention probabilities.
    # It also forces PyTorch's slow math SDPA kernel, so it is off by default.
    attn_dropout: float = field(default=0.0, metadata={
        "help": "dropout on attention probabilities"})
    activation: str = field(default="relu", metadata={"help": "§3.3: max(0, xW1 + b1)W2 + b2"})
    norm_first: bool = field(default=False, metadata={
        "help": "§3.1 post-norm: LayerNorm(x + Sublayer(x)); True = pre-norm"})
    bias: bool = field(default=True, metadata={
        "help": "biases in the projections and feed-forward layers"})
    layer_norm_eps: float = field(default=1e-5, metadata={"help": "LayerNorm's epsilon"})
    # Not in the paper (§5.4 drops only sub-layer outputs and embedding sums): BART and Marian
    # also drop the feed-forward's hidden units, after the activation.
    activation_dropout: float = field(default=0.0, metadata={
        "help": "dropout on the feed-forward's hidden activations (BART's activation_dropout)"})

    def __post_init__(self) -> None:
        self._check_types()
        for name in ("d_model", "n_heads", "d_ff"):
            if getattr(self, name) <= 0:
                _fail(name, getattr(self, name), "must be a positive integer")
        # (TransformerConfig.head_dim, when set, gives the heads their own width instead)
        if self.d_model % self.n_heads and getattr(self, "head_dim", None) is None:
            _fail("d_model", self.d_model, f"must be divisible by n_heads={self.n_heads}")
        for name in ("dropout", "attn_dropout", "activation_dropout"):
            p = getattr(self, name)
            if not 0.0 <= p < 1.0:
                _fail(name, p, "must be in [0, 1)")
        if self.activation not in ACTIVATIONS:
            _fail("activation", self.activation, f"must be one of {', '.join(ACTIVATIONS)}")
        if self.layer_norm_eps <= 0:
            _fail("layer_norm_eps", self.layer_norm_eps, "must be positive")


@dataclass
class TransformerConfig(BlockConfig):
    """The encoder-decoder of §3. Defaults are the paper's base model (Table 3, first row)."""

    vocab_size: int = field(default=37000, metadata={
        "help": "§5.1: shared source-target BPE vocabulary of ~37k tokens"})
    tgt_vocab_size: int | None = field(default=None, metadata={
        "help": "None: one joint vocabulary for source and target"})
    n_layers: int = field(default=6, metadata={
        "help": "§3.1: N = 6 for both stacks unless the two counts below are set"})
    n_encoder_layers: int | None = field(default=None, metadata={
        "help": "encoder layers (None: n_layers)"})
    n_decoder_layers: int | None = field(default=None, metadata={
        "help": "decoder layers (None: n_layers)"})
    max_len: int = field(default=1024, metadata={
        "help": "most tokens a sentence may have (positions); longer inputs are cut"})
    positions: str = field(default="sinusoidal", metadata={
        "help": '§3.5; "learned" is Table 3 row (E); "none" adds nothing'})
    # §3.4: share source/target embeddings and the pre-softmax projection. None = on when the
    # vocabulary is joint; a separate target vocabulary shares only target emb. <-> projection.
    share_embeddings: bool | None = field(default=None, metadata={
        "help": "§3.4 weight tying (embeddings, pre-softmax); None: on for a joint vocabulary"})
    scale_embeddings: bool = field(default=True, metadata={
        "help": "§3.4: embeddings are multiplied by sqrt(d_model)"})
    # A LayerNorm after the last layer of each stack. The paper's post-norm has none (each layer
    # already ends in one); pre-norm needs it. None = follow norm_first. torch.nn.Transformer
    # always has one, so parity with it sets True.
    final_norm: bool | None = field(default=None, metadata={
        "help": "LayerNorm after each stack's last layer; None: follow norm_first"})
    pad_id: int = field(default=0, metadata={
        "help": "the padding token's id: masked out of attention and the loss"})
    # BART's options (Lewis et al. 2020), all off by default. BART learns its positions in a
    # table whose first 2 rows are never used (fairseq kept them for padding): position p reads
    # row p + 2 (§3.5 has fixed sinusoids; Table 3 row E learns them).
    position_offset: int = field(default=0, metadata={
        "help": "learned positions start at this row of their table (BART: 2)"})
    # Not in the paper (§3.4 adds positions to the scaled embeddings, then dropout): BART and BERT
    # normalise the sum first.
    embedding_norm: bool = field(default=False, metadata={
        "help": "LayerNorm on the token + position sum, before dropout (BART's layernorm_embedding)"})
    # Not in the paper (§3.4's pre-softmax linear has no bias): BART adds final_logits_bias.
    output_bias: bool = field(default=False, metadata={
        "help": "a bias on the pre-softmax linear (BART's final_logits_bias)"})
    # T5's options (Raffel et al. 2020; the "t5-*" presets), all off by default. §3.5 adds
    # absolute positions to the embeddings; T5 adds none (positions="none") and instead biases
    # every self-attention score by a learned scalar per head and bucket of the key's offset from
    # the query (nn/relative_position.py). Cross-attention gets none.
    relative_attention_num_buckets: int = field(default=0, metadata={
        "help": "T5's relative position bias on self-attention: buckets of key-query offsets "
                "(T5: 32); 0 = none (§3.5's absolute positions only)"})
    relative_attention_max_distance: int = field(default=128, metadata={
        "help": "offsets this far or further share the last bucket (T5: 128)"})
    # §3.1: LayerNorm. T5: RMSNorm (no mean subtraction, no bias; its "T5LayerNorm").
    norm: str = field(default="layer_norm", metadata={
        "help": "§3.1 layer_norm, or rms_norm (T5: no mean subtraction, no bias)"})
    # §3.2.1 divides the scores by sqrt(d_k); T5 does not (it folds the factor into the
    # initialisation of the query projection).
    scale_attention: bool = field(default=True, metadata={
        "help": "§3.2.1: attention scores divided by sqrt(d_k); T5: false"})
    # §3.3: FFN(x) = max(0, xW1 + b1)W2 + b2. T5 v1.1: GEGLU (Shazeer 2020), act(xW1) * xW3.
    gated_ffn: bool = field(default=False, metadata={
        "help": "feed-forward (act(xW1) * xW3)W2, the activation gating a second linear map "
                "(T5 v1.1's gated-gelu); §3.3: false"})
    # §3.4 ties the pre-softmax linear to the target embeddings; T5 v1.1 does not.
    tie_output: bool = field(default=True, metadata={
        "help": "§3.4: the pre-softmax linear shares the target embedding matrix (T5 v1.1: no)"})
    # T5 v1.0 ties as §3.4 does, but scales the decoder's output by d_model^-0.5 before the
    # tied projection instead of the embeddings by sqrt(d_model) (scale_embeddings=false).
    scale_output: bool = field(default=False, metadata={
        "help": "decoder output times d_model^-0.5 before the pre-softmax linear (T5 v1.0)"})
    # §3.2.2: d_k = d_v = d_model / h. T5 v1.1-small (and FLAN-T5-small) has 6 heads of 64 in
    # d_model 512 (its d_kv).
    head_dim: int | None = field(default=None, metadata={
        "help": "d_k = d_v of each head; None: d_model / n_heads (§3.2.2); T5's d_kv"})
    # Table 3 row (B) narrows the queries and keys alone (d_k 16 or 32, d_v 64: 58M and 60M
    # parameters, as the paper counts them).
    value_dim: int | None = field(default=None, metadata={
        "help": "d_v of each head when it differs from d_k (Table 3 row B); None: d_k"})
    # Not in the paper (§5.4 drops sub-layer outputs and embedding sums, element by element): a
    # small-data regulariser, whole token embeddings dropped before the positions are added, on
    # both stacks' inputs (Gal & Ghahramani 2016's word dropout, here per token rather than per
    # word type; Sennrich & Zhang 2019 used word dropout for low-resource NMT).
    word_dropout: float = field(default=0.0, metadata={
        "help": "in training, each input token's embedding zeroed with this probability (the "
                "rest scaled by 1 / (1 - p)), source and target; 0 = none"})

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0.0 <= self.word_dropout < 1.0:
            _fail("word_dropout", self.word_dropout, "must be in [0, 1)")
        if self.n_encoder_layers is None:
            self.n_encoder_layers = self.n_layers
        if self.n_decoder_layers is None:
            self.n_decoder_layers = self.n_layers
        if self.share_embeddings is None:
            self.share_embeddings = self.tgt_vocab_size is None
        if self.final_norm is None:
            self.final_norm = self.norm_first
        for name in ("vocab_size", "n_layers", "max_len"):
            if getattr(self, name) <= 0:
                _fail(name, getattr(self, name), "must be a positive integer")
        for name in ("tgt_vocab_size", "n_encoder_layers", "n_decoder_layers"):
            if getattr(self, name) is not None and getattr(self, name) < 0:
                _fail(name, getattr(self, name), "must be a non-negative integer")
        if self.positions not in POSITIONS:
            _fail("positions", self.positions, f"must be one of {', '.join(POSITIONS)}")
        if self.share_embeddings and self.tgt_vocab_size not in (None, self.vocab_size):
            _fail("share_embeddings", True, "source and target embeddings can only be shared "
                  f"with one vocabulary (vocab_size={self.vocab_size}, tgt_vocab_size={self.tgt_vocab_size})")
        if not 0 <= self.pad_id < self.vocab_size:
            _fail("pad_id", self.pad_id, f"must be a token id below vocab_size={self.vocab_size}")
        if self.position_offset < 0:
            _fail("position_offset", self.position_offset, "must be a non-negative integer")
        if self.position_offset and self.positions != "learned":
            _fail("position_offset", self.position_offset,
                  f"offsets a learned table; positions={self.positions!r} has none")
        self._check_t5_options()

    def _check_t5_options(self) -> None:
        buckets, distance = self.relative_attention_num_buckets, self.relative_attention_max_distance
        if buckets < 0 or 0 < buckets < 4:  # the encoder's half for each direction needs 2+
            _fail("relative_attention_num_buckets", buckets, "must be 0 (none) or at least 4")
        if buckets and distance <= buckets // 2:  # beyond the exact buckets (nn/relative_position)
            _fail("relative_attention_max_distance", distance,
                  f"must exceed relative_attention_num_buckets / 2 = {buckets // 2}")
        if self.norm not in NORMS:
            _fail("norm", self.norm, f"must be one of {', '.join(NORMS)}")
        for name in ("head_dim", "value_dim"):
            if getattr(self, name) is not None and getattr(self, name) <= 0:
                _fail(name, getattr(self, name), "must be a positive integer (or None)")

    @property
    def d_k(self) -> int:
        """Each head's width d_k = d_v (§3.2.2: d_model / h, unless head_dim says otherwise)."""
        return self.d_model // self.n_heads if self.head_dim is None else self.head_dim

    @property
    def d_v(self) -> int:
        """Each head's value width d_v (§3.2.2: d_k, unless value_dim says otherwise)."""
        return self.d_k if self.value_dim is None else self.value_dim

    @property
    def target_vocab_size(self) -> int:
        return self.tgt_vocab_size if self.tgt_vocab_size is not None else self.vocab_size


TransformerConfig.PRESETS = TRANSFORMER_PRESETS
preset = TransformerConfig.preset  # `aiayn.preset("base")`: the paper's configs by name


@dataclass
class DecoderLMConfig(BlockConfig):
    """A decoder-only language model: a stack of causal self-attention layers (§3.2.3 masking,
    no encoder and no cross-attention), as in GPT. Defaults keep the paper's block (post-norm,
    ReLU, sinusoids, scaled embeddings); the "gpt2-*" presets switch to GPT-2's choices."""

    vocab_size: int = field(default=50257, metadata={
        "help": "tokens in the vocabulary (GPT-2: 50257)"})
    n_layers: int = field(default=6, metadata={"help": "decoder layers"})
    max_len: int = field(default=1024, metadata={
        "help": "learned positions cannot go further; sinusoids extend on demand"})
    positions: str = field(default="sinusoidal", metadata={
        "help": "§3.5; GPT-2 learns them (Table 3 row E)"})
    # LayerNorm after the last layer; None = follow norm_first (pre-norm needs it, GPT-2 has it).
    final_norm: bool | None = field(default=None, metadata={
        "help": "LayerNorm after the last layer; None: follow norm_first (GPT-2 has it)"})
    tie_embeddings: bool = field(default=True, metadata={
        "help": "§3.4: the pre-softmax linear shares the embedding matrix"})
    scale_embeddings: bool = field(default=True, metadata={
        "help": "§3.4: multiply embeddings by sqrt(d_model); GPT-2 does not"})
    pad_id: int = field(default=0, metadata={
        "help": "the padding token's id: masked out of attention and the loss"})

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.final_norm is None:
            self.final_norm = self.norm_first
        for name in ("vocab_size", "n_layers", "max_len"):
            if getattr(self, name) <= 0:
                _fail(name, getattr(self, name), "must be a positive integer")
        if self.positions not in POSITIONS:
            _fail("positions", self.positions, f"must be one of {', '.join(POSITIONS)}")
        if not 0 <= self.pad_id < self.vocab_size:
            _fail("pad_id", self.pad_id, f"must be a token id below vocab_size={self.vocab_size}")


DecoderLMConfig.PRESETS = DECODER_LM_PRESETS
lm_preset = DecoderLMConfig.preset


@dataclass
class EncoderConfig(BlockConfig):
    """An encoder-only model: the §3.1 encoder stack alone, BERT-style (Devlin et al. 2019).

    Departures from the paper, all BERT's: learned positions (Table 3 row E), segment embeddings,
    a LayerNorm on the embedding sum, GELU, no sqrt(d_model) embedding scale. Defaults are BERT-base.
    """

    d_model: int = field(default=768, metadata={
        "help": "width of every token vector (BERT-base: 768)"})
    n_heads: int = field(default=12, metadata={"help": "attention heads (BERT-base: 12)"})
    d_ff: int = field(default=3072, metadata={"help": "feed-forward inner width (BERT-base: 3072)"})
    attn_dropout: float = field(default=0.1, metadata={
        "help": "BERT drops attention probabilities too"})
    activation: str = field(default="gelu", metadata={"help": "BERT's GELU (exact erf form)"})
    layer_norm_eps: float = field(default=1e-12, metadata={"help": "BERT's LayerNorm epsilon"})
    vocab_size: int = field(default=30522, metadata={
        "help": "tokens in the vocabulary (BERT-base's WordPiece: 30522)"})
    n_layers: int = field(default=12, metadata={"help": "encoder layers (BERT-base: 12)"})
    max_len: int = field(default=512, metadata={
        "help": "most tokens per text, [CLS] and [SEP] included"})
    type_vocab_size: int = field(default=2, metadata={
        "help": "segment (sentence A / B) embeddings; 0 = none"})
    embedding_norm: bool = field(default=True, metadata={
        "help": "LayerNorm(tokens + positions + segments), then dropout"})
    pad_id: int = field(default=0, metadata={
        "help": "the padding token's id: masked out of attention"})
    pool: str = field(default="cls", metadata={
        "help": "what the classifier reads: the first ([CLS]) position, or the mean"})
    pooler: bool = field(default=True, metadata={
        "help": "BERT's pooler: tanh(W h + b) on the pooled vector"})
    mlm_head: bool = field(default=True, metadata={
        "help": "masked-LM head (tied to the token embeddings)"})
    n_labels: int = field(default=0, metadata={"help": "sequence classification head; 0 = none"})

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("vocab_size", "n_layers", "max_len"):
            if getattr(self, name) <= 0:
                _fail(name, getattr(self, name), "must be a positive integer")
        for name in ("type_vocab_size", "n_labels"):
            if getattr(self, name) < 0:
                _fail(name, getattr(self, name), "must be a non-negative integer")
        if not 0 <= self.pad_id < self.vocab_size:
            _fail("pad_id", self.pad_id, f"must be a token id below vocab_size={self.vocab_size}")
        if self.pool not in ("cls", "mean"):
            _fail("pool", self.pool, "must be one of cls, mean")


@dataclass
class ViTConfig(BlockConfig):
    """A Vision Transformer (Dosovitskiy et al. 2021): image patches as tokens, the §3.1 encoder
    stack in pre-norm order with a final LayerNorm, a [CLS] token and a classification head.
    Defaults are ViT-B/16."""

    d_model: int = field(default=768, metadata={
        "help": "width of every token vector (ViT-Base: 768)"})
    n_heads: int = field(default=12, metadata={"help": "attention heads (ViT-Base: 12)"})
    d_ff: int = field(default=3072, metadata={"help": "feed-forward inner width (ViT-Base: 3072)"})
    dropout: float = field(default=0.0, metadata={"help": "ViT-Base fine-tuning drops nothing"})
    activation: str = field(default="gelu", metadata={"help": "ViT's GELU (exact erf form)"})
    norm_first: bool = field(default=True, metadata={
        "help": "ViT is pre-norm (a departure from §3.1's post-norm)"})
    layer_norm_eps: float = field(default=1e-12, metadata={"help": "ViT's LayerNorm epsilon"})
    image_size: int = field(default=224, metadata={
        "help": "side of the square input images, in pixels (ViT-B/16: 224)"})
    patch_size: int = field(default=16, metadata={
        "help": "side of a square patch in pixels (each becomes one token)"})
    channels: int = field(default=3, metadata={
        "help": "colour channels of the input images: 1 = grey, 3 = RGB"})
    n_layers: int = field(default=12, metadata={"help": "encoder layers (ViT-Base: 12)"})
    n_classes: int = field(default=1000, metadata={"help": "0 = no head (a feature extractor)"})

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("image_size", "patch_size", "channels", "n_layers"):
            if getattr(self, name) <= 0:
                _fail(name, getattr(self, name), "must be a positive integer")
        if self.n_classes < 0:
            _fail("n_classes", self.n_classes, "must be a non-negative integer")
        if self.image_size % self.patch_size:
            _fail("patch_size", self.patch_size, f"must divide image_size={self.image_size}")

    @property
    def n_patches(self) -> int:
        return (self.image_size // self.patch_size) ** 2


EncoderConfig.PRESETS = ENCODER_PRESETS
ViTConfig.PRESETS = VIT_PRESETS
encoder_preset = EncoderConfig.preset
vit_preset = ViTConfig.preset


__all__ = ["ACTIVATIONS", "BlockConfig", "DECODER_LM_PRESETS", "DecoderLMConfig", "ENCODER_PRESETS",
           "EncoderConfig", "NORMS", "POSITIONS", "TRANSFORMER_PRESETS", "TransformerConfig",
           "VIT_PRESETS", "ViTConfig", "encoder_preset", "lm_preset", "preset", "vit_preset"]
