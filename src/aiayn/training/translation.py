"""Training a translation model (§5): data -> tokenizer -> batches -> Trainer, and its metrics.

`train_translation(experiment)` is what `aiayn train CONFIG` and `aiayn demo` run. The model folder
it writes holds config.json (family "transformer", plus the experiment), model.safetensors,
tokenizer.json, train_state.pt, checkpoints/ and metrics.jsonl.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import sacrebleu
import torch
from torch import nn

from aiayn.data.batching import Batch, collate, token_batches
from aiayn.data.parallel import Pair, filter_long, read_parallel
from aiayn.data.special import PAD
from aiayn.data.tokenizer import Tokenizer
from aiayn.errors import UserError
from aiayn.folder import read_meta
from aiayn.models import Transformer
from aiayn.training.checkpoint import check_out_folder
from aiayn.training.experiment import DataConfig, Experiment
from aiayn.training.losses import label_smoothed_nll, token_accuracy
from aiayn.training.stream import BatchStream
from aiayn.training.trainer import Trainer, TrainResult, seed_everything
from aiayn.translator import decode_ids

FAMILY = "transformer"


def load_pairs(data: DataConfig) -> dict[str, list[Pair]]:
    """{"train": [...], "valid": [...]} (and "test" when the source has one)."""
    if data.corpus:
        from aiayn.data.corpora import load_corpus
        splits = load_corpus(data.corpus)
    elif data.corpus_dir:
        from aiayn.data.parallel import read_corpus_dir
        splits = read_corpus_dir(data.corpus_dir)
    else:
        splits = {"train": read_parallel(data.train_src, data.train_tgt)}
    if data.valid_src:
        splits["valid"] = read_parallel(data.valid_src, data.valid_tgt)
    if data.max_train_pairs:
        splits["train"] = splits["train"][:data.max_train_pairs]
    if not splits.get("train"):
        raise UserError("the training corpus is empty")
    if not splits.get("valid"):  # no validation split given: hold out the last 2% (max 500)
        n = min(500, max(1, len(splits["train"]) // 50))
        splits["valid"], splits["train"] = splits["train"][-n:], splits["train"][:-n]
    return splits


def translation_loss(eps: float) -> Callable[[nn.Module, Batch], tuple[torch.Tensor, int, dict]]:
    """§5.4 label-smoothed cross-entropy, summed over non-pad target tokens."""

    def loss_fn(model: nn.Module, batch: Batch):
        logits = model(batch.src, batch.tgt_in)  # (B, T, V)
        loss, nll, n = label_smoothed_nll(logits, batch.tgt_out, eps, PAD)
        correct, _ = token_accuracy(logits, batch.tgt_out, PAD)
        return loss, n, {"nll": nll, "accuracy": correct}

    return loss_fn


def encode_pairs(tok: Tokenizer, pairs: Sequence[Pair], max_len: int):
    src = tok.encode_batch([s for s, _ in pairs])
    tgt = tok.encode_batch([t for _, t in pairs])
    keep, _ = filter_long(list(zip(src, tgt, strict=True)), max_len)
    return [(src[i], tgt[i]) for i in keep]


def score_translations(hyps: Sequence[str], refs: Sequence[str]) -> dict[str, Any]:
    """sacreBLEU and chrF (with their signatures) and the exact-match rate, in percent."""
    bleu = sacrebleu.metrics.BLEU()
    chrf = sacrebleu.metrics.CHRF()
    b = bleu.corpus_score(list(hyps), [list(refs)])
    c = chrf.corpus_score(list(hyps), [list(refs)])
    exact = sum(h == r for h, r in zip(hyps, refs, strict=True)) / max(len(refs), 1) * 100
    return {"bleu": round(b.score, 2), "chrf": round(c.score, 2), "exact_match": round(exact, 2),
            "bleu_signature": str(bleu.get_signature()), "chrf_signature": str(chrf.get_signature())}


def make_evaluate(tok: Tokenizer, valid_ids, data: DataConfig, eps: float, max_tokens: int) -> Callable[[nn.Module], dict[str, Any]]:
    """Validation loss (label-smoothed and plain NLL per token) and BLEU/chrF/exact match."""
    batches = [collate([valid_ids[i] for i in b]) for b in
               token_batches([(len(s), len(t) + 1) for s, t in valid_ids], max_tokens, False)]
    loss_fn = translation_loss(eps)

    def evaluate(model: nn.Module) -> dict[str, Any]:
        device = next(model.parameters()).device
        total = nll = 0.0
        n_tok = 0
        for batch in batches:
            loss, n, extra = loss_fn(model, batch.to(device))
            total, nll, n_tok = total + float(loss), nll + float(extra["nll"]), n_tok + n
        hyp_ids = decode_ids(model, [s for s, _ in valid_ids], beam=data.valid_beam, device=device)
        hyps = tok.decode_batch(hyp_ids)
        refs = [tok.decode(t) for _, t in valid_ids]
        scores = score_translations(hyps, refs)
        return {"valid_loss": total / max(n_tok, 1), "valid_nll": nll / max(n_tok, 1),
                "valid_bleu": scores["bleu"], "valid_chrf": scores["chrf"],
                "valid_exact_match": scores["exact_match"]}

    return evaluate


def check_resume_matches(out: Path, exp: Experiment) -> None:
    saved = read_meta(out).get("experiment", {})
    for section, now in (("model", exp.model), ("data", exp.data.to_dict())):
        before = saved.get(section, {})
        for key in sorted(set(before) | set(now)):
            if before.get(key) != now.get(key):
                raise UserError(f"--resume: {section}.{key}={now.get(key)!r} differs from the "
                                f"run in {out} ({before.get(key)!r}); only train.* may change")


def train_translation(exp: Experiment, resume: bool = False, out: str | Path | None = None,
                      say: Callable[[str], None] = print,
                      meta: dict[str, Any] | None = None) -> tuple[TrainResult, Path]:
    """Run (or resume) the experiment; returns the result and the model folder.

    `meta` adds keys to the folder's config.json (e.g. {"demo": true})."""
    out = Path(out or exp.out or "")
    if not str(out) or out == Path(""):
        raise UserError(f"{exp.source}: no output folder: set out: in the config or pass --out")
    check_out_folder(out, resume)
    if resume:
        check_resume_matches(out, exp)
    cfg, data = exp.train, exp.data
    t0 = time.monotonic()
    splits = load_pairs(data)
    if resume:
        tok = Tokenizer.load(out)
    else:
        tok = Tokenizer.train([s for p in splits["train"] for s in p], data.vocab_size, data.tokenizer)
    model_cfg = exp.model_config(tok.vocab_size, PAD)
    train_ids = encode_pairs(tok, splits["train"], model_cfg.max_len)
    valid_ids = encode_pairs(tok, splits["valid"][:data.valid_pairs], model_cfg.max_len)
    if not train_ids:
        raise UserError(f"no training pair fits max_len={model_cfg.max_len}")
    say(f"data: {len(train_ids)} training pairs, {len(valid_ids)} validation pairs, "
        f"vocabulary {tok.vocab_size} ({time.monotonic() - t0:.1f} s)")
    lengths = [(len(s), len(t) + 1) for s, t in train_ids]
    stream = BatchStream(
        plan=lambda epoch: token_batches(lengths, cfg.max_tokens, True, cfg.seed + epoch),
        collate=lambda idx: collate([train_ids[i] for i in idx]))
    seed_everything(cfg.seed)
    model = Transformer(model_cfg)
    say(f"model: {model.num_parameters():,} parameters (d_model {model_cfg.d_model}, "
        f"{model_cfg.n_encoder_layers}+{model_cfg.n_decoder_layers} layers)")
    evaluate = make_evaluate(tok, valid_ids, data, cfg.label_smoothing, cfg.max_tokens)
    meta = {**(meta or {}), "task": "translation",
            "experiment": {"model": exp.model, "data": data.to_dict(), "train": cfg.to_dict()}}
    if not resume:
        tok.save(out)
    trainer = Trainer(model, cfg, stream, translation_loss(cfg.label_smoothing), out,
                      family=FAMILY, meta=meta, evaluate=evaluate)
    return trainer.fit(resume=resume), out
