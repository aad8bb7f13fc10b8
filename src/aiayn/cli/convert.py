"""`aiayn import KIND` (another library's checkpoint folder -> an aiayn model folder),
`aiayn export hf` (an aiayn model folder -> a Hugging Face `transformers` folder) and
`aiayn export ctranslate2` (a translation folder -> a CTranslate2 model directory)."""

from __future__ import annotations

import argparse
from pathlib import Path

from aiayn.cli.common import command_group


def register(sub) -> None:
    """Add `aiayn import KIND` and `aiayn export hf` to the `aiayn` parser."""
    kinds = command_group(sub, "import", "import_kind", "KIND",
                          help="convert a checkpoint folder of another library",
                          description="Convert a local checkpoint folder (config.json + "
                          "model.safetensors [+ tokenizer.json]) into an aiayn model folder.")
    for kind, (help_text, func) in IMPORTERS.items():
        p = kinds.add_parser(kind, help=help_text)
        p.add_argument("folder", metavar="DIR", help="checkpoint folder")
        p.add_argument("--out", required=True, help="aiayn model folder to write")
        p.set_defaults(func=func)

    kinds = command_group(sub, "export", "export_kind", "KIND",
                          help="write a model folder in another library's format",
                          description="Write an aiayn model folder in another library's format.")
    hf = kinds.add_parser("hf", help="Hugging Face transformers folder (config.json, "
                          "model.safetensors, tokenizer): a translation model -> MarianMTModel "
                          "(BartForConditionalGeneration when BART-shaped, "
                          "T5ForConditionalGeneration when T5-shaped), a "
                          "GPT-2-shaped language model -> GPT2LMHeadModel, a ViT -> "
                          "ViTForImageClassification, an encoder -> BERT")
    hf.add_argument("--model", required=True, metavar="DIR", help="aiayn model folder")
    hf.add_argument("--out", required=True, metavar="HFDIR", help="folder to write (new or empty)")
    hf.set_defaults(func=_export_hf)
    ct2 = kinds.add_parser("ctranslate2", help="CTranslate2 model directory (OpenNMT's C++ "
                           "inference engine; pip install aiayn[ct2]) of a translation model, "
                           "written with CTranslate2's own spec API")
    ct2.add_argument("--model", required=True, metavar="DIR", help="aiayn translation folder")
    ct2.add_argument("--out", required=True, metavar="CT2DIR",
                     help="folder to write (new or empty)")
    ct2.add_argument("--quantization", default=None, metavar="TYPE",
                     help="the weights' type: int8, int8_float32, int8_float16, int8_bfloat16, "
                          "int16, float16, bfloat16 or float32 (default; CTranslate2 can also "
                          "quantize when it loads them: its compute_type)")
    ct2.set_defaults(func=_export_ct2)


def _export_hf(args: argparse.Namespace) -> int:
    from aiayn.convert.hf_export import export_hf

    architecture = export_hf(args.model, args.out)
    print(f"exported {args.model} as a {architecture} into {args.out} (load it with "
          f"transformers' from_pretrained({str(args.out)!r}))")
    return 0


def _export_ct2(args: argparse.Namespace) -> int:
    from aiayn.convert.ctranslate2 import export

    out = export(args.model, args.out, args.quantization)
    print(f"exported {args.model} as a CTranslate2 model ({args.quantization or 'float32'}) "
          f"into {out} (load it with ctranslate2.Translator({str(out)!r}), or decode the folder "
          "with `aiayn translate --engine ctranslate2`)")
    return 0


def _import_bert(args: argparse.Namespace) -> int:
    from aiayn.tasks.text_encoder import import_hf_bert

    return _imported(args, import_hf_bert(args.folder, args.out).model)


def _import_vit(args: argparse.Namespace) -> int:
    from aiayn.convert.hf_original import KEY, keep
    from aiayn.convert.hf_vit import load_hf_folder
    from aiayn.folder.format import new_folder, read_json, require_new_folder
    from aiayn.tasks.image_classification import ImageClassifier

    out = require_new_folder(args.out)
    model = load_hf_folder(args.folder)
    kept = keep(Path(args.folder), read_json(Path(args.folder) / "config.json"), model.config)
    classifier = ImageClassifier(model, [str(i) for i in range(model.config.n_classes)], "RGB"
                                 if model.config.channels == 3 else "L",
                                 meta={"source": args.folder, KEY: kept})  # export gives it back
    with new_folder(out):
        classifier.save(out)
    print(f"imported {args.folder}: {model.num_parameters():,} parameters into {args.out}")
    return 0


def _import_gpt2(args: argparse.Namespace) -> int:
    from aiayn.tasks.language_model import import_hf_gpt2

    return _imported(args, import_hf_gpt2(args.folder, args.out).model)


def _import_marian(args: argparse.Namespace) -> int:
    from aiayn.tasks.translator import import_hf_marian

    return _imported_translator(args, import_hf_marian(args.folder, args.out).model)


def _import_bart(args: argparse.Namespace) -> int:
    from aiayn.tasks.translator import import_hf_bart

    return _imported_translator(args, import_hf_bart(args.folder, args.out).model)


def _import_t5(args: argparse.Namespace) -> int:
    from aiayn.tasks.translator import import_hf_t5

    return _imported_translator(args, import_hf_t5(args.folder, args.out).model)


def _imported_translator(args: argparse.Namespace, model) -> int:
    cfg = model.config
    print(f"imported {args.folder}: {model.num_parameters():,} parameters "
          f"({cfg.n_encoder_layers}+{cfg.n_decoder_layers} layers, d_model {cfg.d_model}, "
          f"vocabulary {cfg.vocab_size}) into {args.out}")
    return 0


def _imported(args: argparse.Namespace, model) -> int:
    cfg = model.config
    print(f"imported {args.folder}: {model.num_parameters():,} parameters ({cfg.n_layers} layers, "
          f"d_model {cfg.d_model}, vocabulary {cfg.vocab_size}) into {args.out}")
    return 0


# kind -> (help, function)
IMPORTERS = {
    "hf-gpt2": ("GPT-2 folder (transformers GPT2LMHeadModel, with tokenizer.json or "
                "vocab.json + merges.txt) -> language model", _import_gpt2),
    "hf-marian": ("Marian folder (transformers MarianMTModel, e.g. OPUS-MT, with vocab.json + "
                  "source.spm or tokenizer.json) -> translation model", _import_marian),
    "hf-bart": ("BART folder (transformers BartForConditionalGeneration, with tokenizer.json or "
                "vocab.json + merges.txt) -> translation model", _import_bart),
    "hf-t5": ("T5 folder (transformers T5ForConditionalGeneration, v1.0 or v1.1, with "
              "tokenizer.json or spiece.model) -> translation model", _import_t5),
    "hf-bert": ("BERT-architecture folder (e.g. all-MiniLM-L6-v2) -> encoder model", _import_bert),
    "hf-vit": ("ViT folder (transformers ViTModel / ViTForImageClassification) -> vit model",
               _import_vit),
}
