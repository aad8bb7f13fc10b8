"""`aiayn export hf`: an aiayn model folder -> a Hugging Face `transformers` folder."""

from __future__ import annotations

import argparse


def register(sub) -> None:
    """Add `aiayn export hf` to the `aiayn` parser."""
    exp = sub.add_parser("export", help="write a model folder in another library's format",
                         description="Write an aiayn model folder in another library's format.")
    exp.set_defaults(func=lambda args: (exp.print_help(), 2)[1])
    kinds = exp.add_subparsers(dest="export_kind", metavar="KIND")
    hf = kinds.add_parser("hf", help="Hugging Face transformers folder (config.json, "
                          "model.safetensors, tokenizer): a translation model -> MarianMTModel, a "
                          "GPT-2-shaped language model -> GPT2LMHeadModel")
    hf.add_argument("--model", required=True, metavar="DIR", help="aiayn model folder")
    hf.add_argument("--out", required=True, metavar="HFDIR", help="folder to write (new or empty)")
    hf.set_defaults(func=_export_hf)


def _export_hf(args: argparse.Namespace) -> int:
    from aiayn.convert.hf_export import export_hf

    architecture = export_hf(args.model, args.out)
    print(f"exported {args.model} as a {architecture} into {args.out} (load it with "
          f"transformers' from_pretrained({str(args.out)!r}))")
    return 0
