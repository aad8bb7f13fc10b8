"""The Translator: a seq2seq model and its tokenizer, ready to translate or summarize (§6.1).

    from aiayn.tasks.translator import Translator
    t = Translator.load("demo-model")              # a folder aiayn.tasks.seq2seq trained
    t.translate(["March 5, 2024"])                 # ["5. März 2024"]
    t.score(["March 5, 2024"], ["5. März 2024"])   # [{"logprob": ..., "tokens": ...}]

The user-facing object of the seq2seq task (aiayn.tasks.seq2seq, the recipe that trains its
folders, re-exports it), and the importers of transformers' encoder-decoder checkpoints
(import_hf_marian, import_hf_bart, import_hf_t5), which write a folder it loads.

Sentences are sorted by length and decoded in batches (little padding), then put back in the
caller's order. Padding is masked out everywhere (aiayn.masks), so a sentence's translation does
not depend on the batch it was decoded in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from aiayn.data.special import BOS, EOS, PAD, UNK
from aiayn.data.tokenizer import Tokenizer
from aiayn.errors import UserError
from aiayn.folder.families import FAMILIES
from aiayn.folder.families import SEQ2SEQ as FAMILY
from aiayn.folder.format import ENSEMBLE_FILE
from aiayn.folder.load import load_config, load_model
from aiayn.folder.weights import save_model
from aiayn.generation.decoder import ENGINES, Decoder, TorchDecoder
from aiayn.nn.precision import reduced_precision

# -- the user-facing object ----------------------------------------------------------------------

# The special ids of a model trained here (data/special.py); the decoder starts from <s>. An
# imported model keeps its own in config.json's special_ids (BART: <s> 0, <pad> 1, </s> 2, and
# its decoder starts from </s>).
DEFAULT_SPECIAL: dict[str, int] = {"bos": BOS, "eos": EOS, "pad": PAD, "unk": UNK,
                                   "decoder_start": BOS}


class Translator:
    """A Transformer model and its tokenizer, ready to translate text."""

    def __init__(self, model, tokenizer: Tokenizer, device: str | torch.device = "cpu",
                 meta: dict | None = None, *, config=None, build: Callable[[], Any] | None = None):
        """`model`, or None with its `config` and `build`, which makes it on first use (an
        engine that decodes without it: load(engine="ctranslate2"))."""
        self._model = None if model is None else model.to(device).eval()
        self.config = model.config if model is not None else config  # the model's (max_len)
        self._build = build
        self.tokenizer = tokenizer
        self.device = torch.device(device)
        self.meta = dict(meta or {})
        self.special = {**DEFAULT_SPECIAL, **self.meta.get("special_ids", {})}
        self.precision = "fp32"  # of the model's weights (to_precision)
        # Who decodes translate(): None = aiayn's own search over the PyTorch model; or
        # CTranslate2 (load(engine="ctranslate2"): aiayn.generation.ctranslate2.CT2Decoder),
        # the same tokens, search settings and output, another implementation.
        self.engine: Decoder | None = None

    @property
    def model(self):
        """The PyTorch model; built from the folder on first use when an engine decodes."""
        if self._model is None:
            self._model = self._build().to(self.device).eval()
        return self._model

    @model.setter
    def model(self, model) -> None:
        self._model = model

    @property
    def decoder(self) -> Decoder:
        """What translate() decodes with (aiayn.generation.decoder): the engine, else aiayn's
        own search over the PyTorch model."""
        return self.engine if self.engine is not None else self.torch_decoder()

    def torch_decoder(self) -> TorchDecoder:
        """aiayn's own search and scoring over the PyTorch model, with this model's ids."""
        ids = self.search_ids()
        return TorchDecoder(self.model, self.device, bos_id=ids["bos_id"], eos_id=ids["eos_id"],
                            pad_id=ids["pad_id"], counted_once=ids["counted_once"])

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
        limit = self.config.max_len
        if len(ids) <= limit:
            return ids
        return ids[:limit - 1] + ids[-1:] if self.meta.get("source_eos") else ids[:limit]

    def length_limits(self, min_length: int | None = None) -> dict[str, Any]:
        """The lengths the search keeps to, as decode_ids takes them: `min_length` output tokens
        before </s> may end a translation (given, else the folder's own, else 1 as fairseq's
        min_len: an empty translation only when asked for); an imported model's own search
        (meta "generation": BART's min_length / max_length, in output tokens, its </s> forced at
        the limit) keeps its settings as they came, transformers' default 0 included, so that
        it searches as transformers does."""
        folder = self.meta.get("generation")
        if min_length is None:
            min_length = MIN_LENGTH if folder is None else folder.get("min_length", 0)
        folder = folder or {}
        return {"min_length": min_length,
                "max_new_tokens": folder.get("max_new_tokens"),
                "forced_eos": folder.get("forced_eos", False)}

    def search_ids(self) -> dict[str, Any]:
        """The decoder's first input, end and padding, the token every output starts with (an
        imported BART's forced_bos_token_id, <s>), and the ids left out of the softmax (an
        imported T5's or Marian's <pad>, whose row is its <s> too: counted once, as `score`
        and the original count it), as decode_ids takes them."""
        from aiayn.convert.hf_original import repeated_ids

        s = self.special
        return {"bos_id": s["decoder_start"], "eos_id": s["eos"], "pad_id": s["pad"],
                "forced_first_id": s.get("forced_bos"), "counted_once": repeated_ids(self.meta)}

    @classmethod
    def load(cls, folder: str | Path | Sequence[str | Path], device: str | torch.device = "cpu",
             checkpoint: int | None = None, engine: str = "torch",
             **engine_options: Any) -> Translator:
        """The model folder's translator; with `checkpoint`, the weights of that saved step.
        engine="ctranslate2": translate() decodes with CTranslate2 (the folder's ctranslate2/
        directory, exported on first use; engine_options: compute_type, inter_threads,
        intra_threads, as aiayn.convert.ctranslate2_dir.load_translator takes them): the
        PyTorch model is then built only if something needs it (score, cross_attention).
        Several folders, or a folder of an ensemble (ensemble.json): load_ensemble."""
        if engine not in ENGINES:
            raise UserError(f"engine={engine!r}: torch or ctranslate2")
        members = ensemble_members(folder)
        if members is not None:  # several folders, or a folder of an ensemble
            return cls.load_ensemble(members, device, checkpoint=checkpoint, engine=engine)
        if not isinstance(folder, (str, Path)):  # a list of one folder
            folder = folder[0]
        if engine == "torch":
            model, meta = load_model(folder, device, expect=FAMILY, checkpoint=checkpoint)
            config = model.config
        else:
            model, (config, meta, _) = None, load_config(folder, FAMILY, checkpoint)
        tokenizer = Tokenizer.load(folder, check_specials="special_ids" not in meta)
        if tokenizer.vocab_size > config.vocab_size:
            raise UserError(f"{folder}: tokenizer has {tokenizer.vocab_size} tokens but the model "
                            f"only {config.vocab_size}")
        translator = cls(model, tokenizer, device, meta, config=config,
                         build=lambda: load_model(folder, device, FAMILY, checkpoint)[0])
        if engine == "ctranslate2":
            from aiayn.convert.ctranslate2_dir import load_decoder

            translator.engine = load_decoder(folder, config, tokenizer, meta, checkpoint,
                                             str(device), **engine_options)
        return translator

    @classmethod
    def load_ensemble(cls, folders: Sequence[str | Path], device: str | torch.device = "cpu",
                      checkpoint: int | None = None, engine: str = "torch") -> Translator:
        """One translator over several model folders (aiayn.generation.ensemble): the mean of
        their next-token distributions at every step. They must hold one tokenizer (trained on
        one corpus with one vocabulary size) and the same special ids; the first folder's
        settings (meta) are the translator's."""
        if engine != "torch":
            raise UserError(f"engine={engine}: an ensemble decodes with aiayn's own search "
                            "(--engine torch) alone")
        if checkpoint is not None:
            raise UserError("--checkpoint picks one folder's weights: give it for a single model, "
                            "not an ensemble")
        from aiayn.generation.ensemble import Ensemble

        first = cls.load(folders[0], device)
        models = [first.model]
        for folder in folders[1:]:
            other = cls.load(folder, device)
            if other.tokenizer.to_json() != first.tokenizer.to_json():
                raise UserError(f"{folder}: its tokenizer differs from {folders[0]}'s: the models "
                                "of an ensemble must share one (one corpus, one data.vocab_size)")
            if other.special != first.special or other.meta.get("source_eos") != \
                    first.meta.get("source_eos"):
                raise UserError(f"{folder}: its special ids or source markers differ from "
                                f"{folders[0]}'s")
            models.append(other.model)
        return cls(Ensemble(models), first.tokenizer, device, first.meta)

    def to_precision(self, precision: str) -> Translator:
        """Decode with the model in `precision` from now on (aiayn.nn.precision): fp32 (as it
        is), bf16 (a copy with bf16 weights) or int8 (a copy with int8 Linear layers; an fp32
        model on the CPU). Returns self; `save` then refuses (the folder keeps fp32 weights)."""
        self.model = reduced_precision(self.model, precision)
        self.precision = precision
        return self

    def save(self, folder: str | Path) -> Path:
        """Write a model folder (config, weights, tokenizer) that Translator.load reads back."""
        self._single("saved as one model folder")
        if self.precision != "fp32":
            raise UserError(f"a translator decoding in {self.precision} is not saved (its "
                            "weights are a reduced-precision copy); save the fp32 one")
        save_model(folder, FAMILY, self.model, self.meta)
        self.tokenizer.save(folder)
        return Path(folder)

    def _single(self, what: str) -> None:
        """Refuse `what` for an ensemble: it is one model's."""
        from aiayn.generation.ensemble import Ensemble

        if isinstance(self._model, Ensemble):
            raise UserError(f"an ensemble of {len(self._model.members)} models is not {what}: "
                            "use one of its folders")

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
                  no_repeat_ngram_size: int | None = None,
                  min_length: int | None = None, *,
                  search: dict[str, Any] | None = None) -> list[str]:
        """Translations of `sentences`, in order; search settings as `search_options` resolves
        them (§6.1 defaults: beam 4, alpha 0.6, GNMT), lengths as `length_limits` (at least one
        token unless min_length=0). `warn` (e.g. a CLI's warning printer)
        hears of inputs cut to the model's max_len. workers > 1: that many CPU processes decode
        the batches side by side (the same translations, faster on a multi-core CPU); "auto":
        one per CPU thread on a Linux CPU (the CLI's default), else 1. `search`: the settings
        as search_options resolved them already (the CLI's), used as they are."""
        opts = search if search is not None else self.search_options(
            beam, alpha, length_penalty, early_stopping, no_repeat_ngram_size)
        if isinstance(sentences, str):
            sentences = [sentences]
        ids = [self.encode_source(s) for s in sentences]
        limit = self.config.max_len
        long = [i for i, x in enumerate(ids) if len(x) > limit]
        if long and warn is not None:
            warn(f"{len(long)} input sentence(s) longer than the model's {limit} positions are "
                 f"cut to {limit} tokens (the first: sentence {long[0] + 1})")
        ids = [self.fit_source(x) for x in ids]
        self.check_memory(ids, opts["beam"], batch_size, workers, max_extra)
        out = self.decoder.decode_ids(ids, batch_size=batch_size, max_extra=max_extra,
                                      workers=workers, **opts, **self.search_ids(),
                                      **self.length_limits(min_length))
        return [self.tokenizer.decode(t) for t in out]

    def check_memory(self, sources: Sequence[str] | Sequence[list[int]], beam: int | None = None,
                     batch_size: int = 64, workers: int | str = 1, max_extra: int | None = None,
                     names: tuple[str, str] = ("beam", "batch_size")) -> None:
        """Refuse (UserError, aiayn.sizes.check_count) a beam and a batch size that do not fit the
        memory, before decoding: each of the worker processes decodes a batch of sentences,
        every beam of a sentence a row of keys and values reaching the source's length plus the
        output's (§6.1: at most the input + max_extra tokens, default 50). `sources`: the sentences, or
        their ids as encode_source gives them; `names`: how the messages name the beam and the
        batch size (the CLI's "--beam", "--batch-size"); `beam` None: the folder's or §6.1's
        (search_options). translate() checks its inputs so."""
        from aiayn.generation.config import GenerationConfig
        from aiayn.generation.workers import resolve_workers
        from aiayn.sizes import check_count, row_bytes

        beam = self.search_options()["beam"] if beam is None else beam
        if not sources or not all(isinstance(n, int) and n >= 1 for n in (beam, batch_size)):
            return  # nothing to decode, or a value the search refuses, naming it
        cfg = self.config
        ids = [self.encode_source(s) if isinstance(s, str) else s for s in sources]
        src = min(max(len(x) for x in ids), cfg.max_len)
        out = src + (GenerationConfig.max_extra if max_extra is None else max_extra)
        each = row_bytes(cfg, 1, src + out, kept=out)
        check_count(names[0], beam, each, "the search of one sentence", device=self.device)
        batches = -(-len(ids) // batch_size)
        side_by_side = min(resolve_workers(workers, self.device), batches)
        check_count(names[1], batch_size, beam * each * side_by_side,
                    f"{side_by_side} batch(es) of sentences with beam {beam} at once",
                    used=min(batch_size, len(ids)), device=self.device)

    def encode_target(self, text: str) -> list[int]:
        """The target ids a model is trained to produce before </s>: the subwords of `text`;
        for an imported BART (meta "source_bos") <s> first, as BartTokenizer makes every
        sequence, labels too (text_target: <s> ... </s>), and transformers' BART computes its
        loss on; for a model whose outputs start with a forced token (forced_bos) that token."""
        ids = self.tokenizer.encode(text.strip())
        forced = self.special.get("forced_bos")
        if self.meta.get("source_bos"):
            return [self.special["bos"], *ids]
        return ids if forced is None else [forced, *ids]

    @torch.no_grad()
    def score(self, sources: Sequence[str], targets: Sequence[str],
              batch_size: int = 64) -> list[dict[str, float]]:
        """Teacher-forced log-likelihood of each target given its source (fairseq-generate's
        --score-reference): per pair {"logprob": sum of log p over the target's ids
        (encode_target's: BART's <s> first) and </s> (nats), "tokens": how many}. The decoder
        reads them shifted right after the decoder's start (§3.1; BART: </s> <s> ..., as
        transformers' shift_tokens_right with decoder_start_token_id), and an imported T5's or
        Marian's <pad> row, which the import made its <s> as well, counts once in the softmax
        (convert/hf_original.repeated_ids), so an imported model scores what transformers'
        loss on the same labels sums. Sentences longer than max_len are cut to it. Computed in
        the model's dtype, at least float32.

        The sum is the log-probability of the whole target string, so it compares models whose
        tokenizers differ (as per-token perplexity does not)."""
        if len(sources) != len(targets):
            raise UserError(f"{len(sources)} sources but {len(targets)} targets")
        limit = self.config.max_len
        pairs = [(self.fit_source(self.encode_source(s)), self.encode_target(t)[:limit - 1])
                 for s, t in zip(sources, targets, strict=True)]
        return self.torch_decoder().score_ids(pairs, batch_size)

    @torch.no_grad()
    def cross_attention(self, source: str, translation: str | None = None):
        """Encoder-decoder attention of one sentence pair (teacher-forced on `translation`,
        by default the model's own greedy translation).

        Returns (source tokens, target tokens, weights (n_layers, H, T, S)); the target tokens
        are the decoder's inputs, as `aiayn viz attention` labels them: <s> (the decoder's
        first input: BART's is </s>), then the translation's subwords (§3.1: shifted right; row
        t is where output token t+1 is chosen).
        """
        self._single("asked for its attention")
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


# Not in the paper: </s> may not be a translation's first token (fairseq's min_len, default 1).
# Without it a beam of a model trained for 1,000 updates ended 15 of 1,000 test sentences with an
# empty line that greedy translated (Translator.length_limits).
MIN_LENGTH = 1
# §6.1's search, for models whose folder names no other (Translator.search_options)
SEARCH_DEFAULTS: dict[str, Any] = {"beam": 4, "alpha": 0.6, "length_penalty": "gnmt",
                                   "early_stopping": "exact", "no_repeat_ngram_size": 0}


def ensemble_members(folder: str | Path | Sequence[str | Path]) -> list[Path] | None:
    """The member folders of an ensemble: the folders given (two or more), or those an
    ensemble folder's ensemble.json lists (relative to it, as `aiayn train auto` writes them);
    None for one model folder."""
    if not isinstance(folder, (str, Path)):
        folders = [Path(f) for f in folder]
        if len(folders) == 1:
            return ensemble_members(folders[0])
        return [m for f in folders for m in (ensemble_members(f) or [f])]
    path = Path(folder) / ENSEMBLE_FILE
    if not path.is_file():
        return None
    import json

    try:
        listed = json.loads(path.read_text(encoding="utf-8"))["members"]
        if not isinstance(listed, list) or not listed or \
                not all(isinstance(m, str) for m in listed):
            raise ValueError("members must be a list of folder names")
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise UserError(f"{path}: not a valid ensemble file ({e})") from None
    return [Path(folder) / m for m in listed]


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
    from aiayn.folder.format import new_folder, require_new_folder

    load_hf_folder = {"marian": hf_marian, "bart": hf_bart, "t5": hf_t5}[kind].load_hf_folder
    folder, out = Path(folder), require_new_folder(out)
    model, hf, notes = load_hf_folder(folder)
    meta = {"task": FAMILIES[FAMILY].task, "source": str(folder), "imported": f"hf-{kind}", **notes}
    translator = Translator(model, Tokenizer(hf, check_specials=check_specials), "cpu", meta)
    with new_folder(out):
        translator.save(out)
    return translator


__all__ = ["ENSEMBLE_FILE", "Translator", "ensemble_members", "import_hf_bart", "import_hf_marian",
           "import_hf_t5"]
