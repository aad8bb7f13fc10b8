"""The language model's loss and scores (aiayn.tasks.language_model): summed next-token
cross-entropy of blocks of a token stream, as the Trainer minimises it, and the loss,
perplexity and bits per byte of documents, as validation, `aiayn lm eval` and
LanguageModel.evaluate report them.

    loss, n_predictions, sums = lm_loss(model, blocks)      # blocks: (B, L + 1) token ids
    score_documents(model, tokenizer, docs, block_len)      # {"loss", "perplexity", ...}

A document is <s> text </s> (aiayn.data.special; an imported model keeps its own ids).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from aiayn.data.special import BOS, EOS, PAD, UNK
from aiayn.data.stdlib_corpus import Document
from aiayn.data.tokenizer import Tokenizer
from aiayn.errors import UserError
from aiayn.training.losses import label_smoothed_nll

# The special ids of a model trained here (data/special.py); an imported model (GPT-2: one
# <|endoftext|> for all of them, no unknown token) keeps its own in config.json's special_ids.
DEFAULT_SPECIAL: dict[str, int | None] = {"bos": BOS, "eos": EOS, "pad": PAD, "unk": UNK}

def doc_tokens(tokenizer: Tokenizer, docs: Sequence[Document], bos: int = BOS,
               eos: int = EOS) -> list[Tensor]:
    """<s> text </s> of each document, as 1-D LongTensors."""
    ids = tokenizer.encode_batch([text for _, text in docs])
    return [torch.tensor([bos, *d, eos], dtype=torch.long) for d in ids]


# -- loss ----------------------------------------------------------------------------------------

def lm_loss(model, batch: Tensor, label_smoothing: float = 0.0) -> tuple[Tensor, int, dict]:
    """The Trainer's loss_fn: summed next-token cross-entropy of blocks (B, L + 1)."""
    inputs, targets = batch[:, :-1], batch[:, 1:]
    logits = model(inputs)  # (B, L, V)
    if label_smoothing > 0:  # §5.4's smoothing; language models usually train without it
        loss, nll, n = label_smoothed_nll(logits, targets, label_smoothing, pad_id=None)
        return loss, n, {"nll": nll}
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1),
                           reduction="sum")
    return loss, targets.numel(), {}


# -- evaluate ------------------------------------------------------------------------------------

@torch.no_grad()
def score_tokens(model, tokens: Tensor, block_len: int, batch_size: int = 8) -> tuple[float, int]:
    """(summed NLL in nats, number of predictions) of a token stream, cut into non-overlapping
    windows of block_len predictions (each token predicted once, from the window's context)."""
    device = next(model.parameters()).device
    starts = list(range(0, tokens.numel() - 1, block_len))
    full = [s for s in starts if s + block_len + 1 <= tokens.numel()]
    nll, count = 0.0, 0
    groups = [full[i:i + batch_size] for i in range(0, len(full), batch_size)]
    if len(full) < len(starts):
        groups.append(starts[-1:])  # the shorter last window
    for group in groups:
        end = min(block_len + 1, tokens.numel() - group[0])
        batch = torch.stack([tokens[s:s + end] for s in group]).to(device)
        loss, n, _ = lm_loss(model, batch)
        nll += float(loss)
        count += n
    return nll, count


def score_documents(model, tokenizer: Tokenizer, docs: Sequence[Document], block_len: int,
                    max_tokens: int = 0, batch_size: int = 8,
                    special: dict[str, int | None] | None = None) -> dict[str, float]:
    """Loss, perplexity and bits per UTF-8 byte of documents (the first ones reaching max_tokens,
    when set). Bits per byte = summed NLL / ln 2 / bytes: comparable across tokenizers."""
    chosen, total = [], 0
    special = special or DEFAULT_SPECIAL
    for doc, ids in zip(docs, doc_tokens(tokenizer, docs, special["bos"], special["eos"]),
                        strict=True):
        if max_tokens and total >= max_tokens:
            break
        chosen.append((doc, ids))
        total += ids.numel()
    if not chosen:
        raise UserError("no validation text to score")
    nll, n = score_tokens(model, torch.cat([ids for _, ids in chosen]), block_len, batch_size)
    n_bytes = sum(len(text.encode("utf-8")) for (_, text), _ in chosen)
    return {"loss": nll / n, "perplexity": math.exp(min(nll / n, 700.0)),
            "bits_per_byte": nll / math.log(2) / max(n_bytes, 1), "tokens": n, "bytes": n_bytes}


__all__ = ["DEFAULT_SPECIAL", "doc_tokens", "lm_loss", "score_documents", "score_tokens"]
