"""One training step of aiayn's Transformer against fairseq's, with copied weights (issue 11).

fairseq 0.12 builds a small `transformer` (post-norm, shared embeddings, no dropout) in its own venv
(the one benchmarks/vs_fairseq.py builds), runs one batch through it and its label-smoothed loss,
and writes the weights, the batch, the logits, the loss and every gradient. This script copies the
weights into aiayn's Transformer (ids permuted: fairseq puts <s> at 0 and <pad> at 1, aiayn the
reverse; fairseq's sinusoids are laid out [sin | cos] from position 2, so its table is used) and
compares:

  - logits (every non-pad target position): equal to float32 rounding;
  - loss: equal up to the label-smoothing form (fairseq spreads eps over V - 1 classes, aiayn over
    V: the summed loss differs by ~1e-4 relative);
  - gradients of every parameter: equal to the same ~1e-3 relative (the same cause).

It settled where the gap of vs_fairseq.py came from: not the model, its loss or its gradients
(this script), but the tokenizer (see benchmarks/RESULTS.md).

    python benchmarks/fairseq_parity.py       # exit 0 when everything matches
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from vs_fairseq import VPY, ensure_venv  # noqa: E402

V, D, FF, HEADS, LAYERS, MAX = 100, 32, 64, 4, 2, 64
FAIRSEQ_SIDE = f"""
import argparse, sys, numpy as np, torch
from fairseq.models.transformer import TransformerModel, base_architecture
from fairseq.data import Dictionary
from fairseq.criterions.label_smoothed_cross_entropy import label_smoothed_nll_loss
torch.manual_seed(0)
d = Dictionary()
for i in range({V} - 4): d.add_symbol(f"w{{i}}")
args = argparse.Namespace(arch="transformer", share_all_embeddings=True, dropout=0.0,
    attention_dropout=0.0, activation_dropout=0.0, encoder_embed_dim={D}, decoder_embed_dim={D},
    encoder_ffn_embed_dim={FF}, decoder_ffn_embed_dim={FF}, encoder_attention_heads={HEADS},
    decoder_attention_heads={HEADS}, encoder_layers={LAYERS}, decoder_layers={LAYERS},
    max_source_positions={MAX}, max_target_positions={MAX})
base_architecture(args)
class Task: source_dictionary = d; target_dictionary = d
model = TransformerModel.build_model(args, Task()).train()
g = torch.Generator().manual_seed(1)
src = torch.randint(4, len(d), (3, 7), generator=g); src[1, 5:] = d.pad()
tgt = torch.randint(4, len(d), (3, 6), generator=g); tgt[2, 4:] = d.pad()
prev = torch.full_like(tgt, d.pad()); prev[:, 0] = d.eos()  # fairseq starts the decoder with EOS
for b in range(3):
    n = int((tgt[b] != d.pad()).sum()); prev[b, 1:n + 1] = tgt[b, :n][:tgt.shape[1] - 1]
logits, _ = model(src, (src != d.pad()).sum(1), prev)
lprobs = torch.log_softmax(logits.float(), -1)
loss, nll = label_smoothed_nll_loss(lprobs.view(-1, {V}), tgt.view(-1), 0.1,
                                    ignore_index=d.pad(), reduce=True)
loss.backward()
np.savez(sys.argv[1], src=src.numpy(), tgt=tgt.numpy(), prev=prev.numpy(),
         logits=logits.detach().numpy(), loss=loss.detach().numpy(), nll=nll.detach().numpy(),
         **{{k: v.detach().numpy() for k, v in model.state_dict().items()}},
         **{{"grad." + k: p.grad.numpy() for k, p in model.named_parameters() if p.grad is not None}})
"""
# aiayn parameter name pieces -> fairseq's
NAMES = {"attn_residual.norm": "self_attn_layer_norm", "ffn_residual.norm": "final_layer_norm",
         "self_residual.norm": "self_attn_layer_norm", "cross_attn": "encoder_attn",
         "cross_residual.norm": "encoder_attn_layer_norm", "ffn.w1": "fc1", "ffn.w2": "fc2"}


def fairseq_name(name: str) -> str:
    for ours, theirs in NAMES.items():
        name = name.replace(ours, theirs)
    return name


def fairseq_positions(n: int, offset: int = 0) -> torch.Tensor:
    """fairseq's SinusoidalPositionalEmbedding rows for positions 2.. (pad index 1 + 1)."""
    half = D // 2
    freq = torch.exp(torch.arange(half, dtype=torch.float) * -(math.log(10000) / (half - 1)))
    pos = torch.arange(2 + offset, 2 + offset + n, dtype=torch.float)[:, None] * freq[None]
    return torch.cat([torch.sin(pos), torch.cos(pos)], 1)


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args(argv)
    from aiayn.config import TransformerConfig
    from aiayn.models import Transformer
    from aiayn.training.losses import label_smoothed_nll

    ensure_venv()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "fairseq.npz"
        subprocess.run([str(VPY), "-c", FAIRSEQ_SIDE, str(out)], check=True,
                       stderr=subprocess.DEVNULL)
        ref = dict(np.load(out))
    perm = torch.arange(V)
    perm[0], perm[1] = 1, 0  # fairseq id -> aiayn id (an involution)
    model = Transformer(TransformerConfig(vocab_size=V, d_model=D, n_heads=HEADS, d_ff=FF,
                                          n_layers=LAYERS, dropout=0.0, max_len=MAX)).train()
    model.src_embed.positions.forward = fairseq_positions
    emb = torch.empty(V, D)
    emb[perm] = torch.from_numpy(ref["encoder.embed_tokens.weight"])
    state = {k: emb if "embed.tokens" in k or k == "output.weight"
             else torch.from_numpy(ref[fairseq_name(k)]) for k in model.state_dict()}
    model.load_state_dict(state)
    src, tgt, prev = (perm[torch.from_numpy(ref[k])] for k in ("src", "tgt", "prev"))
    logits = model(src, prev)
    keep = tgt != 0
    logit_diff = float((logits.detach()[..., perm] - torch.from_numpy(ref["logits"]))[keep].abs().max())
    loss, nll, _ = label_smoothed_nll(logits, tgt, 0.1, 0)
    loss.backward()
    rows = [("logits, max |diff|", logit_diff, 1e-5),
            ("NLL, relative diff", abs(float(nll) / float(ref["nll"]) - 1), 1e-6),
            ("label-smoothed loss, relative diff", abs(float(loss) / float(ref["loss"]) - 1), 1e-3)]
    worst, worst_name = 0.0, ""
    for name, p in model.named_parameters():
        want = torch.from_numpy(ref["grad." + ("encoder.embed_tokens.weight" if "embed.tokens" in name
                                               else fairseq_name(name))])
        got = p.grad[perm] if "embed.tokens" in name else p.grad
        if want.norm() < 1e-6:  # key biases: softmax-invariant, gradients are rounding noise
            continue
        rel = float((got - want).norm() / want.norm())
        if rel > worst:
            worst, worst_name = rel, name
    rows.append((f"gradients, worst relative diff ({worst_name})", worst, 5e-3))
    ok = True
    for name, value, limit in rows:
        ok &= value <= limit
        print(f"{name:<70} {value:.2e}  (limit {limit:.0e}) {'ok' if value <= limit else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
