"""`aiayn viz attention | positions | relative-bias | masks | curves`: figures as PNG and/or SVG files.

    aiayn viz attention --model DIR "March 5, 2024"      a page per (kind, layer), one panel per head
    aiayn viz attention --model DIR "..." --layer 2 --head 3
    aiayn viz attention --model VIT_DIR digit.png         ViT: [CLS] + patches, and [CLS] on the image
    aiayn viz positions --d-model 64 --max-len 100       the §3.5 sinusoidal encoding
    aiayn viz relative-bias --model T5_DIR               T5's learned relative position bias
    aiayn viz masks                                      the causal mask, bidirectional vs causal
    aiayn viz curves --model DIR                         losses, learning rate, BLEU / accuracy

Layers and heads are numbered from 1 on the command line (as in the figure titles).
"""

from __future__ import annotations

from pathlib import Path

from aiayn.cli.common import beam_size, non_negative_int
from aiayn.errors import UserError
from aiayn.viz import FORMATS

# Bytes per cell of the positions figure's tables (the encoding, position x dimension, and the
# position-position dot products): float64 values and the colour-mapped copies matplotlib draws.
FIGURE_CELL_BYTES = 32


def register(sub) -> None:
    viz = sub.add_parser("viz", help="figures: attention, positional encoding, masks, curves",
                         description=__doc__.split("\n\n")[0])
    kinds = viz.add_subparsers(dest="viz_command", metavar="FIGURE", required=True)

    p = kinds.add_parser("attention", help="attention heatmaps of one input through a model folder")
    p.add_argument("--model", required=True, help="model folder")
    p.add_argument("text", help="source sentence (translation), prompt (LM), text (encoder) or "
                   "image file (ViT)")
    p.add_argument("--kind", choices=("encoder", "decoder_self", "cross", "self"), action="append",
                   help="only these kinds of attention (repeatable; default all)")
    p.add_argument("--layer", type=int, help="only this layer (1-based)")
    p.add_argument("--head", type=int, help="only this head (1-based)")
    p.add_argument("--mean", action="store_true", help="one panel: the mean over the heads")
    p.add_argument("--beam", type=beam_size, default=None,
                   help="beam size of the translation (default: the folder's search, as "
                   "`aiayn translate` uses it; else 4)")
    p.add_argument("--max-new-tokens", type=non_negative_int, default=30,
                   help="LM continuation length (at most the model's max_len in all)")
    _common(p, "attention")
    p.set_defaults(func=run_attention)

    p = kinds.add_parser("positions", help="the sinusoidal positional encoding (§3.5)")
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--max-len", type=int, default=100)
    _common(p, "positions")
    p.set_defaults(func=run_positions)

    p = kinds.add_parser("relative-bias", help="T5's learned relative position bias of a model "
                         "folder: per bucket and head, and by key-query offset")
    p.add_argument("--model", required=True, help="model folder (a T5-shaped translation model)")
    p.add_argument("--max-offset", type=non_negative_int, default=None,
                   help="offsets shown on each side (default: max_distance + 8)")
    _common(p, "relative-bias")
    p.set_defaults(func=run_relative_bias)

    p = kinds.add_parser("masks", help="the causal mask; bidirectional vs causal attention")
    p.add_argument("--tokens", help="space-separated tokens for the axes (default: a sample)")
    _common(p, "masks")
    p.set_defaults(func=run_masks)

    p = kinds.add_parser("curves", help="training curves from DIR/metrics.jsonl")
    p.add_argument("--model", required=True, help="model folder (with metrics.jsonl)")
    _common(p, "curves")
    p.set_defaults(func=run_curves)


def _common(p, stem: str) -> None:
    p.add_argument("--out", default="figures", help="output folder (default ./figures)")
    p.add_argument("--name", default=stem, help=f"file name stem (default {stem})")
    p.add_argument("--format", choices=(*FORMATS, "both"), default="png",
                   help="png, svg or both (default png)")


def _check_out(args) -> None:
    """Before any work: figures are no model's files, so --out is no model folder."""
    from aiayn.folder.files import model_folder_around

    around = model_folder_around(Path(args.out) / f"{args.name}.png")
    if around is not None:
        raise UserError(f"--out {args.out}: is inside the model folder {around}; choose a "
                        "folder outside it (default ./figures)")


def _save(args, pages) -> int:
    from aiayn.viz.style import save_figure

    formats = FORMATS if args.format == "both" else (args.format,)
    for name, fig in pages:
        for path in save_figure(fig, Path(args.out) / name, formats):
            print(path)
    return 0


def run_attention(args) -> int:
    _check_out(args)
    from aiayn.viz.attention import attention_figures
    from aiayn.viz.inspect import Inspector
    result = Inspector.load(args.model).run(args.text, beam=args.beam,
                                            max_new_tokens=args.max_new_tokens)
    maps = [m for m in result.maps if not args.kind or m.kind in args.kind]
    if not maps:
        have = ", ".join(m.kind for m in result.maps)
        raise UserError(f"--kind {' '.join(args.kind)}: this model has {have}")
    for flag, value, limit, what in (("--layer", args.layer, max(m.n_layers for m in maps), "layers"),
                                     ("--head", args.head, maps[0].n_heads, "heads")):
        if value is not None and not 1 <= value <= limit:
            raise UserError(f"{flag} {value}: the model has {limit} {what} (numbered from 1)")
    if result.output is not None:
        print(f"output: {result.output}")
    layer = None if args.layer is None else args.layer - 1
    head = None if args.head is None else args.head - 1
    maps = [m for m in maps if layer is None or layer < m.n_layers]
    pages = attention_figures(maps, layer, head, args.mean)
    if result.image is not None:  # ViT: [CLS] -> patch attention drawn over the image
        from aiayn.viz.patches import plot_patch_attention
        vit = maps[0]
        suffix = ("" if head is None else f"-head{head + 1}") + ("-mean" if args.mean else "")
        pages += [(f"cls-patches-layer{i + 1}{suffix}",
                   plot_patch_attention(result.image, vit, i, result.patch_size, head, args.mean))
                  for i in (range(vit.n_layers) if layer is None else [layer])]
    return _save(args, [(f"{args.name}-{name}", fig) for name, fig in pages])


def run_positions(args) -> int:
    _check_out(args)
    from aiayn.sizes import check_count
    from aiayn.viz.positions import plot_positions
    if args.d_model < 2 or args.max_len < 2:
        raise UserError("--d-model and --max-len must be at least 2")
    check_count("--d-model", args.d_model, args.max_len * FIGURE_CELL_BYTES,
                f"a table of {args.max_len} positions")
    check_count("--max-len", args.max_len, (args.max_len + args.d_model) * FIGURE_CELL_BYTES,
                f"the figure's tables (d_model {args.d_model})")
    return _save(args, [(args.name, plot_positions(args.d_model, args.max_len))])


def run_relative_bias(args) -> int:
    _check_out(args)
    from aiayn.folder.load import load_model
    from aiayn.sizes import check_count
    from aiayn.viz.relative_position import plot_relative_bias
    if args.max_offset is not None:
        check_count("--max-offset", args.max_offset, 64 * FIGURE_CELL_BYTES, "a bias curve")
    model, _ = load_model(args.model)
    return _save(args, [(args.name, plot_relative_bias(model, args.max_offset))])


def run_masks(args) -> int:
    _check_out(args)
    from aiayn.viz.masks import DEFAULT_TOKENS, plot_masks
    tokens = args.tokens.split() if args.tokens else DEFAULT_TOKENS
    if not tokens:
        raise UserError("--tokens: give at least one token")
    return _save(args, [(args.name, plot_masks(tokens))])


def run_curves(args) -> int:
    _check_out(args)
    from aiayn.viz.curves import plot_curves, read_metrics
    return _save(args, [(args.name, plot_curves(read_metrics(args.model)))])
