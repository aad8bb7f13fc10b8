"""`aiayn data`: write a built-in corpus to files.

    aiayn data dates-numbers --out DIR [--n-train 20000 --n-valid 500 --n-test 1000 --seed 0]
    aiayn data gettext --lang de --out DIR [--locale-dir /usr/share/locale]
    aiayn data debian-descriptions --lang de --out DIR [--i18n-dir DIR]
                                (Debian's package descriptions and their translations; fetched
                                once from the Debian mirror into --i18n-dir)
    aiayn data stdlib-docstrings --out DIR [--valid-frac 0.05 --test-frac 0.05]
                                (summarization: a stdlib docstring's body -> its summary line)

DIR receives ``{train,valid,test}.src`` and ``.tgt`` (one sentence per line, aligned by line;
the names say the role, the languages are in stats.json) and ``stats.json``. One summary line
per split is printed.
"""

from __future__ import annotations

import argparse

from aiayn.cli.common import command_group, non_negative_int, positive_int


def register(sub) -> None:
    """Add `aiayn data <corpus>` to the `aiayn` parser."""
    corpora = command_group(sub, "data", "corpus", "CORPUS",
                            help="write a built-in corpus (train/valid/test) to files",
                            description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)

    dn = corpora.add_parser("dates-numbers", help="English -> German dates and spelled-out numbers")
    dn.add_argument("--out", required=True, help="output directory")
    dn.add_argument("--force", action="store_true", help="replace the corpus --out holds")
    dn.add_argument("--n-train", type=positive_int, default=20000)
    dn.add_argument("--n-valid", type=non_negative_int, default=500)
    dn.add_argument("--n-test", type=non_negative_int, default=1000)
    dn.add_argument("--seed", type=int, default=0)
    dn.set_defaults(func=_dates_numbers)

    gt = corpora.add_parser("gettext", help="English -> LANG messages from the OS's gettext catalogs")
    gt.add_argument("--out", required=True, help="output directory")
    gt.add_argument("--force", action="store_true", help="replace the corpus --out holds")
    gt.add_argument("--lang", default="de", help="target language code (default: de)")
    gt.add_argument("--locale-dir", default="/usr/share/locale")
    gt.add_argument("--valid-frac", type=float, default=0.02)
    gt.add_argument("--test-frac", type=float, default=0.02)
    gt.add_argument("--max-chars", type=int, default=200, help="drop longer messages")
    gt.set_defaults(func=_gettext)

    dd = corpora.add_parser("debian-descriptions",
                            help="English -> LANG Debian package descriptions (prose; fetched once)")
    dd.add_argument("--out", required=True, help="output directory")
    dd.add_argument("--force", action="store_true", help="replace the corpus --out holds")
    dd.add_argument("--lang", default="de", help="target language code (default: de)")
    dd.add_argument("--i18n-dir", default=None,
                    help="holds Translation-en and Translation-LANG (plain, .bz2 or .xz); missing "
                         "ones are fetched there (default: ~/.cache/aiayn/debian-i18n/bookworm)")
    dd.add_argument("--valid-frac", type=float, default=0.02)
    dd.add_argument("--test-frac", type=float, default=0.02)
    dd.add_argument("--max-chars", type=int, default=300, help="drop longer sentences")
    dd.set_defaults(func=_debian_descriptions)

    sd = corpora.add_parser("stdlib-docstrings",
                            help="summarization: Python stdlib docstring bodies -> summary lines")
    sd.add_argument("--out", required=True, help="output directory")
    sd.add_argument("--force", action="store_true", help="replace the corpus --out holds")
    sd.add_argument("--valid-frac", type=float, default=0.05)
    sd.add_argument("--test-frac", type=float, default=0.05)
    sd.add_argument("--max-body-words", type=int, default=150, help="drop longer bodies")
    sd.add_argument("--stdlib-dir", default=None,
                    help="the standard library to read (default: this Python's)")
    sd.set_defaults(func=_stdlib_docstrings)


def _dates_numbers(args: argparse.Namespace) -> int:
    from aiayn.data.dates_numbers import dates_numbers, most_sentences
    from aiayn.data.parallel import check_corpus_out
    from aiayn.errors import UserError

    check_corpus_out(args.out, args.force)
    counts = {"--n-train": args.n_train, "--n-valid": args.n_valid, "--n-test": args.n_test}
    if sum(counts.values()) > most_sentences():  # the default years and numbers
        given = " + ".join(f"{flag} {n}" for flag, n in counts.items())
        raise UserError(f"{given}: the corpus has at most {most_sentences():,} distinct "
                        "sentences (fewer in fact); ask for fewer")
    params = dict(n_train=args.n_train, n_valid=args.n_valid, n_test=args.n_test, seed=args.seed)
    return _write("dates-numbers", dates_numbers(**params), args, ("en", "de"), params)


def _gettext(args: argparse.Namespace) -> int:
    from aiayn.data.gettext_corpus import gettext_pairs
    from aiayn.data.parallel import check_corpus_out

    check_corpus_out(args.out, args.force)
    params = dict(lang=args.lang, locale_dir=args.locale_dir, valid_frac=args.valid_frac,
                  test_frac=args.test_frac, max_chars=args.max_chars)
    return _write("gettext", gettext_pairs(**params), args, ("en", args.lang), params)


def _debian_descriptions(args: argparse.Namespace) -> int:
    from aiayn.data.debian_descriptions import debian_pairs, fetch_translations, sha256_of
    from aiayn.data.parallel import check_corpus_out

    check_corpus_out(args.out, args.force)
    files = fetch_translations(args.lang, args.i18n_dir)
    params = dict(lang=args.lang, valid_frac=args.valid_frac, test_frac=args.test_frac,
                  max_chars=args.max_chars)
    corpus = debian_pairs(folder=files["en"].parent, **params)
    # the mirror's files change at Debian's point releases: say which ones made this corpus
    params["files"] = {path.name: sha256_of(path) for path in files.values()}
    return _write("debian-descriptions", corpus, args, ("en", args.lang), params)


def _stdlib_docstrings(args: argparse.Namespace) -> int:
    import platform

    from aiayn.data.parallel import check_corpus_out
    from aiayn.data.stdlib_docstrings import stdlib_docstrings

    check_corpus_out(args.out, args.force)
    params = dict(valid_frac=args.valid_frac, test_frac=args.test_frac,
                  max_body_words=args.max_body_words)
    corpus = stdlib_docstrings(**params, root=args.stdlib_dir)
    params["python"] = platform.python_version()  # the stdlib differs between versions
    return _write("stdlib-docstrings", corpus, args, ("en", "en"), params,
                  sides=("body", "summary"))


def _write(name: str, corpus, args: argparse.Namespace, languages: tuple[str, str], params: dict,
           sides: tuple[str, str] | None = None) -> int:
    """Write the corpus folder; each split's line counts words per side, named by `sides`
    (default: the languages)."""
    from pathlib import Path

    from aiayn.data.parallel import write_corpus_dir

    meta = {"corpus": name, "src_lang": languages[0], "tgt_lang": languages[1], "params": params}
    stats = write_corpus_dir(corpus, args.out, meta, force=args.force)
    sides = sides or languages
    for split, s in stats["splits"].items():
        base = Path(args.out) / split
        print(f"{split}: {s['pairs']} pairs, {s['src_words']} {sides[0]} words, "
              f"{s['tgt_words']} {sides[1]} words -> {base}.src, {base}.tgt")
    return 0
