"""`aiayn serve --model DIR`: the attention explorer, a local web page (docs/explorer.md)."""

from __future__ import annotations

from aiayn.cli.common import thread_count


def register(sub) -> None:
    p = sub.add_parser("serve", help="the attention explorer: a local web page over a model folder")
    p.add_argument("--model", required=True, help="model folder (translation, LM or encoder)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    p.add_argument("--threads", type=thread_count, default=4,
                   help="request threads (default 4; the server starts them all at once)")
    p.add_argument("--engine", default="torch", choices=("torch", "ctranslate2"),
                   help="who decodes a translation folder: torch (default) or ctranslate2 "
                        "(pip install aiayn[ct2]; attention still drawn by the PyTorch model)")
    p.add_argument("--ct2-compute-type", default=None, metavar="TYPE",
                   help="with --engine ctranslate2: default (float32), int8, bfloat16, ...")
    p.set_defaults(func=run)


def run(args) -> int:
    from aiayn.errors import UserError
    from aiayn.viz.server import serve
    if not 0 <= args.port <= 65535:
        raise UserError(f"--port {args.port}: must be in 0..65535")
    if args.engine != "ctranslate2" and args.ct2_compute_type is not None:
        raise UserError(f"--ct2-compute-type {args.ct2_compute_type} sets CTranslate2's compute "
                        "type: add --engine ctranslate2")
    args.ct2_compute_type = args.ct2_compute_type or "default"
    serve(args.model, args.host, args.port, args.threads, engine=args.engine,
          **({"compute_type": args.ct2_compute_type} if args.engine == "ctranslate2" else {}))
    return 0
