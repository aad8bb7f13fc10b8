"""Run a model folder on one input and collect its tokens and attention weights.

    from aiayn.viz.inspect import Inspector
    result = Inspector.load("demo-model").run("March 5, 2024")
    result.output                      # the translation (beam search) / the continuation
    result.maps                        # [AttentionMaps] for aiayn.viz.attention's figures

A translation model ("transformer") translates with its folder's search (Translator.search_options:
an imported model's generation settings, else §6.1's beam 4), then runs the decoder
teacher-forced on <s> + its own translation with ``return_attn=True``: encoder self-attention over
the source, decoder self-attention over <s> + translation, cross-attention from the decoder inputs
to the source (§3.2.3). A language model ("decoder_lm") continues the prompt greedily and shows the
causal self-attention over <s> + prompt + continuation; a BERT-style encoder ("encoder") shows its
bidirectional self-attention over [CLS] + text + [SEP]; a Vision Transformer ("vit") takes an
image file instead of text, predicts its class and shows the self-attention over [CLS] + patches
(labelled r<row>c<col>, row-major as aiayn.models.vit.patchify orders them). The axis labels are
the subword strings of exactly the ids the model saw (tokenizer.id_to_token), so labels and
weights always line up.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from aiayn.errors import UserError
from aiayn.folder.families import ENCODER, FAMILIES, LANGUAGE_MODEL, SEQ2SEQ, VIT
from aiayn.folder.load import folder_family
from aiayn.viz.attention import AttentionMaps, attention_maps


@dataclass
class Inspection:
    """One input through one model: text in/out, axis labels and attention per kind."""

    family: str
    input: str
    output: str | None
    labels: dict[str, list[str]]
    maps: list[AttentionMaps] = field(default_factory=list)
    # ViT only: the image as the model saw it, (H, W) grey or (H, W, C), and its patch grid.
    image: np.ndarray | None = None
    patch_size: int | None = None

    def to_json(self, digits: int = 5) -> dict[str, Any]:
        """Plain JSON: attention[kind] is [layer][head][query][key] (rounded to `digits`)."""
        return {
            "family": self.family, "input": self.input, "output": self.output,
            "tokens": self.labels,
            "kinds": [{"kind": m.kind, "title": m.title, "n_layers": m.n_layers,
                       "n_heads": m.n_heads, "query_axis": _axes(m)[0], "key_axis": _axes(m)[1]}
                      for m in self.maps],
            "attention": {m.kind: [w.round(digits).tolist() for w in m.layers] for m in self.maps},
        }


def _axes(m: AttentionMaps) -> tuple[str, str]:
    from aiayn.viz.attention import KIND_AXES
    return KIND_AXES.get(m.kind, ("tokens", "tokens"))


class Inspector:
    """The user-facing object of a model folder (aiayn.load), able to show its attention."""

    def __init__(self, obj: Any, family: str):
        if family not in FAMILIES:
            raise UserError(f"attention views support the model families {', '.join(FAMILIES)}, "
                            f"not {family!r}")
        self.obj, self.family = obj, family

    @classmethod
    def load(cls, folder: str | Path, device: str = "cpu", engine: str = "torch",
             **engine_options: Any) -> Inspector:
        """engine="ctranslate2": a translation folder's translations are decoded by
        CTranslate2 (Translator.load's engine), their attention drawn by the PyTorch model."""
        from aiayn.folder.load import load
        family = folder_family(folder).name  # checked before loading weights
        if engine != "torch" and family != SEQ2SEQ:
            raise UserError(f"--engine {engine}: for translation folders only, not {family!r}")
        if engine != "torch":
            from aiayn.tasks.translator import Translator
            return cls(Translator.load(folder, device, engine=engine, **engine_options), family)
        return cls(load(folder, device=device), family)

    @property
    def max_len(self) -> int:
        cfg = self.obj.model.config
        return int(cfg.n_patches + 1 if self.family == VIT else cfg.max_len)

    @property
    def example(self) -> str:
        """An input from the model's training data (config.json's "example", written by
        training), for the explorer to open with; "" when the folder has none."""
        example = getattr(self.obj, "meta", {}).get("example", "")
        return example if isinstance(example, str) and self.family != VIT else ""

    @property
    def search(self) -> dict[str, Any] | None:
        """A translation folder's search settings, as `aiayn translate` uses them (its own
        generation settings, else §6.1's); None for other families."""
        return self.obj.search_options() if self.family == SEQ2SEQ else None

    def run(self, text: str, beam: int | None = None, max_new_tokens: int = 30) -> Inspection:
        """Tokens and attention of `text` (a source sentence, a prompt, a text to encode, or for
        a ViT the path of an image file). `beam`: a translation's; None: the folder's search."""
        if not isinstance(text, str) or not text.strip():
            raise UserError("the input text is empty")
        if self.family == VIT:
            return self._classify(text.strip())
        if self.family == SEQ2SEQ:
            return self._translate(text.strip(), beam)
        if self.family == LANGUAGE_MODEL:
            return self._generate(text, max_new_tokens)
        return self._encode(text.strip())

    def _labels(self, ids) -> list[str]:
        return [self.obj.tokenizer.display_token(int(i)) for i in ids]

    @torch.no_grad()
    def _translate(self, text: str, beam: int | None) -> Inspection:
        tr = self.obj
        src_ids = tr.fit_source(tr.encode_source(text))[: self.max_len]
        out_ids = tr.decoder.decode_ids([src_ids], **tr.search_options(beam=beam),  # --engine's
                                        **tr.search_ids(), **tr.length_limits())[0]
        out_ids = out_ids[: self.max_len - 1]
        src = torch.tensor([src_ids], device=tr.device)
        start = tr.special["decoder_start"]  # <s>; an imported BART's </s>
        tgt_in = torch.tensor([[start, *out_ids]], device=tr.device)  # §3.1: shifted right
        _, attn = tr.model(src, tgt_in, return_attn=True)
        labels = {"source": self._labels(src_ids), "target": self._labels([start, *out_ids])}
        return Inspection(SEQ2SEQ, text, tr.tokenizer.decode(out_ids), labels,
                          attention_maps(attn, labels))

    @torch.no_grad()
    def _generate(self, prompt: str, max_new_tokens: int) -> Inspection:
        from aiayn.generation.lm import stream
        lm = self.obj
        special = lm.special  # an imported GPT-2 has its own (<|endoftext|>)
        ids = [special["bos"], *lm.tokenizer.encode(prompt)][: self.max_len]
        room = max(0, min(max_new_tokens, self.max_len - len(ids)))
        new: list[int] = []
        if room:
            steps = stream(lm.model, torch.tensor([ids], device=lm.device), room, temperature=0.0,
                           eos_id=special["eos"], pad_id=special["pad"], banned=lm.banned)
            for token in steps:  # greedy: the same continuation every time
                if int(token) == special["eos"]:
                    break
                new.append(int(token))
        seq = ids + new
        _, weights = lm.model(torch.tensor([seq], device=lm.device), return_attn=True)
        labels = {"tokens": self._labels(seq)}
        return Inspection(LANGUAGE_MODEL, prompt, lm.tokenizer.decode(new), labels,
                          attention_maps({"self": weights}, labels))

    @torch.no_grad()
    def _encode(self, text: str) -> Inspection:
        enc = self.obj
        ids = enc.token_ids(text)
        _, weights = enc.model(torch.tensor([ids], device=enc.device), return_attn=True)
        labels = {"tokens": self._labels(ids)}
        return Inspection(ENCODER, text, None, labels, attention_maps({"self": weights}, labels))

    @torch.no_grad()
    def _classify(self, path: str) -> Inspection:
        from aiayn.data.images import load_image
        clf = self.obj
        cfg = clf.model.config
        image = load_image(path, clf.mode, cfg.image_size)  # (C, H, W) in [0, 1]
        _, weights = clf.model.features(image[None].to(clf.device), return_attn=True)
        (name, prob), = clf.predict(image[None])
        grid = cfg.image_size // cfg.patch_size
        labels = {"tokens": ["[CLS]", *(f"r{r + 1}c{c + 1}" for r in range(grid) for c in range(grid))]}
        array = image.permute(1, 2, 0).numpy()
        return Inspection(VIT, path, f"{name} (p={prob:.2f})", labels,
                          attention_maps({"self": weights}, labels),
                          image=array[..., 0] if array.shape[-1] == 1 else array,
                          patch_size=cfg.patch_size)
