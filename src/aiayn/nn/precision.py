"""Reduced-precision copies of a model, for inference (`aiayn translate --precision bf16|int8`).

Not in the paper, which trains and decodes in fp32. A decoding step of a small model multiplies a
few hundred rows by d_model x d_model matrices and by the output projection (d_model x vocab):
on a CPU that computes bf16 or int8 in hardware (Intel AMX, AVX512-BF16 / VNNI) those products
run several times as fast as in fp32 (benchmarks/RESULTS.md, "Against CTranslate2").

    bf16: every weight and activation in bf16; attention's and the search's softmax stay in fp32
          (nn/attention.py, generation/strategies.py: to_scores), so only the products round.
    int8: every Linear layer (the joined Q/K/V projections of self-attention, the cross-attention,
          feed-forward and output projections) multiplies int8 weights, quantized once per output
          channel, by int8 activations quantized per call (PyTorch's dynamic quantization,
          torch.ao.quantization.quantize_dynamic); everything else stays fp32.

Both return a copy: the model itself (its fp32 weights, which training and saving read) is not
changed. A copy is for inference only (no gradients).
"""

from __future__ import annotations

import copy
import warnings

import torch
from torch import Tensor, nn

from aiayn.errors import ConfigError
from aiayn.nn.attention import MultiHeadAttention

PRECISIONS = ("fp32", "bf16", "int8")


class _JoinedAttention(MultiHeadAttention):
    """MultiHeadAttention whose self-attention projects Q, K and V with one layer, `qkv_proj`
    (the joined weights of q_proj, k_proj, v_proj, as the fp32 path joins them), which int8_copy
    quantizes like the other Linear layers."""

    def _project_qkv(self, query: Tensor, key: Tensor, value: Tensor):
        if query is key and key is value:  # self-attention: one product for Q, K and V
            widths = [self.q_proj.out_features, self.k_proj.out_features, self.v_proj.out_features]
            q, k, v = self.qkv_proj(query).split(widths, dim=-1)
            return self._heads(q), self._heads(k), self._heads(v)
        return super()._project_qkv(query, key, value)


def _with_joined_qkv(model: nn.Module) -> nn.Module:
    """A copy of `model` whose attention modules are _JoinedAttention, with their `qkv_proj`."""
    model = copy.deepcopy(model).eval()
    for m in model.modules():
        if type(m) is MultiHeadAttention:
            parts = (m.q_proj, m.k_proj, m.v_proj)
            joined = nn.Linear(m.q_proj.in_features, sum(p.out_features for p in parts),
                               bias=m.q_proj.bias is not None, device=m.q_proj.weight.device)
            with torch.no_grad():
                joined.weight.copy_(torch.cat([p.weight for p in parts]))
                if joined.bias is not None:
                    joined.bias.copy_(torch.cat([p.bias for p in parts]))
            m.qkv_proj = joined
            m.__class__ = _JoinedAttention
    return model


def bf16_copy(model: nn.Module) -> nn.Module:
    """A copy of `model` with every floating-point weight and buffer in bf16."""
    return copy.deepcopy(model).to(torch.bfloat16).eval()


def int8_engine() -> str:
    """The quantized engine for int8 products: oneDNN where PyTorch has it (on CPUs with AMX-int8
    it ran the gettext-small output projection 2.5-3x as fast as the x86/fbgemm engine), else
    PyTorch's default."""
    engines = torch.backends.quantized.supported_engines
    return "onednn" if "onednn" in engines else torch.backends.quantized.engine


def int8_copy(model: nn.Module) -> nn.Module:
    """A copy of `model` whose nn.Linear layers compute in int8 (per-channel weights, activations
    quantized per call), on the CPU. The rest (embeddings, LayerNorm, attention's softmax) stays
    in the model's dtype, which must be fp32."""
    try:
        from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic
    except ImportError as e:  # PyTorch has announced it will move this to torchao
        raise ConfigError(f"precision int8 needs torch.ao.quantization's dynamic quantization, "
                          f"which torch {torch.__version__} lacks ({e})") from None
    dtypes = {p.dtype for p in model.parameters()}
    if dtypes != {torch.float32} or any(p.device.type != "cpu" for p in model.parameters()):
        raise ConfigError("precision int8 quantizes an fp32 model on the CPU (got "
                          f"{', '.join(sorted(map(str, dtypes)))} on "
                          f"{next(model.parameters()).device})")
    q = _with_joined_qkv(model)
    before = torch.backends.quantized.engine
    try:
        torch.backends.quantized.engine = int8_engine()
        with warnings.catch_warnings():  # the deprecation notices of torch.ao (see above)
            warnings.simplefilter("ignore")
            quantize_dynamic(q, {nn.Linear: per_channel_dynamic_qconfig}, dtype=torch.qint8,
                             inplace=True)
    finally:
        torch.backends.quantized.engine = before
    return q


def reduced_precision(model: nn.Module, precision: str) -> nn.Module:
    """`model` itself for fp32, else its bf16 or int8 copy (see the module's docstring)."""
    if precision == "fp32":
        return model
    if precision == "bf16":
        return bf16_copy(model)
    if precision == "int8":
        return int8_copy(model)
    raise ConfigError(f"precision={precision!r}: must be one of {', '.join(PRECISIONS)}")


__all__ = ["PRECISIONS", "bf16_copy", "int8_copy", "int8_engine", "reduced_precision"]
