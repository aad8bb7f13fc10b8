"""Language modelling: a decoder-only (GPT-style) Transformer trained on text.

    from aiayn import load
    lm = load("stdlib-lm")                     # a LanguageModel
    print(lm.generate("def parse(", max_new_tokens=50, temperature=0.8, top_k=40, seed=0))
    lm.evaluate(open("some.py").read())        # {"loss", "perplexity", "bits_per_byte", ...}

A document is tokenized as <s> text </s> (aiayn.data.special); documents are concatenated into one
token stream and cut into blocks of ``block_len + 1`` tokens, each block giving ``block_len``
next-token predictions. A prompt is <s> + its tokens; generation stops at </s>.

The same skeleton as every module of aiayn.tasks: data config, reading the data,
batches, the user-facing object (LanguageModel), training; the loss and the scores of text
(perplexity, bits per byte) are aiayn.tasks.language_model_loss's. LanguageModel checks a
request's memory before it decodes or scores (check_memory, check_eval_memory).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from aiayn.config import Config, _fail
from aiayn.config.experiment import Experiment, load_experiment
from aiayn.data.special import PAD
from aiayn.data.stdlib_corpus import Document, hold_out_tail, load_text_corpus, read_documents
from aiayn.data.tokenizer import Tokenizer
from aiayn.errors import ConfigError, UserError
from aiayn.folder import EXAMPLE_CHARS, load_model, new_folder, require_new_folder, save_model
from aiayn.folder.families import FAMILIES
from aiayn.folder.families import LANGUAGE_MODEL as FAMILY
from aiayn.generation.lm import stream as stream_tokens
from aiayn.models.decoder_lm import DecoderLM
from aiayn.tasks.language_model_loss import (
    DEFAULT_SPECIAL,
    doc_tokens,
    lm_loss,
    score_documents,
    score_tokens,
)
from aiayn.training import distributed
from aiayn.training.run import TrainResult, start_run
from aiayn.training.stream import BatchStream
from aiayn.training.trainer import Trainer

# -- data config ---------------------------------------------------------------------------------

LM_TOKENIZERS = ("byte_bpe", "char")


@dataclass
class LMDataConfig(Config):
    """What a language model learns from, and how the text is cut into training examples."""

    corpus: str | None = field(default=None, metadata={
        "help": 'a built-in text corpus ("python-stdlib"); None with --text files'})
    max_bytes: int | None = field(default=4_000_000, metadata={
        "help": "cap on the built-in corpus (None: all of it)"})
    tokenizer: str = field(default="byte_bpe", metadata={
        "help": "byte_bpe (GPT-2's byte-level BPE) | char"})
    vocab_size: int = field(default=8192, metadata={
        "help": "tokenizer vocabulary; the model's vocab_size is set from it"})
    block_len: int | None = field(default=None, metadata={
        "help": "tokens of context per training example; None: max_len"})
    valid_frac: float = field(default=0.05, metadata={
        "help": "--text without --valid: the last lines of each file held out"})
    eval_tokens: int = field(default=200_000, metadata={
        "help": "validation tokens scored at each evaluation (0: all)"})

    def __post_init__(self) -> None:
        self._check_types()
        if self.tokenizer not in LM_TOKENIZERS:
            _fail("tokenizer", self.tokenizer, f"must be one of {', '.join(LM_TOKENIZERS)}")
        for name in ("vocab_size", "block_len"):
            if getattr(self, name) is not None and getattr(self, name) <= 0:
                _fail(name, getattr(self, name), "must be a positive integer")
        if self.max_bytes is not None and self.max_bytes <= 0:
            _fail("max_bytes", self.max_bytes, "must be positive (or null for no cap)")
        if not 0.0 <= self.valid_frac < 1.0:
            _fail("valid_frac", self.valid_frac, "must be in [0, 1)")
        if self.eval_tokens < 0:
            _fail("eval_tokens", self.eval_tokens, "must be non-negative")


# The task's name in config files; its recipe (aiayn/configs/lm.yaml: nanoGPT's AdamW, warmup and
# cosine decay, no label smoothing) and the rest the loader needs are in the family table.
TASK = FAMILIES[FAMILY].task


def experiment(config: str | Path | dict[str, Any] | None = None, overrides: Sequence[str] = (),
               **options: Any) -> Experiment:
    """The run `aiayn lm train CONFIG OVERRIDES...` would train (options: out=, data=)."""
    return load_experiment(config, overrides, task=TASK, **options)


# -- data: documents and token streams -----------------------------------------------------------

def prompt_example(splits: dict[str, list[Document]]) -> str:
    """A prompt from the corpus (for the explorer): the first words of its first non-empty
    line, validation text first."""
    for _, text in [*splits.get("valid", []), *splits.get("train", [])]:
        line = next((line.strip() for line in text.splitlines() if line.strip()), "")
        if line:
            return " ".join(line.split()[:4])[:EXAMPLE_CHARS]
    return ""


# -- batches -------------------------------------------------------------------------------------

def block_batches(tokens: Tensor, block_len: int, batch_size: int, seed: int) -> BatchStream:
    """A resumable stream of (B, block_len + 1) blocks of the token stream, reshuffled each epoch.

    Epoch e cuts the stream at a random offset in [0, block_len) (0 for epoch 0) into
    non-overlapping blocks, visits them in a random order (seed, e), batch_size at a time.
    """
    n_blocks = (tokens.numel() - 1) // block_len
    if n_blocks < 1:
        raise UserError(f"the training text has {tokens.numel()} tokens: too few for one block of "
                        f"block_len={block_len} (lower data.block_len or give more text)")

    def plan(epoch: int) -> list[list[int]]:
        g = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
        # An offset that still leaves at least one whole block.
        max_offset = min(block_len - 1, tokens.numel() - 1 - block_len)
        offset = int(torch.randint(max_offset + 1, (1,), generator=g)) if epoch else 0
        count = (tokens.numel() - 1 - offset) // block_len
        starts = [offset + i * block_len for i in torch.randperm(count, generator=g).tolist()]
        return [starts[i:i + batch_size] for i in range(0, len(starts), batch_size)]

    def collate(starts: list[int]) -> Tensor:
        return torch.stack([tokens[s:s + block_len + 1] for s in starts])

    return BatchStream(plan, collate)


# -- the user-facing object -------------------------------------------------------------------

class LanguageModel:
    """A DecoderLM and its tokenizer, ready to generate and score text."""

    def __init__(self, model: DecoderLM, tokenizer: Tokenizer, device: str | torch.device = "cpu",
                 meta: dict[str, Any] | None = None):
        self.model = model.to(device).eval()
        self.tokenizer = tokenizer
        self.device = torch.device(device)
        self.meta = dict(meta or {})
        self.special = {**DEFAULT_SPECIAL, **self.meta.get("special_ids", {})}

    @property
    def banned(self) -> tuple[int, ...]:
        """Tokens generation never produces: padding, <s> and <unk> (not </s>, even when it
        shares an id with them, as GPT-2's <|endoftext|> does)."""
        s = self.special
        return tuple(i for i in (s["pad"], s["bos"], s["unk"]) if i is not None and i != s["eos"])

    @classmethod
    def load(cls, folder: str | Path, device: str | torch.device = "cpu") -> LanguageModel:
        model, meta = load_model(folder, device, expect=FAMILY)
        tokenizer = Tokenizer.load(folder, check_specials="special_ids" not in meta)
        if tokenizer.vocab_size > model.config.vocab_size:
            raise UserError(f"{folder}: tokenizer has {tokenizer.vocab_size} tokens but the model "
                            f"only {model.config.vocab_size}")
        return cls(model, tokenizer, device, meta)

    def save(self, folder: str | Path) -> Path:
        save_model(folder, FAMILY, self.model, self.meta)
        self.tokenizer.save(folder)
        return Path(folder)

    def stream(self, prompt: str = "", max_new_tokens: int = 100, temperature: float = 1.0,
               top_k: int | None = None, top_p: float | None = None,
               seed: int | None = None, no_repeat_ngram_size: int = 0) -> Iterator[str]:
        """The continuation of `prompt`, piece by piece as tokens are produced (KV cache).
        temperature 0 is greedy; no_repeat_ngram_size n > 0: no n-gram of tokens twice in the
        prompt and continuation together. A piece is held back while it ends in an incomplete
        character. Past the model's max_len the context slides (the last max_len tokens are
        kept, as in nanoGPT). Bad options, and a request beyond the memory (check_memory), raise
        errors here, before the first token is computed."""
        s = self.special
        encoded = self.tokenizer.encode(prompt)
        self.check_memory([encoded], max_new_tokens)
        ids = torch.tensor([[s["bos"], *encoded]], device=self.device)
        tokens = stream_tokens(self.model, ids, max_new_tokens, temperature=temperature,
                               top_k=top_k, top_p=top_p, seed=seed, eos_id=s["eos"],
                               pad_id=s["pad"], banned=self.banned, sliding_window=True,
                               no_repeat_ngram_size=no_repeat_ngram_size)
        return self._pieces(int(t) for t in tokens)

    def generate_batch(self, prompts: Sequence[str], max_new_tokens: int = 100,
                       num_samples: int = 1, temperature: float = 1.0, top_k: int | None = None,
                       top_p: float | None = None, seed: int | None = None,
                       no_repeat_ngram_size: int = 0) -> list[list[str]]:
        """`num_samples` continuations of each prompt, decoded together in one batch (prompts of
        different lengths are left-padded and masked; a row's result is what it would be alone
        when greedy). Returns one list of samples per prompt; a batch beyond the memory is
        refused first (check_memory)."""
        if num_samples < 1:
            raise ConfigError(f"num_samples={num_samples}: must be a positive integer")
        s = self.special
        encoded = [self.tokenizer.encode(p) for p in prompts]
        self.check_memory(encoded, max_new_tokens, num_samples)
        rows = [[s["bos"], *ids] for ids in encoded for _ in range(num_samples)]
        if not rows:
            return []
        steps = list(stream_tokens(self.model, rows, max_new_tokens, temperature=temperature,
                                   top_k=top_k, top_p=top_p, seed=seed, eos_id=s["eos"],
                                   pad_id=s["pad"], banned=self.banned, sliding_window=True,
                                   no_repeat_ngram_size=no_repeat_ngram_size))
        new = torch.stack(steps, 1).tolist() if steps else [[] for _ in rows]
        texts = ["".join(self._pieces(iter(r))) for r in new]
        return [texts[i:i + num_samples] for i in range(0, len(texts), num_samples)]

    def _pieces(self, tokens: Iterator[int]) -> Iterator[str]:
        out: list[int] = []
        shown = ""
        for token in tokens:
            if token in (self.special["eos"], self.special["pad"]):  # pad: the row ended
                break
            out.append(token)
            text = self.tokenizer.decode(out)
            if text.endswith("\ufffd"):  # a byte-level token that ends mid-character
                continue
            if len(text) > len(shown):
                yield text[len(shown):]
                shown = text
        text = self.tokenizer.decode(out)
        if len(text) > len(shown):
            yield text[len(shown):]

    def generate(self, prompt: str = "", max_new_tokens: int = 100, **options) -> str:
        """The continuation of `prompt` (without the prompt). Options as for `stream`."""
        return "".join(self.stream(prompt, max_new_tokens, **options))

    def evaluate(self, texts: str | Sequence[str], block_len: int | None = None,
                 batch_size: int = 8) -> dict[str, float]:
        """Loss (nats/token), perplexity and bits per byte of `texts` (each one a document), in
        blocks of block_len tokens (default: the one it was trained on, else max_len),
        batch_size of them at once; a batch beyond the memory is refused first
        (check_eval_memory)."""
        texts = [texts] if isinstance(texts, str) else list(texts)
        docs = [(str(i), t) for i, t in enumerate(texts)]
        block_len = self.block_len(block_len)
        self.check_eval_memory(texts, block_len, batch_size)
        return score_documents(self.model, self.tokenizer, docs, block_len, batch_size=batch_size,
                               special=self.special)

    def corpus_splits(self) -> dict[str, list[Document]]:
        """The documents it was trained and validated on, read again from its folder's data
        settings (load_splits: the built-in corpus's train / valid / test, or the --text and
        --valid files' train / valid)."""
        exp = self.meta.get("experiment", {})
        return load_splits(LMDataConfig.from_dict(exp.get("data", {})), exp.get("texts", []),
                           exp.get("valid_texts", []))

    def block_len(self, block_len: int | None = None) -> int:
        """The tokens of context a text is scored in: `block_len`, else the folder's
        data.block_len (what it was trained on), else the model's max_len."""
        trained = self.meta.get("experiment", {}).get("data", {}).get("block_len")
        return block_len or trained or self.model.config.max_len

    # -- memory checks (aiayn.sizes): a request refused in one line before any work, as
    # Translator.check_memory; `names` say how the messages name the options (the CLI's flags)

    def check_memory(self, prompts: Sequence[str] | Sequence[list[int]], max_new_tokens: int = 100,
                     num_samples: int = 1,
                     names: tuple[str, str] = ("max_new_tokens", "num_samples")) -> None:
        """Refuse (UserError, aiayn.sizes.check_count) max_new_tokens and num_samples that do
        not fit the memory: the samples of every prompt are one batch, each row keeping its
        tokens, and the keys and values of its last max_len of them. `prompts`: the texts, or
        their token ids (without <s>). stream and generate_batch check their requests so."""
        from aiayn.sizes import KEPT_TOKEN_BYTES, check_count, row_bytes

        new, samples = max_new_tokens, num_samples
        if not prompts or not (isinstance(new, int) and new >= 0 and isinstance(samples, int)
                               and samples >= 1):
            return  # nothing to decode, or a value the decoding refuses, naming it
        cfg = self.model.config
        check_count(names[0], new, len(prompts) * KEPT_TOKEN_BYTES,
                    f"the tokens of {len(prompts)} prompt(s)")
        longest = 1 + max(len(self.tokenizer.encode(p)) if isinstance(p, str) else len(p)
                          for p in prompts)  # <s> first
        row = row_bytes(cfg, longest, min(longest + new, cfg.max_len), new)
        check_count(names[1], samples, len(prompts) * row,
                    f"the batch ({len(prompts)} prompt(s) x N samples)", device=self.device)

    def check_eval_memory(self, texts: str | Sequence[str], block_len: int | None = None,
                          batch_size: int = 8, name: str = "batch_size") -> None:
        """Refuse (UserError) a batch_size that does not fit the memory when `texts` are
        scored: a batch is that many blocks of block_len tokens (no more than the texts have:
        a token is at least one byte), each with its logits. evaluate checks its texts so."""
        from aiayn.sizes import check_count, row_bytes

        if not isinstance(batch_size, int) or batch_size < 1:
            return  # a value the scoring refuses
        texts = [texts] if isinstance(texts, str) else texts
        block_len = self.block_len(block_len)
        tokens = sum(len(text.encode("utf-8")) + 2 for text in texts)  # + <s> and </s>
        check_count(name, batch_size, row_bytes(self.model.config, block_len, block_len),
                    f"a batch of {block_len}-token blocks",
                    used=min(batch_size, -(-tokens // block_len)), device=self.device)


def import_hf_gpt2(folder: str | Path, out: str | Path) -> LanguageModel:
    """A transformers GPT-2 folder (config.json + model.safetensors + its tokenizer) -> an aiayn
    language-model folder `out` (new or empty), with GPT-2's own special ids. Offline."""
    from aiayn.convert import read_hf_folder
    from aiayn.convert.hf_gpt2 import load_hf_folder, read_tokenizer, special_ids
    from aiayn.convert.hf_original import KEY, keep

    out = require_new_folder(out)
    hf_config, _, config_path = read_hf_folder(folder, "GPT-2")
    model = load_hf_folder(folder)
    tokenizer = Tokenizer(read_tokenizer(folder), check_specials=False)
    if tokenizer.vocab_size > model.config.vocab_size:
        raise UserError(f"{folder}: the tokenizer has {tokenizer.vocab_size} tokens but the model "
                        f"only {model.config.vocab_size}")
    meta = {"task": "language-modeling", "source": str(folder),
            "special_ids": special_ids(hf_config, config_path),
            KEY: keep(Path(folder), hf_config, model.config)}  # `aiayn export hf` gives it back
    lm = LanguageModel(model, tokenizer, "cpu", meta)
    with new_folder(out):
        lm.save(out)
    return lm


# -- train ---------------------------------------------------------------------------------------

def load_splits(data: LMDataConfig, texts: Sequence[str | Path] = (),
                valid_texts: Sequence[str | Path] = ()) -> dict[str, list[Document]]:
    """train / valid documents from --text files (and --valid files, or held-out tails), or the
    built-in corpus named by data.corpus."""
    if texts:
        train = read_documents(texts)
        if valid_texts:
            return {"train": train, "valid": read_documents(valid_texts)}
        train, valid = hold_out_tail(train, data.valid_frac)
        return {"train": train, "valid": valid}
    if data.corpus is None:
        raise UserError("no training text: give --text FILE... or --corpus python-stdlib (options "
                        "of `aiayn lm train`), or set data.corpus=python-stdlib")
    return load_text_corpus(data.corpus, max_bytes=data.max_bytes)  # train / valid / test


def train(exp: Experiment, resume: bool = False, out: str | Path | None = None,
          say: Callable[[str], None] = print, *, texts: Sequence[str | Path] = (),
          valid_texts: Sequence[str | Path] = ()) -> TrainResult:
    """Train a language model into the folder `out` (or the experiment's): tokenizer, config,
    weights, train state, metrics; on `texts` (else data.corpus), validated on `valid_texts`
    (else held-out tails). A resumed run must use the same model and data settings and texts;
    train settings (e.g. a larger max_steps) and the validation files may change."""
    # the run's folder has one writer, this process, until its last save (aiayn.folder.lock)
    with start_run(exp, resume, out, say, may_change=("valid_texts",),
                   inputs={"texts": [str(p) for p in texts],
                           "valid_texts": [str(p) for p in valid_texts]}) as run:
        say, data, cfg = run.say, exp.data, exp.train
        t0 = time.monotonic()
        splits = load_splits(data, texts, valid_texts)
        if resume:
            tokenizer = Tokenizer.load(run.folder)
        else:
            tokenizer = Tokenizer.train([t for _, t in splits["train"]], data.vocab_size, data.tokenizer)
        distributed.check_same(tokenizer.to_json(), "the tokenizer")
        model_cfg = exp.model_config(vocab_size=tokenizer.vocab_size, pad_id=PAD)
        block_len = data.block_len or model_cfg.max_len
        if model_cfg.positions == "learned" and block_len > model_cfg.max_len:
            raise UserError(f"data.block_len={block_len} exceeds model.max_len={model_cfg.max_len}")
        stream = torch.cat(doc_tokens(tokenizer, splits["train"]))
        say(f"data: {len(splits['train'])} training documents ({stream.numel():,} tokens), "
            f"{len(splits['valid'])} validation documents, vocabulary {tokenizer.vocab_size} "
            f"({time.monotonic() - t0:.1f} s)")
        lm = DecoderLM(model_cfg)
        say(f"model: {lm.num_parameters():,} parameters (d_model {model_cfg.d_model}, "
            f"{model_cfg.n_layers} layers, {model_cfg.n_heads} heads)")
        batches = block_batches(stream, block_len, max(1, cfg.max_tokens // block_len), cfg.seed)

        def evaluate(m) -> dict[str, float]:
            if not splits["valid"]:
                return {}
            r = score_documents(m, tokenizer, splits["valid"], block_len, data.eval_tokens)
            return {"valid_loss": r["loss"], "valid_ppl": r["perplexity"], "valid_bpb": r["bits_per_byte"]}

        if run.begin_folder():
            tokenizer.save(run.folder)
        trainer = Trainer(lm, cfg, batches, lambda m, b: lm_loss(m, b, cfg.label_smoothing), run,
                          family=FAMILY, meta={"task": "language-modeling",
                                               "example": prompt_example(splits)},
                          evaluate=evaluate)
        return trainer.fit()


__all__ = ["DEFAULT_SPECIAL", "LMDataConfig", "LanguageModel", "TASK", "block_batches",
           "doc_tokens", "experiment", "import_hf_gpt2", "lm_loss", "load_splits",
           "score_documents", "score_tokens", "train"]
