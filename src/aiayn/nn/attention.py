"""Scaled dot-product attention (§3.2.1) and multi-head attention (§3.2.2).

Shape legend:
    B    batch            H   heads            Dh  head dim = d_model / H  (d_k = d_v, §3.2.2)
    T_q  query positions  T_k key positions    D   d_model          Dv  d_v when it differs
                                                                         (Table 3 row B)
Masks are boolean, broadcastable to (B, H, T_q, T_k); True at (i, j) = query i may attend to key j.
A query row with no allowed key yields zeros (never NaN) in every dtype.
A bias (T5's relative positions, nn/relative_position.py) is a float tensor broadcastable to
(B, H, T_q, T_k), added to the scores before the mask is applied; it is not a mask.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from aiayn.masks import causal_mask
from aiayn.nn.cache import AttentionCache
from aiayn.nn.dropout import dropout


def scaled_dot_product_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, dropout_p: float = 0.0,
    bias: Tensor | None = None, scale: float | None = None,
) -> tuple[Tensor, Tensor]:
    """The explicit reference path: softmax(Q K^T / sqrt(d_k) + bias) V, returning (out, weights).

    q (..., T_q, Dh), k (..., T_k, Dh), v (..., T_k, Dv) -> out (..., T_q, Dv), weights (..., T_q, T_k).
    `scale` replaces §3.2.1's 1/sqrt(d_k) when given (T5: 1.0). Scores and softmax are computed
    in fp32 for bf16 / fp16 inputs (in float64 for float64), then cast back.
    """
    wide = torch.float64 if q.dtype == torch.float64 else torch.float32
    scores = torch.matmul(q.to(wide), k.to(wide).transpose(-2, -1))
    scores = scores / math.sqrt(q.shape[-1]) if scale is None else scores * scale
    if bias is not None:
        scores = scores + bias.to(wide)
    if mask is not None:
        # The dtype's lowest finite value, not -inf: a fully masked row stays finite (uniform), and
        # multiplying by the mask below zeroes it. Masked keys get exactly 0 weight.
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights * mask
    weights = weights.to(q.dtype)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p)
    return torch.matmul(weights, v), weights


# On the CPU, attention over short sequences takes the matmul path below: PyTorch's CPU flash
# kernel has a fixed cost per call that dominates there. Measured (2 threads, forward + backward,
# 4 heads of 64, ~2k tokens per call): in fp32 2x faster at 16 x 16 positions, 1.2x at 64 x 64,
# level at 128 x 128 and slower beyond; in bf16 (against the fused kernel in fp32, which is
# faster than in bf16) 2x at 16 x 16, 1.5x at 128 x 128 (benchmarks/cpu_bf16.py; RESULTS.md,
# "Training on the CPU in bf16"). Decoding steps (a few queries per row, no autograd) take it at
# any key length: the flash kernel costs 2-3x as much there.
SMALL_QUERY = 8
SMALL_SCORES = 128 * 128  # T_q x T_k up to which training / encoding take the matmul path


def _use_matmul(q: Tensor, t_k: int, dropout_p: float) -> bool:
    if q.device.type != "cpu" or torch.compiler.is_compiling():
        return False
    t_q = q.shape[-2]
    if t_q * t_k <= SMALL_SCORES:
        return True
    return t_q <= SMALL_QUERY and dropout_p == 0.0 and \
        not (torch.is_grad_enabled() and q.requires_grad)


def _fast_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, dropout_p: float,
                    is_causal: bool, bias: Tensor | None = None,
                    scale: float | None = None) -> Tensor:
    """PyTorch's fused SDPA (flash / memory-efficient kernels), or on the CPU for short sequences
    two matmuls; the same numbers as the reference path either way."""
    t_q, t_k = q.shape[-2], k.shape[-2]
    if is_causal and mask is None and t_q > 1:
        if t_q == t_k and bias is None and not _use_matmul(q, t_k, dropout_p):  # fused causal
            return _cpu_fp32(F.scaled_dot_product_attention, q, k, v, dropout_p=dropout_p,
                             is_causal=True, scale=scale)
        mask = causal_mask(t_q, t_k, device=q.device)
    if _use_matmul(q, t_k, dropout_p):
        return _matmul_attention(q, k, v, mask, dropout_p, bias, scale)
    attn_mask = mask if bias is None else _float_mask(bias, mask, q)
    out = _cpu_fp32(F.scaled_dot_product_attention, q, k, v, attn_mask=attn_mask,
                    dropout_p=dropout_p, scale=scale)
    if mask is not None:
        # Fused kernels give NaN (or garbage) for rows with no allowed key; the convention is zeros.
        has_key = mask.any(dim=-1, keepdim=True)
        # On the CPU, look first: usually every row has a key (padding masks), and skipping the
        # fill saves a pass over the output and its backward. (On a GPU the look would stall,
        # and under torch.compile it would break the graph; the compiler fuses the fill anyway.)
        if torch.compiler.is_compiling() or mask.device.type != "cpu" or not bool(has_key.all()):
            out = out.masked_fill(~has_key, 0.0)
    return out


def _float_mask(bias: Tensor, mask: Tensor | None, q: Tensor) -> Tensor:
    """The additive float mask SDPA takes for a bias and a boolean mask: the bias where a key is
    allowed, half the dtype's lowest finite value where not. Half, so that adding a score cannot
    overflow to -inf: a row with no allowed key stays finite in the kernel (uniform weights, and
    finite gradients), and is zeroed after it, as for a boolean mask. In the dtype the kernel
    computes in: q's, or fp32 for a bf16 / fp16 q on the CPU (_cpu_fp32)."""
    cpu_half = q.device.type == "cpu" and q.dtype in (torch.bfloat16, torch.float16)
    dtype = torch.float32 if cpu_half else q.dtype
    bias = bias.to(dtype)
    return bias if mask is None else bias.masked_fill(~mask, torch.finfo(dtype).min / 2)


def _cpu_fp32(sdpa, q: Tensor, k: Tensor, v: Tensor, **kwargs) -> Tensor:
    """PyTorch's fused kernel; on the CPU in fp32 when q is bf16 / fp16 (the CPU's bf16 flash
    backward is 2.5x slower than its fp32 one), cast back after."""
    if q.device.type != "cpu" or q.dtype not in (torch.bfloat16, torch.float16):
        return sdpa(q, k, v, **kwargs)
    with torch.autocast("cpu", enabled=False):
        return sdpa(q.float(), k.float(), v.float(), **kwargs).to(q.dtype)


@contextmanager
def joined_qkv_kept(model: nn.Module) -> Iterator[None]:
    """Inside: the self-attention layers of `model` join their q/k/v weights once and keep the
    copy; a decoding loop calls each layer hundreds of times with the same weights (the models'
    `decoding()`). Entering and leaving drop the copies, so each loop starts from the weights as
    they are. Nests."""
    layers = [m for m in model.modules() if isinstance(m, MultiHeadAttention)]
    for m in layers:
        if not m._keeping:
            m._qkv_kept = None
        m._keeping += 1
    try:
        yield
    finally:
        for m in layers:
            m._keeping -= 1
            if not m._keeping:
                m._qkv_kept = None


def _ungroup(x: Tensor, group: int, t_q: int) -> Tensor:
    """(B_k, H, g*T_q, X) -> (g*B_k, H, T_q, X): MultiHeadAttention's grouped queries, back."""
    b_k, h, _, last = x.shape
    return x.view(b_k, h, group, t_q, last).transpose(1, 2).reshape(b_k * group, h, t_q, last)


def _matmul_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None,
                      dropout_p: float = 0.0, bias: Tensor | None = None,
                      scale: float | None = None) -> Tensor:
    """softmax(Q K^T / sqrt(d_k) + bias) V as two batched matmuls in q's dtype, the softmax in
    fp32 (or in q's dtype when wider);
    a query with no allowed key gets zeros, as everywhere."""
    *lead, t_q, d = q.shape
    t_k = k.shape[-2]
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    q = q.reshape(-1, t_q, d)
    scores = torch.bmm(q * scale if scale != 1.0 else q,
                       k.reshape(-1, t_k, d).transpose(1, 2)).view(*lead, t_q, t_k)
    if scores.dtype in (torch.bfloat16, torch.float16):  # float64 stays float64
        scores = scores.float()
    if bias is not None:
        scores = scores + bias.to(scores.dtype)
    if mask is not None:  # the lowest finite value, as the reference path: never NaN
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        has_key = mask.any(dim=-1, keepdim=True)
        if not bool(has_key.all()):  # a query with no allowed key: zeros, not uniform
            weights = weights.masked_fill(~has_key, 0.0)
    weights = weights.to(v.dtype)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p)
    out = torch.bmm(weights.view(-1, t_q, t_k), v.reshape(-1, t_k, v.shape[-1]))
    return out.view(*lead, t_q, v.shape[-1])


class MultiHeadAttention(nn.Module):
    """§3.2.2: MultiHead(Q, K, V) = Concat(head_1..head_h) W^O, head_i = Attention(Q W_i^Q, ...).

    The h per-head projections are held as one d_model x d_model Linear each (q_proj, k_proj,
    v_proj), split into heads after projecting: the same parameters as the paper's h matrices.
    `scale=False` leaves out §3.2.1's 1/sqrt(d_k) (T5 folds it into the initialisation of q_proj).
    `head_dim` (d_k = d_v) other than d_model / h (T5 v1.1-small: 6 heads of 64 in d_model 512):
    the projections are d_model x (h * head_dim) and out_proj maps h * head_dim back to d_model.
    `value_dim` (d_v) other than d_k (Table 3 row B: d_k 16 or 32 with d_v 64): v_proj is
    d_model x (h * value_dim) and out_proj maps h * value_dim back to d_model.
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True,
                 scale: bool = True, head_dim: int | None = None, value_dim: int | None = None):
        super().__init__()
        if head_dim is None and d_model % n_heads:
            raise ValueError(f"invalid config: d_model={d_model}: must be divisible by n_heads={n_heads}")
        self.d_model, self.n_heads = d_model, n_heads
        self.head_dim = d_model // n_heads if head_dim is None else head_dim
        self.value_dim = self.head_dim if value_dim is None else value_dim
        inner = n_heads * self.head_dim  # = d_model in the paper (§3.2.2)
        self._widths = [inner, inner, n_heads * self.value_dim]  # Q, K, V projections' outputs
        self.scale = None if scale else 1.0  # None: 1/sqrt(d_k)
        self.dropout = dropout  # on attention probabilities; the paper has none (see BlockConfig)
        self.q_proj = nn.Linear(d_model, inner, bias=bias)
        self.k_proj = nn.Linear(d_model, inner, bias=bias)
        self.v_proj = nn.Linear(d_model, self._widths[2], bias=bias)
        self.out_proj = nn.Linear(self._widths[2], d_model, bias=bias)
        self._qkv_kept: tuple | None = None  # (weight, bias) of _kept_qkv; not a parameter
        self._keeping = 0  # > 0 inside joined_qkv_kept(): decoding, the weights fixed

    def _heads(self, x: Tensor) -> Tensor:
        b, t, _ = x.shape
        return x.view(b, t, self.n_heads, -1).transpose(1, 2)  # (B, H, T, Dh) (V: Dv)

    def _project_kv(self, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        if key is value and torch.is_grad_enabled():
            # Self-attention (or cross-attention on one memory): one matmul for both projections.
            # (Only while autograd records: under no_grad, e.g. decoding one position at a time,
            # copying the weights into one matrix on every call costs more than it saves.)
            w = torch.cat([self.k_proj.weight, self.v_proj.weight])
            b = None if self.k_proj.bias is None else torch.cat([self.k_proj.bias, self.v_proj.bias])
            k, v = F.linear(key, w, b).split(self._widths[1:], dim=-1)
        else:
            k, v = self.k_proj(key), self.v_proj(value)
        return self._heads(k), self._heads(v)  # (B, H, T_k, Dh), (B, H, T_k, Dv)

    def _project_qkv(self, query: Tensor, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        if query is key and key is value:
            # Self-attention: one fused matmul for Q, K and V (same numbers, fewer kernel calls).
            # The weights are joined per call (autograd sees through the cat), except inside a
            # decoding loop (joined_qkv_kept), which keeps one joined copy for all its steps:
            # joining them on every step cost more than it saved, while the kept copy made
            # greedy decoding 1.04-1.08x and beam 4 1.00-1.02x as fast (benchmarks/RESULTS.md,
            # "Decoding in one process"). Not under autocast without grad, which would cast the
            # copy (not a parameter, so not in autocast's cache) on every call.
            grad = torch.is_grad_enabled()
            if grad or not torch.is_autocast_enabled(query.device.type):
                w, b = self._kept_qkv() if self._keeping and not grad else self._joined_qkv()
                q, k, v = F.linear(query, w, b).split(self._widths, dim=-1)
                return self._heads(q), self._heads(k), self._heads(v)
        k, v = self._project_kv(key, value)
        return self._heads(self.q_proj(query)), k, v

    def _joined_qkv(self) -> tuple[Tensor, Tensor | None]:
        w = torch.cat([self.q_proj.weight, self.k_proj.weight, self.v_proj.weight])
        b = None if self.q_proj.bias is None else torch.cat(
            [self.q_proj.bias, self.k_proj.bias, self.v_proj.bias])
        return w, b

    def _kept_qkv(self) -> tuple[Tensor, Tensor | None]:
        """_joined_qkv, made once per decoding loop (joined_qkv_kept drops it on entry and exit).

        The copy once outlived the loop, keyed on the parameters' version counters to notice a
        change. A fused optimizer (torch.optim.Adam(fused=True), the trainer's on a GPU) updates
        in place without moving them, so validation between its steps read stale weights: on an
        H200 a classifier validated every 50 steps scored 0.47-0.80 where it scored 1.0."""
        if self._qkv_kept is None:
            with torch.no_grad():
                self._qkv_kept = self._joined_qkv()
        return self._qkv_kept

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        mask: Tensor | None = None,
        return_attn: bool = False,
        cache: AttentionCache | None = None,
        is_causal: bool = False,
        bias: Tensor | None = None,
    ) -> Tensor | tuple[Tensor, Tensor]:
        """query (B, T_q, D), key/value (B, T_k, D) -> out (B, T_q, D) [, weights (B, H, T_q, T_k)].

        mask: bool, broadcastable to (B, H, T_q, T_k), True = may attend.
        bias: float, broadcastable to (B, H, T_q, T_k) over all keys (cached ones included),
            added to the scores (T5's relative positions); masked keys stay masked.
        is_causal: a hint that `mask` is (or would be) the plain causal mask of self-attention; lets
            the fast path use the fused causal kernel without a materialised mask.
        cache: an AttentionCache. A "self" cache appends this call's keys/values to the cached ones
            (incremental decoding); a "static" cache computes them once (cross-attention on a
            fixed memory) and reuses them afterwards.

        key/value may have fewer rows than query: B_q = g x B_k, query rows g*i .. g*i+g-1 all
        reading key row i (beam search: the g beams of a sentence read its one encoding). The g
        queries then go through attention together, as g*T_q queries of row i: the same numbers
        as repeating the keys g times, with g times fewer keys and values to store and read.
        `mask` then has B_k rows (or 1) and one query row, broadcast over the g*T_q queries
        (a padding mask, as cross-attention's).
        """
        if cache is not None and cache.static and cache.k is not None:
            q, k, v = self._heads(self.q_proj(query)), cache.k, cache.v
        else:
            q, k, v = self._project_qkv(query, key, value)
            if cache is not None:
                k, v = cache.update(k, v)
        dropout_p = self.dropout if self.training else 0.0
        b, t_q, t_k = q.shape[0], q.shape[-2], k.shape[-2]
        group = b // k.shape[0] if k.shape[0] and b != k.shape[0] else 1
        if group > 1:  # (g*B_k, H, T_q, Dh) -> (B_k, H, g*T_q, Dh)
            if is_causal or bias is not None or b != group * k.shape[0]:
                raise ValueError(f"query batch {b} is not a multiple of key batch {k.shape[0]} "
                                 "(or a causal mask or a bias was asked for across rows)")
            q = q.view(k.shape[0], group, self.n_heads, t_q, self.head_dim).transpose(1, 2) \
                .reshape(k.shape[0], self.n_heads, group * t_q, self.head_dim)
        if is_causal and mask is None and t_q > 1 and (return_attn or t_q != t_k):
            mask = causal_mask(t_q, t_k, device=q.device)  # explicit only where a kernel needs it
        if return_attn:
            out, weights = scaled_dot_product_attention(q, k, v, mask, dropout_p, bias, self.scale)
        else:
            out = _fast_attention(q, k, v, mask, dropout_p, is_causal, bias, self.scale)
            weights = None
        if group > 1:  # back to (g*B_k, H, T_q, ...) in query order
            out = _ungroup(out, group, t_q)
            weights = None if weights is None else _ungroup(weights, group, t_q)
        out = self.out_proj(out.transpose(1, 2).reshape(b, t_q, self._widths[2]))
        # (B, T_q, D)
        return (out, weights) if return_attn else out
