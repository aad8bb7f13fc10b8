"""Translation (§5, §6.1): the encoder-decoder Transformer trained on sentence pairs.

    from aiayn.tasks import translation
    exp = translation.experiment("demo", ["train.max_minutes=2"], out="demo-model")
    result = translation.train(exp)                            # result.folder: the model
    translation.Translator.load(result.folder).translate(["March 5, 2024"])  # ["5. März 2024"]

The same skeleton as every module of aiayn.tasks: data config, reading the data,
batches, loss, evaluation, the user-facing object (Translator), training. The folder it writes
holds config.json (family "transformer", plus the experiment), model.safetensors, tokenizer.json,
train_state.pt, checkpoints/ and metrics.jsonl.

Sentences are sorted by length and decoded in batches (little padding), then put back in the
caller's order. Padding is masked out everywhere (aiayn.masks), so a sentence's translation does
not depend on the batch it was decoded in.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sacrebleu
import torch
from torch import nn

from aiayn.config import Config, _fail
from aiayn.data.batching import Batch, collate, token_batches
from aiayn.data.parallel import Pair, filter_long, read_parallel
from aiayn.data.special import BOS, EOS, PAD, UNK
from aiayn.data.tokenizer import Tokenizer
from aiayn.errors import UserError
from aiayn.families import FAMILIES
from aiayn.families import TRANSLATION as FAMILY
from aiayn.folder import EXAMPLE_CHARS, load_model, save_model
from aiayn.generation.search import decode_ids
from aiayn.models import Transformer
from aiayn.nn.precision import reduced_precision
from aiayn.training import distributed
from aiayn.training.experiment import Experiment, load_experiment
from aiayn.training.losses import smoothed_cross_entropy
from aiayn.training.run import TrainResult, start_run
from aiayn.training.stream import BatchStream
from aiayn.training.trainer import Trainer

# -- data config ---------------------------------------------------------------------------------


@dataclass
class DataConfig(Config):
    """Where the parallel text comes from and how it is tokenised (§5.1)."""

    corpus: str | None = field(default=None, metadata={
        "help": 'a built-in corpus: "dates-numbers" or "gettext"'})
    corpus_dir: str | None = field(default=None, metadata={
        "help": "a folder written by `aiayn data` ({train,valid}.{src,tgt})"})
    train_src: str | None = field(default=None, metadata={
        "help": "or aligned files, one sentence per line"})
    train_tgt: str | None = field(default=None, metadata={"help": "targets aligned with train_src"})
    valid_src: str | None = field(default=None, metadata={
        "help": "validation sources (with valid_tgt); none: held out from train"})
    valid_tgt: str | None = field(default=None, metadata={
        "help": "validation targets, aligned with valid_src"})
    tokenizer: str = field(default="bpe", metadata={
        "help": "§5.1: byte-pair encoding, one vocabulary for both languages (with model.init: "
                "the pretrained folder's)"})
    vocab_size: int = field(default=8000, metadata={
        "help": "joint source-target subword vocabulary (§5.1; with model.init: the folder's)"})
    split_digits: bool = field(default=True, metadata={
        "help": "every digit a token; false: digit runs may merge (SentencePiece)"})
    source_eos: bool = field(default=False, metadata={
        "help": "end every source with </s> (fairseq, tensor2tensor, Marian)"})
    max_train_pairs: int | None = field(default=None, metadata={
        "help": "use only the first N training pairs"})
    valid_pairs: int = field(default=500, metadata={
        "help": "validation pairs scored (loss and BLEU) at each evaluation"})
    valid_beam: int = field(default=1, metadata={
        "help": "beam for validation BLEU (1 = greedy: fast)"})
    valid_rouge: bool | None = field(default=None, metadata={
        "help": "validation ROUGE-1/2/L too (valid_rouge1, valid_rouge2, valid_rougeL: for "
                "train.stop_when); none: for summaries (corpus stdlib-docstrings, or a corpus_dir "
                "`aiayn data` wrote from it), without an objective"})
    objective: str | None = field(default=None, metadata={
        "help": 'denoising pretraining: "span" (T5 span corruption), "infill" (BART text '
                'infilling), "permute" (BART sentence permutation) or "infill+permute" (both, '
                "BART-large's) of the text, or of the sources of the corpus; none: aligned pairs"})
    text: list[str] | None = field(default=None, metadata={
        "help": "with objective: plain UTF-8 text files, a document per paragraph"})

    def __post_init__(self) -> None:
        self._check_types()
        sources = [name for name in ("corpus", "corpus_dir", "train_src", "text")
                   if getattr(self, name)]
        if len(sources) != 1:
            _fail("corpus", self.corpus, "give exactly one of corpus, corpus_dir, "
                  "train_src + train_tgt, or text (with objective)")
        from aiayn.data.denoising import OBJECTIVES
        if self.objective is not None and self.objective not in OBJECTIVES:
            _fail("objective", self.objective, f"must be one of {', '.join(OBJECTIVES)}")
        if self.text is not None and (self.objective is None or not all(
                isinstance(f, str) for f in self.text)):
            _fail("text", self.text, "a list of text files, for an objective (data.objective)")
        for a, b in (("train_src", "train_tgt"), ("valid_src", "valid_tgt")):
            if bool(getattr(self, a)) != bool(getattr(self, b)):
                _fail(a if not getattr(self, a) else b, None, f"{a} and {b} go together")
        for name in ("vocab_size", "valid_pairs", "valid_beam"):
            if getattr(self, name) <= 0:
                _fail(name, getattr(self, name), "must be a positive integer")
        if self.max_train_pairs is not None and self.max_train_pairs <= 0:
            _fail("max_train_pairs", self.max_train_pairs, "must be a positive integer")


# The task's name in config files; what the loader needs of it is in the family table. Its recipe
# is TrainConfig's own defaults, the paper's (§5.3-§5.4): no built-in config layered under.
TASK = FAMILIES[FAMILY].task


def experiment(config: str | Path | dict[str, Any] | None = None, overrides: Sequence[str] = (),
               **options: Any) -> Experiment:
    """The run `aiayn train CONFIG OVERRIDES...` would train (options: out=, data=)."""
    return load_experiment(config, overrides, task=TASK, **options)


# -- data ----------------------------------------------------------------------------------------

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


def load_documents(data: DataConfig) -> dict[str, list[str]]:
    """Denoising pretraining's documents: {"train": [...], "valid": [...]}, the paragraphs of
    data.text (the last 2% held out, at most 500), else the source sides of load_pairs."""
    if not data.text:
        return {k: [s for s, _ in v] for k, v in load_pairs(data).items()}
    from aiayn.data.denoising import read_documents
    docs = read_documents(data.text)
    n = min(500, max(1, len(docs) // 50))
    if len(docs) <= n:
        raise UserError(f"{data.text[0]}: {len(docs)} paragraph(s) of text: too few to train on")
    return {"train": docs[:-n], "valid": docs[-n:]}


def encode_pairs(tok: Tokenizer, pairs: Sequence[Pair], max_len: int, source_eos: bool = False):
    """(source ids, target ids) of the pairs that fit max_len; with `source_eos` each source
    ends with </s>, as Translator.encode_source gives it to a model trained so."""
    src = tok.encode_batch([s for s, _ in pairs])
    if source_eos:
        src = [ids + [EOS] for ids in src]
    tgt = tok.encode_batch([t for _, t in pairs])
    keep, _ = filter_long(list(zip(src, tgt, strict=True)), max_len)
    return [(src[i], tgt[i]) for i in keep]


# -- batches -------------------------------------------------------------------------------------

def pair_batches(ids: Sequence[tuple[list[int], list[int]]], max_tokens: int, seed: int) -> BatchStream:
    """§5.1: batches of pairs of similar length, ~max_tokens (source + target) each, reshuffled
    every epoch (seed + epoch)."""
    lengths = [(len(s), len(t) + 1) for s, t in ids]
    return BatchStream(plan=lambda epoch: token_batches(lengths, max_tokens, True, seed + epoch),
                       collate=lambda idx: collate([ids[i] for i in idx]))


def denoising_batches(docs: Sequence[list[int]], data: DataConfig, special: Sequence[int],
                      max_len: int, max_tokens: int, seed: int, stops=None) -> BatchStream:
    """Pretraining batches: every epoch a fresh corruption of each document (data/denoising.py),
    drawn from (seed, epoch, document), batched as pair_batches does. `stops`: the tokenizer's
    sentence_stops, for an objective that permutes sentences."""
    from aiayn.data.denoising import epoch_batches

    return BatchStream(plan=lambda epoch: epoch_batches(docs, data.objective, special, seed, epoch,
                                                        max_len, max_tokens, data.source_eos,
                                                        stops),
                       collate=collate)


# -- loss ----------------------------------------------------------------------------------------

def translation_loss(eps: float) -> Callable[[nn.Module, Batch], tuple[torch.Tensor, int, dict]]:
    """§5.4 label-smoothed cross-entropy, summed over non-pad target tokens."""

    def loss_fn(model: nn.Module, batch: Batch):
        keep = batch.tgt_out != PAD
        logits = model(batch.src, batch.tgt_in, select=keep)  # (N, V): non-pad targets only
        target = batch.tgt_out[keep]
        # in fp32 whatever the autocast dtype; the prediction for the accuracy comes with it
        loss, nll, predicted = smoothed_cross_entropy(logits, target, eps)
        correct = int((predicted == target).sum())
        return loss.sum(), len(target), {"nll": nll.sum(), "accuracy": correct}

    return loss_fn


# -- evaluate ------------------------------------------------------------------------------------

def score_translations(hyps: Sequence[str], refs: Sequence[str]) -> dict[str, Any]:
    """sacreBLEU and chrF (with their signatures) and the exact-match rate, in percent."""
    bleu = sacrebleu.metrics.BLEU()
    chrf = sacrebleu.metrics.CHRF()
    b = bleu.corpus_score(list(hyps), [list(refs)])
    c = chrf.corpus_score(list(hyps), [list(refs)])
    exact = sum(h == r for h, r in zip(hyps, refs, strict=True)) / max(len(refs), 1) * 100
    return {"bleu": round(b.score, 2), "chrf": round(c.score, 2), "exact_match": round(exact, 2),
            "bleu_signature": str(bleu.get_signature()), "chrf_signature": str(chrf.get_signature())}


def reports_rouge(data: DataConfig) -> bool:
    """Whether validation scores ROUGE: data.valid_rouge, else whether the pairs are summaries
    (a built-in summarization corpus, or a corpus_dir whose stats.json names one) and no
    denoising objective stands in for them."""
    from aiayn.summarization import SUMMARY_CORPORA

    if data.valid_rouge is not None:
        return data.valid_rouge
    name = data.corpus
    if data.corpus_dir and (Path(data.corpus_dir) / "stats.json").is_file():
        import json
        try:
            name = json.loads((Path(data.corpus_dir) / "stats.json").read_text()).get("corpus")
        except (ValueError, AttributeError):  # not aiayn's stats.json: no corpus named
            name = None
    return not data.objective and name in SUMMARY_CORPORA


def make_evaluate(tok: Tokenizer, valid_ids, data: DataConfig, eps: float,
                  max_tokens: int) -> Callable[[nn.Module], dict[str, Any]]:
    """Validation loss (label-smoothed and plain NLL per token) and BLEU/chrF/exact match; with
    reports_rouge(data), ROUGE-1/2/L F-measures as T5 (Raffel et al. 2020) and BART (Lewis et al.
    2020) report their summaries' (aiayn.summarization.rouge_scores)."""
    batches = [collate([valid_ids[i] for i in b]) for b in
               token_batches([(len(s), len(t) + 1) for s, t in valid_ids], max_tokens, False)]
    loss_fn = translation_loss(eps)
    rouge = reports_rouge(data)

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
        result = {"valid_loss": total / max(n_tok, 1), "valid_nll": nll / max(n_tok, 1),
                  "valid_bleu": scores["bleu"], "valid_chrf": scores["chrf"],
                  "valid_exact_match": scores["exact_match"]}
        if rouge:
            from aiayn.summarization import rouge_scores
            result.update({f"valid_{k}": v for k, v in rouge_scores(hyps, refs).items()})
        return result

    return evaluate


# -- the user-facing object ----------------------------------------------------------------------

# The special ids of a model trained here (data/special.py); the decoder starts from <s>. An
# imported model keeps its own in config.json's special_ids (BART: <s> 0, <pad> 1, </s> 2, and
# its decoder starts from </s>).
DEFAULT_SPECIAL: dict[str, int] = {"bos": BOS, "eos": EOS, "pad": PAD, "unk": UNK,
                                   "decoder_start": BOS}


class Translator:
    """A Transformer model and its tokenizer, ready to translate text."""

    def __init__(self, model, tokenizer: Tokenizer, device: str | torch.device = "cpu",
                 meta: dict | None = None):
        self.model = model.to(device).eval()
        self.tokenizer = tokenizer
        self.device = torch.device(device)
        self.meta = dict(meta or {})
        self.special = {**DEFAULT_SPECIAL, **self.meta.get("special_ids", {})}
        self.precision = "fp32"  # of the model's weights (to_precision)
        # Who decodes translate(): None = aiayn's own search over the PyTorch model; or
        # CTranslate2 (load(engine="ctranslate2"): aiayn.convert.ct2_engine.CT2Decoder), the
        # same tokens, search settings and output, another implementation.
        self.engine = None

    def encode_source(self, text: str) -> list[int]:
        """The source ids the model reads: the subwords of `text`, then </s> for a model that
        was trained with it (an imported Marian or BART model, meta "source_eos"), after <s>
        for one that starts with it (BART, meta "source_bos"); aiayn's own models read the
        subwords alone (§3.1 says nothing of source markers)."""
        ids = self.tokenizer.encode(text.strip())
        if self.meta.get("source_bos"):
            ids = [self.special["bos"], *ids]
        return ids + [self.special["eos"]] if self.meta.get("source_eos") else ids

    def fit_source(self, ids: list[int]) -> list[int]:
        """Source ids cut to the model's max_len. A source that ends in </s> (meta
        "source_eos": Marian's, BART's) keeps it, its subwords cut instead, as transformers'
        tokenizers truncate (truncation=True)."""
        limit = self.model.config.max_len
        if len(ids) <= limit:
            return ids
        return ids[:limit - 1] + ids[-1:] if self.meta.get("source_eos") else ids[:limit]

    def length_limits(self) -> dict[str, Any]:
        """The lengths an imported model's own search sets (meta "generation": BART's
        min_length / max_length, in output tokens, and its </s> forced at the limit), as
        decode_ids takes them; none for others."""
        folder = self.meta.get("generation") or {}
        return {"min_length": folder.get("min_length", 0),
                "max_new_tokens": folder.get("max_new_tokens"),
                "forced_eos": folder.get("forced_eos", False)}

    def search_ids(self) -> dict[str, int | None]:
        """The decoder's first input, end and padding, and the token every output starts with
        (an imported BART's forced_bos_token_id, <s>), as decode_ids takes them."""
        s = self.special
        return {"bos_id": s["decoder_start"], "eos_id": s["eos"], "pad_id": s["pad"],
                "forced_first_id": s.get("forced_bos")}

    @classmethod
    def load(cls, folder: str | Path, device: str | torch.device = "cpu",
             checkpoint: int | None = None, engine: str = "torch",
             **engine_options: Any) -> Translator:
        """The model folder's translator; with `checkpoint`, the weights of that saved step.
        engine="ctranslate2": translate() decodes with CTranslate2 (the folder's ctranslate2/
        directory, exported on first use; engine_options: compute_type, inter_threads,
        intra_threads, as aiayn.convert.ct2_engine.load_translator takes them)."""
        model, meta = load_model(folder, device, expect=FAMILY, checkpoint=checkpoint)
        tokenizer = Tokenizer.load(folder, check_specials="special_ids" not in meta)
        if tokenizer.vocab_size > model.config.vocab_size:
            raise UserError(f"{folder}: tokenizer has {tokenizer.vocab_size} tokens but the model "
                            f"only {model.config.vocab_size}")
        translator = cls(model, tokenizer, device, meta)
        if engine == "ctranslate2":
            from aiayn.convert.ct2_engine import CT2Decoder

            translator.engine = CT2Decoder.load(folder, model, tokenizer, meta, checkpoint,
                                                str(device), **engine_options)
        elif engine != "torch":
            raise UserError(f"engine={engine!r}: torch or ctranslate2")
        return translator

    def to_precision(self, precision: str) -> Translator:
        """Decode with the model in `precision` from now on (aiayn.nn.precision): fp32 (as it
        is), bf16 (a copy with bf16 weights) or int8 (a copy with int8 Linear layers; an fp32
        model on the CPU). Returns self; `save` then refuses (the folder keeps fp32 weights)."""
        self.model = reduced_precision(self.model, precision)
        self.precision = precision
        return self

    def save(self, folder: str | Path) -> Path:
        """Write a model folder (config, weights, tokenizer) that Translator.load reads back."""
        if self.precision != "fp32":
            raise UserError(f"a translator decoding in {self.precision} is not saved (its "
                            "weights are a reduced-precision copy); save the fp32 one")
        save_model(folder, FAMILY, self.model, self.meta)
        self.tokenizer.save(folder)
        return Path(folder)

    def search_options(self, beam: int | None = None, alpha: float | None = None,
                       length_penalty: str | None = None, early_stopping: str | None = None,
                       no_repeat_ngram_size: int | None = None) -> dict[str, Any]:
        """The search settings: those given, else the folder's (meta "generation": an imported
        Marian model's own, from its generation_config.json), else §6.1's (beam 4, alpha 0.6,
        GNMT penalty) with the exact stopping rule."""
        given = dict(beam=beam, alpha=alpha, length_penalty=length_penalty,
                     early_stopping=early_stopping, no_repeat_ngram_size=no_repeat_ngram_size)
        folder = self.meta.get("generation") or {}
        return {k: v if v is not None else folder.get(k, SEARCH_DEFAULTS[k])
                for k, v in given.items()}

    def translate(self, sentences: str | Sequence[str], beam: int | None = None,
                  alpha: float | None = None, length_penalty: str | None = None,
                  batch_size: int = 64, max_extra: int = 50, early_stopping: str | None = None,
                  warn: Callable[[str], None] | None = None, workers: int | str = 1,
                  no_repeat_ngram_size: int | None = None) -> list[str]:
        """Translations of `sentences`, in order; search settings as `search_options` resolves
        them (§6.1 defaults: beam 4, alpha 0.6, GNMT). `warn` (e.g. a CLI's warning printer)
        hears of inputs cut to the model's max_len. workers > 1: that many CPU processes decode
        the batches side by side (the same translations, faster on a multi-core CPU); "auto":
        one per CPU thread on a Linux CPU (the CLI's default), else 1."""
        opts = self.search_options(beam, alpha, length_penalty, early_stopping,
                                   no_repeat_ngram_size)
        if isinstance(sentences, str):
            sentences = [sentences]
        ids = [self.encode_source(s) for s in sentences]
        limit = self.model.config.max_len
        long = [i for i, x in enumerate(ids) if len(x) > limit]
        if long and warn is not None:
            warn(f"{len(long)} input sentence(s) longer than the model's {limit} positions are "
                 f"cut to {limit} tokens (the first: sentence {long[0] + 1})")
        ids = [self.fit_source(x) for x in ids]
        decode = decode_ids if self.engine is None else self.engine.decode_ids
        out = decode(self.model, ids, batch_size=batch_size, max_extra=max_extra,
                     device=self.device, workers=workers, **opts, **self.search_ids(),
                     **self.length_limits())
        return [self.tokenizer.decode(t) for t in out]

    @torch.no_grad()
    def score(self, sources: Sequence[str], targets: Sequence[str],
              batch_size: int = 64) -> list[dict[str, float]]:
        """Teacher-forced log-likelihood of each target given its source (fairseq-generate's
        --score-reference): per pair {"logprob": sum of log p over the target's subwords and
        </s> (after the <s> a BART model with forced_bos starts with) (nats), "tokens": how
        many}. Sentences longer than max_len are cut to it.

        The sum is the log-probability of the whole target string, so it compares models whose
        tokenizers differ (as per-token perplexity does not)."""
        if len(sources) != len(targets):
            raise UserError(f"{len(sources)} sources but {len(targets)} targets")
        limit, special = self.model.config.max_len, self.special
        first = [] if special.get("forced_bos") is None else [special["forced_bos"]]
        pairs = [(self.fit_source(self.encode_source(s)),
                  (first + self.tokenizer.encode(t.strip()))[:limit - 1])
                 for s, t in zip(sources, targets, strict=True)]
        out: list[dict[str, float]] = []
        for start in range(0, len(pairs), batch_size):
            batch = collate(pairs[start:start + batch_size], special["pad"],
                            special["decoder_start"], special["eos"])
            logits = self.model(batch.src.to(self.device), batch.tgt_in.to(self.device))
            logp = torch.log_softmax(logits.float(), dim=-1)
            tgt = batch.tgt_out.to(self.device)
            pad = tgt == special["pad"]
            token_lp = logp.gather(-1, tgt.unsqueeze(-1)).squeeze(-1).masked_fill(pad, 0)
            for row, n in zip(token_lp.sum(-1).tolist(), (~pad).sum(-1).tolist(),
                              strict=True):
                out.append({"logprob": row, "tokens": n})
        return out

    @torch.no_grad()
    def cross_attention(self, source: str, translation: str | None = None):
        """Encoder-decoder attention of one sentence pair (teacher-forced on `translation`,
        by default the model's own greedy translation).

        Returns (source tokens, target tokens, weights (n_layers, H, T, S)); the target tokens
        are the decoder's inputs, as `aiayn viz attention` labels them: <s> (the decoder's
        first input: BART's is </s>), then the translation's subwords (§3.1: shifted right; row
        t is where output token t+1 is chosen).
        """
        if translation is None:
            translation = self.translate([source], beam=1)[0]
        tok = self.tokenizer
        src_ids = self.fit_source(self.encode_source(source))
        forced = self.special.get("forced_bos")  # an imported BART's <s>, first in every output
        tgt_ids = ([] if forced is None else [forced]) + tok.encode(translation)
        tgt_ids = tgt_ids[:self.model.config.max_len - 1]
        src = torch.tensor([src_ids], device=self.device)
        start = self.special["decoder_start"]
        tgt_in = torch.tensor([[start] + tgt_ids], device=self.device)
        _, attn = self.model(src, tgt_in, return_attn=True)
        weights = torch.stack([w[0] for w in attn["cross"]]).float().cpu()  # (L, H, T, S)
        src_tokens = [tok.display_token(i) for i in src_ids]
        tgt_tokens = [tok.display_token(i) for i in [start, *tgt_ids]]
        return src_tokens, tgt_tokens, weights


# §6.1's search, for models whose folder names no other (Translator.search_options)
SEARCH_DEFAULTS: dict[str, Any] = {"beam": 4, "alpha": 0.6, "length_penalty": "gnmt",
                                   "early_stopping": "exact", "no_repeat_ngram_size": 0}


def import_hf_marian(folder: str | Path, out: str | Path) -> Translator:
    """A transformers MarianMTModel folder (config.json + model.safetensors, with OPUS-MT's
    vocab.json + source.spm or a tokenizer.json) -> an aiayn translation folder `out` (new or
    empty) that translates as the Marian model does. Offline; see convert/hf_marian.py."""
    return _import_hf("marian", folder, out)


def import_hf_bart(folder: str | Path, out: str | Path) -> Translator:
    """A transformers BartForConditionalGeneration folder (config.json + model.safetensors, with
    tokenizer.json or vocab.json + merges.txt) -> an aiayn translation folder `out` (new or
    empty) that translates as the BART model does, with BART's own special ids (meta
    "special_ids"). Offline; see convert/hf_bart.py."""
    return _import_hf("bart", folder, out, check_specials=False)


def import_hf_t5(folder: str | Path, out: str | Path) -> Translator:
    """A transformers T5ForConditionalGeneration folder (config.json + model.safetensors, with
    tokenizer.json or spiece.model) -> an aiayn translation folder `out` (new or empty) that
    translates as the T5 model does, its ids renumbered to aiayn's special ids. Offline; see
    convert/hf_t5.py."""
    return _import_hf("t5", folder, out)


def _import_hf(kind: str, folder: str | Path, out: str | Path,
               check_specials: bool = True) -> Translator:
    """The folder of convert/hf_{kind}.py's load_hf_folder, written into `out` by its one writer."""
    from aiayn.convert import hf_bart, hf_marian, hf_t5
    from aiayn.folder import new_folder, require_new_folder

    load_hf_folder = {"marian": hf_marian, "bart": hf_bart, "t5": hf_t5}[kind].load_hf_folder
    folder, out = Path(folder), require_new_folder(out)
    model, hf, notes = load_hf_folder(folder)
    meta = {"task": "translation", "source": str(folder), "imported": f"hf-{kind}", **notes}
    translator = Translator(model, Tokenizer(hf, check_specials=check_specials), "cpu", meta)
    with new_folder(out):
        translator.save(out)
    return translator


# -- train ---------------------------------------------------------------------------------------

def train(exp: Experiment, resume: bool = False, out: str | Path | None = None,
          say: Callable[[str], None] = print, *, meta: dict[str, Any] | None = None) -> TrainResult:
    """Run (or resume) the experiment into `out` (else the experiment's folder); the result
    names the folder (result.folder). `meta` adds keys to its config.json ({"demo": true})."""
    # folders from before data.source_eos existed trained without it
    # the run's folder has one writer, this process, until its last save (aiayn.lock)
    with start_run(exp, resume, out, say, added={"data.source_eos": False, "data.objective": None,
                                                 "data.text": None,
                                                 "data.valid_rouge": None}) as run:
        say, cfg, data = run.say, exp.train, exp.data
        t0 = time.monotonic()
        splits = load_documents(data) if data.objective else load_pairs(data)
        texts = splits["train"] if data.objective else [s for p in splits["train"] for s in p]
        tok, model = _tokenizer_and_model(exp, run, texts)
        distributed.check_same(tok.to_json(), "the tokenizer")
        model_cfg = model.config
        train_ids, valid_ids, special, stops = _encode(tok, splits, data, model_cfg.max_len,
                                                       cfg.seed)
        if len(splits["valid"]) > data.valid_pairs and not data.corpus:  # the user's own file
            say(f"warning: validation uses the first {data.valid_pairs} of {len(splits['valid'])} "
                f"{'documents' if data.objective else 'pairs'} (data.valid_pairs)")
        if not train_ids:
            raise UserError(f"no training pair fits max_len={model_cfg.max_len}")
        what = "pieces of text" if data.objective else "pairs"  # documents packed to max_len
        say(f"data: {len(train_ids)} training {what}, {len(valid_ids)} validation {what}, "
            f"vocabulary {tok.vocab_size} ({time.monotonic() - t0:.1f} s)")
        say(f"model: {model.num_parameters():,} parameters (d_model {model_cfg.d_model}, "
            f"{model_cfg.n_encoder_layers}+{model_cfg.n_decoder_layers} layers)")
        evaluate = make_evaluate(tok, valid_ids, data, cfg.label_smoothing, cfg.max_tokens)
        first = (splits["valid"] or splits["train"])[0]
        meta = {**(meta or {}), "task": "translation", "source_eos": data.source_eos,
                "example": (first if data.objective else first[0])[:EXAMPLE_CHARS]}
        if run.begin_folder():
            tok.save(run.folder)
        batches = denoising_batches(train_ids, data, special, model_cfg.max_len, cfg.max_tokens,
                                    cfg.seed, stops) if data.objective else \
            pair_batches(train_ids, cfg.max_tokens, cfg.seed)
        trainer = Trainer(model, cfg, batches, translation_loss(cfg.label_smoothing), run,
                          family=FAMILY, meta=meta, evaluate=evaluate)
        return trainer.fit()


def _tokenizer_and_model(exp: Experiment, run, texts: Sequence[str]) -> tuple[Tokenizer, nn.Module]:
    """A new run's tokenizer (trained on `texts`, plus the objective's tokens) and model; a
    resumed run's tokenizer; with model.init, the pretrained folder's (a resumed run's own)
    weights and tokenizer, its vocabulary kept (training.finetune)."""
    data, init = exp.data, exp.model.get("init")
    if init is not None:
        from aiayn.training.finetune import init_model
        folder = run.folder if run.resume else Path(str(init))
        model, meta = init_model(FAMILY, folder, exp.model, exp.source)
        if "special_ids" in meta:  # an imported BART: its <s>, <pad>, </s> are at its own ids
            raise UserError(f"{exp.source}: model.init={init}: a model with special ids of its "
                            "own (imported); fine-tuning one is not supported")
        return Tokenizer.load(folder), model
    if run.resume:
        tok = Tokenizer.load(run.folder)
    else:
        tok = Tokenizer.train(texts, data.vocab_size, data.tokenizer, data.split_digits)
        if data.objective:
            from aiayn.data.denoising import add_objective_tokens
            add_objective_tokens(tok, data.objective)
    return tok, Transformer(exp.model_config(vocab_size=tok.vocab_size, pad_id=PAD))


def _encode(tok: Tokenizer, splits: dict[str, list], data: DataConfig, max_len: int, seed: int):
    """(training examples, validation pairs, the objective's special ids, its sentence stops):
    the aligned pairs' ids (no special ids), or the documents' pieces and the validation
    documents' one fixed corruption (data/denoising.py)."""
    valid = splits["valid"][:data.valid_pairs]
    if not data.objective:
        return (encode_pairs(tok, splits["train"], max_len, data.source_eos),
                encode_pairs(tok, valid, max_len, data.source_eos), None, None)
    from aiayn.data import denoising as d
    special = d.objective_ids(tok, data.objective)
    stops = d.sentence_stops(tok) if d.permutes(data.objective) else None
    valid_ids = d.corrupt_documents(d.encode_documents(tok, valid, max_len), data.objective,
                                    special, seed, d.VALID_EPOCH, max_len, data.source_eos, stops)
    return d.encode_documents(tok, splits["train"], max_len), valid_ids, special, stops


__all__ = ["DataConfig", "TASK", "Translator", "decode_ids", "denoising_batches", "encode_pairs",
           "experiment", "load_documents", "load_pairs", "make_evaluate", "pair_batches",
           "reports_rouge", "score_translations", "train", "translation_loss"]
