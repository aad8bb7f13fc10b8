"""The seq2seq task (§5, §6.1): the encoder-decoder Transformer trained on pairs of texts:
translation (the paper's), summarization, and T5/BART denoising pretraining (data.objective).

    from aiayn.tasks import seq2seq
    exp = seq2seq.experiment("demo", ["train.max_minutes=2"], out="demo-model")
    result = seq2seq.train(exp)                                # result.folder: the model
    seq2seq.Translator.load(result.folder).translate(["March 5, 2024"])  # ["5. März 2024"]

The same skeleton as every module of aiayn.tasks: data config, reading the data, batches, loss
(aiayn.tasks.seq2seq_loss), evaluation, training. The user-facing object (Translator: it
translates and summarizes) and the importers of transformers' checkpoints (import_hf_marian,
import_hf_bart, import_hf_t5) live in aiayn.tasks.translator, and are re-exported here. The
folder it writes holds config.json (family "transformer", plus the experiment),
model.safetensors, tokenizer.json, train_state.pt, checkpoints/ and metrics.jsonl. The task was
named "translation" before; aiayn.tasks.translation and `task: translation` are its aliases.
"""
from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import sacrebleu
from torch import nn

from aiayn.config import Config, _fail
from aiayn.config.experiment import Experiment, load_experiment
from aiayn.convert.hf_original import repeated_ids
from aiayn.data.batching import PackedPairs, collate, token_batches
from aiayn.data.parallel import Pair, filter_long, read_parallel
from aiayn.data.special import EOS, PAD
from aiayn.data.tokenizer import Tokenizer
from aiayn.errors import UserError
from aiayn.folder import EXAMPLE_CHARS
from aiayn.folder.families import FAMILIES
from aiayn.folder.families import SEQ2SEQ as FAMILY
from aiayn.generation.search import decode_ids
from aiayn.models import Transformer
from aiayn.tasks.seq2seq_loss import seq2seq_loss
from aiayn.tasks.translator import Translator, import_hf_bart, import_hf_marian, import_hf_t5
from aiayn.training import distributed
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
    bpe_dropout: float = field(default=0.0, metadata={
        "help": "BPE-dropout (Provilkov et al. 2020): each epoch the training pairs segmented "
                "anew, each merge skipped with this probability (0.1 in the paper); 0: plain BPE. "
                "Validation and translation keep plain BPE"})
    concat: float = field(default=0.0, metadata={
        "help": "concatenation augmentation (Nguyen et al. 2021, data/concat.py): each epoch "
                "adds this share of the training pairs' number of pairs, each two random "
                "training pairs joined (sources and targets); 1: as many as the corpus holds; "
                "0: none"})
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
        if not 0 <= self.bpe_dropout < 1:
            _fail("bpe_dropout", self.bpe_dropout, "must be in [0, 1)")
        if self.bpe_dropout and (self.objective or self.tokenizer != "bpe"):
            _fail("bpe_dropout", self.bpe_dropout, "applies to aligned pairs with "
                  "data.tokenizer=bpe (not to an objective or another tokenizer)")
        if not 0 <= self.concat <= 4:
            _fail("concat", self.concat, "must be in [0, 4]")
        if self.concat and self.objective:
            _fail("concat", self.concat, "applies to aligned pairs, not to an objective")
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
    lengths = np.array([(len(s), len(t) + 1) for s, t in ids], dtype=np.int64).reshape(-1, 2)
    packed = PackedPairs(ids)  # collate([ids[i] for i in idx]), in tensor ops
    return BatchStream(plan=lambda epoch: token_batches(lengths, max_tokens, True, seed + epoch),
                       collate=packed.collate)


def epoch_batches(epoch_ids: Callable[[int], list[tuple[list[int], list[int]]]], data: DataConfig,
                  max_len: int, max_tokens: int, seed: int) -> BatchStream:
    """pair_batches of examples that change every epoch: `epoch_ids(epoch)` (the training pairs'
    ids, e.g. segmented anew), with data.concat's joined pairs added (data/concat.py), their
    draws from (seed, epoch)."""
    from aiayn.data.concat import concatenated

    def plan(epoch: int) -> list[list[tuple[list[int], list[int]]]]:
        ids = epoch_ids(epoch)
        if data.concat:
            ids = ids + concatenated(ids, data.concat, random.Random(f"concat {seed} {epoch}"),
                                     max_len, data.source_eos)
        lengths = [(len(s), len(t) + 1) for s, t in ids]
        return [[ids[i] for i in b] for b in token_batches(lengths, max_tokens, True, seed + epoch)]

    return BatchStream(plan=plan, collate=collate)


def bpe_dropout_batches(tok: Tokenizer, pairs: Sequence[Pair], data: DataConfig, max_len: int,
                        max_tokens: int, seed: int) -> BatchStream:
    """pair_batches of pairs segmented anew every epoch with BPE-dropout (data.bpe_dropout;
    data/bpe_dropout.py), its draws from (seed, epoch): the pairs that fit max_len that epoch
    (and data.concat's joins of them: epoch_batches)."""
    from aiayn.data.bpe_dropout import BpeDropout

    bpe = BpeDropout(tok)
    words = [(bpe.words(s), bpe.words(t)) for s, t in pairs]
    eos = [EOS] if data.source_eos else []

    def segmented(epoch: int) -> list[tuple[list[int], list[int]]]:
        rng = random.Random(f"bpe-dropout {seed} {epoch}")
        src = bpe.encode([s for s, _ in words], data.bpe_dropout, rng)
        tgt = bpe.encode([t for _, t in words], data.bpe_dropout, rng)
        encoded = [(s + eos, t) for s, t in zip(src, tgt, strict=True)]
        return [encoded[i] for i in filter_long(encoded, max_len)[0]]

    return epoch_batches(segmented, data, max_len, max_tokens, seed)


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
        except (ValueError, AttributeError, RecursionError):  # not aiayn's stats.json
            name = None
    return not data.objective and name in SUMMARY_CORPORA


def make_evaluate(tok: Tokenizer, valid_ids, data: DataConfig, eps: float,
                  max_tokens: int, counted_once: Sequence[int] = ()
                  ) -> Callable[[nn.Module], dict[str, Any]]:
    """Validation loss (label-smoothed and plain NLL per token) and BLEU/chrF/exact match; with
    reports_rouge(data), ROUGE-1/2/L F-measures as T5 (Raffel et al. 2020) and BART (Lewis et al.
    2020) report their summaries' (rouge_scores). `counted_once`: seq2seq_loss's, searched too."""
    batches = [collate([valid_ids[i] for i in b]) for b in
               token_batches([(len(s), len(t) + 1) for s, t in valid_ids], max_tokens, False)]
    loss_fn = seq2seq_loss(eps, counted_once)
    rouge = reports_rouge(data)

    def evaluate(model: nn.Module) -> dict[str, Any]:
        device = next(model.parameters()).device
        total = nll = 0.0
        n_tok = 0
        for batch in batches:
            loss, n, extra = loss_fn(model, batch.to(device))
            total, nll, n_tok = total + float(loss), nll + float(extra["nll"]), n_tok + n
        hyp_ids = decode_ids(model, [s for s, _ in valid_ids], beam=data.valid_beam, device=device,
                             counted_once=counted_once)
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


# -- train ---------------------------------------------------------------------------------------

def train(exp: Experiment, resume: bool = False, out: str | Path | None = None,
          say: Callable[[str], None] = print, *, meta: dict[str, Any] | None = None,
          world: distributed.World | None = None) -> TrainResult:
    """Run (or resume) the experiment into `out` (else the experiment's folder); the result
    names the folder (result.folder), and holds the trained model as a Translator
    (result.trained, the folder's weights) and the splits read (result.splits). `meta` adds keys
    to its config.json ({"demo": true}); `world`: start_run's (processes joined already)."""
    # folders from before data.source_eos existed trained without it
    # the run's folder has one writer, this process, until its last save (aiayn.folder.lock)
    with start_run(exp, resume, out, say, added={"data.source_eos": False, "data.objective": None,
                                                 "data.text": None,
                                                 "data.valid_rouge": None, "data.concat": 0.0},
                   world=world) as run:
        say, cfg, data = run.say, exp.train, exp.data
        t0 = time.monotonic()
        splits = load_documents(data) if data.objective else load_pairs(data)
        texts = splits["train"] if data.objective else [s for p in splits["train"] for s in p]
        tok, model, notes = _tokenizer_and_model(exp, run, texts)
        data = _as_pretrained_reads(data, notes, say)
        counted_once = repeated_ids(notes)  # an imported T5's or Marian's <pad>: also its <s>
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
        evaluate = make_evaluate(tok, valid_ids, data, cfg.label_smoothing, cfg.max_tokens,
                                 counted_once)
        first = (splits["valid"] or splits["train"])[0]
        meta = {**(meta or {}), **notes, "task": TASK, "source_eos": data.source_eos,
                "example": (first if data.objective else first[0])[:EXAMPLE_CHARS]}
        if run.begin_folder():
            tok.save(run.folder)
        if data.objective:
            batches = denoising_batches(train_ids, data, special, model_cfg.max_len,
                                        cfg.max_tokens, cfg.seed, stops)
        elif data.bpe_dropout:
            batches = bpe_dropout_batches(tok, splits["train"], data, model_cfg.max_len,
                                          cfg.max_tokens, cfg.seed)
        elif data.concat:
            batches = epoch_batches(lambda _: list(train_ids), data, model_cfg.max_len,
                                    cfg.max_tokens, cfg.seed)
        else:
            batches = pair_batches(train_ids, cfg.max_tokens, cfg.seed)
        loss_fn = seq2seq_loss(cfg.label_smoothing, counted_once, cfg.rdrop)
        result = Trainer(model, cfg, batches, loss_fn, run, family=FAMILY, meta=meta,
                         evaluate=evaluate).fit()
        device = next(model.parameters()).device  # where the Trainer left it
        meta = {**meta, "experiment": run.record} if run.record is not None else meta
        return replace(result, trained=Translator(model, tok, device, meta), splits=splits)


# What a pretrained folder's meta says of its vocabulary and how its model reads, which a model
# fine-tuned from it (model.init) keeps: an import's original folder (hf_original: the export
# gives back its config.json, tokenizer and ids), special ids, source markers, own search.
PRETRAINED_NOTES = ("imported", "hf_original", "special_ids", "source_bos", "source_eos",
                    "generation")


def _tokenizer_and_model(exp: Experiment, run, texts: Sequence[str]
                         ) -> tuple[Tokenizer, nn.Module, dict[str, Any]]:
    """A new run's tokenizer (trained on `texts`, plus the objective's tokens) and model; a
    resumed run's tokenizer; with model.init, the pretrained folder's (a resumed run's own)
    weights and tokenizer (training.finetune), and its meta's PRETRAINED_NOTES ({} without)."""
    data, init = exp.data, exp.model.get("init")
    if init is not None:
        from aiayn.training.finetune import init_model
        folder = run.folder if run.resume else Path(str(init))
        model, meta = init_model(FAMILY, folder, exp.model, exp.source)
        if "special_ids" in meta:  # an imported BART: its <s>, <pad>, </s> are at its own ids
            raise UserError(f"{exp.source}: model.init={init}: a model with special ids of its "
                            "own (an imported BART); fine-tuning one is not supported")
        notes = {k: meta[k] for k in PRETRAINED_NOTES if k in meta}
        return Tokenizer.load(folder), model, notes
    if run.resume:
        tok = Tokenizer.load(run.folder)
    else:
        tok = Tokenizer.train(texts, data.vocab_size, data.tokenizer, data.split_digits)
        if data.objective:
            from aiayn.data.denoising import add_objective_tokens
            add_objective_tokens(tok, data.objective)
    return tok, Transformer(exp.model_config(vocab_size=tok.vocab_size, pad_id=PAD)), {}


def _as_pretrained_reads(data: DataConfig, notes: dict[str, Any],
                         say: Callable[[str], None]) -> DataConfig:
    """`data` with the sources marked as an imported model reads them (T5's and Marian's end
    with </s>: Translator.encode_source), whatever data.source_eos says; aiayn's own as it says."""
    if "imported" not in notes or bool(notes.get("source_eos")) == data.source_eos:
        return data
    source_eos = bool(notes.get("source_eos"))
    say(f"data: sources {'end' if source_eos else 'do not end'} with </s>, as the imported "
        f"model ({notes['imported']}, model.init) reads them (data.source_eos={source_eos})")
    return data.replace(source_eos=source_eos)


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
           "epoch_batches", "experiment", "import_hf_bart", "import_hf_marian", "import_hf_t5",
           "load_documents", "load_pairs", "make_evaluate", "pair_batches", "reports_rouge",
           "score_translations", "seq2seq_loss", "train"]
