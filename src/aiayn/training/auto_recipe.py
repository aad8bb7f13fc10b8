"""`aiayn train auto`: a translation recipe chosen from the corpus and the time budget.

The paper's recipe (§5) was made for 4.5M sentence pairs and 8 GPUs; on 5k-100k pairs and one
CPU for an hour, other settings win. The rule below is data (the tables in capitals) plus a few
lines that read them; `plan(facts, budget)` returns an ordinary config and, for each choice, why.

The evidence (only what we are sure the sources say):
  * Sennrich & Zhang 2019, "Revisiting Low-Resource Neural Machine Translation: A Case Study"
    (ACL): recurrent NMT on subsets of IWSLT14 German->English; adapting the system to the data
    size (fewer BPE merges, aggressive dropout, smaller batches, among others) beats the
    high-resource defaults by a wide margin; fewer BPE merges alone gave up to 5 BLEU.
  * Araabi & Monz 2020, "Optimizing Transformer for Low-Resource Neural Machine Translation"
    (COLING): the Transformer on IWSLT14 subsets; its quality there depends strongly on the
    hyper-parameters (fewer/narrower layers, fewer heads, more dropout, smaller BPE: they tried
    1k-30k merges); their optimised settings gain up to 7.3 BLEU over the defaults.
  * fairseq's `transformer_iwslt_de_en` (160k pairs): d_model 512, d_ff 1024, 4 heads, 6+6 layers,
    trained with dropout 0.3 (its README's command), 4096 tokens per batch, label smoothing 0.1.
  * Our Table 3 at the CPU scale (benchmarks/RESULTS.md, 600 updates on 41k gettext pairs, i.e.
    under one epoch): width moved BLEU most (d_model 64: -7.3, d_model 256: +3.3 against 128);
    dropout 0 gained 1.8 and dropout 0.2 lost 3.3: with no pass repeated there is nothing to
    over-fit, so dropout only slows learning; label smoothing 0 or 0.2 moved it by < 0.5.

Where the rule departs from them: dropout follows the epochs the budget allows (Table 3's
lesson), not the corpus size alone; the model's size is capped by what the budget can train
(a smaller model trained for more updates can beat a bigger one), which the papers, trained to
convergence, did not face; no layer dropout (aiayn has none) and no word dropout
(model.word_dropout: at 5k pairs and an hour, two seeds, -0.6 dev BLEU; RESULTS.md).

Fitted: the thresholds come from the evidence above; benchmarks/small_data.py measures them on
5k / 20k / 40k-pair corpora (choices read on dev splits only; the test splits are scored once,
at the end). The updates a budget buys are measured on the machine by `aiayn train auto`
(tasks/speed_probe.py, passed in as `speed`); the FLOP model below (updates_per_second) is
the estimate used without a measurement.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiayn.errors import UserError

# -- the rule's data ----------------------------------------------------------------------------

# The rule's version: raised whenever a table below changes (benchmarks/small_data.py runs auto
# again where a result was made with another); recorded in config.json (auto.rule).
RULE = 9  # rule 9: dropout 0 under one pass, rising to 0.1 at 16 (rule 8: 0 under half a pass,
# 0.1 from 2); rule 8: joins of two pairs from 10 passes (rule 7: from 100); rule 7: from 100
# passes, joins of two pairs beside the pairs (data.concat; rule 6: none); rule 6: an ensemble
# of 2 from 100 passes (rule 5: one model); rule 5: peak lr 2e-3 at d_model 256 (rule 4: 1e-3);
# rule 4: a shape needs 2,500 updates in the budget (rule 3: 4,000), "m" up to 60k pairs (rule
# 3: 30k); rule 3: the speed probe warms and times whole epochs, dropout in 0.01s

# Model shapes, smallest first: (name, d_model, n_heads, d_ff, n_layers per stack).
SHAPES = (
    ("xs", 128, 4, 512, 2),
    ("s", 256, 4, 512, 3),      # Araabi & Monz: narrower and shallower for the smallest sets
    ("m", 256, 4, 1024, 3),     # configs/gettext-small.yaml's model (41k pairs)
    ("l", 512, 4, 1024, 3),
    ("xl", 512, 4, 1024, 6),    # fairseq's transformer_iwslt_de_en (160k pairs)
    ("base", 512, 8, 2048, 6),  # the paper's base (4.5M pairs)
)
# The largest shape a corpus of up to N training pairs gets (more data: a bigger model).
# Rule 4: "m" up to 60k pairs (rule 3: 30k): "l" has run on no corpus here (the largest has 55k
# pairs), "m" won at 20k and 40k (RESULTS.md), and with MIN_UPDATES at 2,500 "l" would have
# replaced it at 40k on 2 threads (~2,900 updates an hour) unmeasured.
SHAPE_BY_PAIRS = ((8_000, "s"), (60_000, "m"), (120_000, "l"), (600_000, "xl"),
                  (math.inf, "base"))
# A shape must get through this many tokens in the budget (MIN_UPDATES updates of gettext-small's 4k
# tokens, with an 8k vocabulary), else the next smaller one is used. Measured with this fixed
# batch and vocabulary, not the corpus's, so that a bigger corpus never gets a smaller model.
# Rule 2: 4,000 (rule 1: 2,000): on 20k pairs gettext-small's validation BLEU was still 3 below
# its final at 2,000 updates and within 2 of it from 3,500 (RESULTS.md, "Small corpora at equal
# time"); with speeds measured in bf16, 2,000 would have put 40k pairs on d_model 512 for ~2,900
# updates in an hour, a trade nothing here has measured.
# Rule 4: 2,500. On 1 thread of an AMD EPYC "m" makes ~3,100-3,600 updates an hour, so rule 3
# fell back to "xs" on 20k pairs, and lost to gettext-small ("m", 3,598 updates) by 2.2 test BLEU
# with 14,615 updates of its own (seed 1, side by side; RESULTS.md, 2026-11-29): gettext-small
# had passed xs's final validation BLEU by its 2,500th update.
MIN_UPDATES, REFERENCE_TOKENS, REFERENCE_VOCAB = 2500, 4000, 8000
# BPE vocabulary: 2k at 5k pairs, x2 per 4x pairs (8k at 80k), within [1k, 32k] (Sennrich &
# Zhang, Araabi & Monz: a few thousand merges for tens of thousands of pairs).
VOCAB_AT_5K, VOCAB_RANGE = 2000, (1000, 32000)
# Tokens per update (source + target, padded, as train.max_tokens counts them): 2k at 5k pairs,
# +500 per doubling (Sennrich & Zhang: smaller batches for less data); gettext-small's 4k at 41k.
TOKENS_AT_5K, TOKENS_PER_DOUBLING, TOKENS_RANGE = 2000, 500, (1500, 8000)
# Dropout from the passes over the data the budget allows: 0 below one pass (Table 3: nothing
# to over-fit), rising by a quarter of 0.1 a doubling to 0.1 at DROPOUT_FLAT_TO passes (0.05 at
# 4), then +0.06 per doubling, at most 0.3 (fairseq's IWSLT, Araabi & Monz). Rule 9 (RESULTS.md,
# 2026-12-07, a fifth session; rules 3-8: 0 below half a pass, 0.1 from 2 passes): at 80k pairs
# en-fr (gettext and Debian mixed, ~4.1 passes in 60 minutes on 1 thread), seed 0, dev BLEU /
# chrF with dropout 0 44.99 / 65.81 and 0.05 44.42 / 66.12 against 0.1's 43.02 / 64.98; greedy
# validation NLL at the end 1.325 (0, 4,233 updates), 1.281 (0.05, 4,011) and 1.321 (0.1, 4,001).
# Its test round there (a sixth session, seeds 0 and 1): 41.46 / 65.27 test BLEU / chrF against
# rule 8's 41.27 / 65.16 (in 7% fewer updates) and gettext-small's 39.42 / 63.84; en-de 80k
# 35.98 / 61.43 against rule 8's 35.87 / 61.24 and gettext-small's 33.53 / 59.49.
# At 40k en-de (~15 passes) 0.1 with joins was rule 8's test-round winner; unchanged there.
# Measured at 60 minutes on 20k pairs (~50 passes; dev BLEU, one seed; RESULTS.md "Small
# corpora at equal time"): 0.2 scored 39.0, 0.15 37.5, 0.1 37.2, 0.3 with 0.1 in attention and
# FFN (rule 1's choice) 35.7; so 0.2 at 50 passes. No attention or FFN-activation dropout, as
# fairseq's IWSLT recipe (rule 1 added 0.1 of each from 0.2, and lost 3.2 to plain 0.2; at 5k
# pairs, ~200 passes, 0.1 of each over 0.3 moved dev BLEU by +0.2 over two seeds). Rule 3
# rounds to 0.01, not 0.05, and rises 0.06 a doubling (0.05 in rule 2): a step at 0.05 turned
# the probe's error into a whole step there (rule 2 expected ~41 passes in that hour, made ~52,
# and took 0.15); now an error of 20% in the passes moves dropout by 0.016 (by 0.007 below 16
# passes).
DROPOUT_FROM, DROPOUT_AT_FLAT, DROPOUT_FLAT_TO = 1, 0.1, 16  # 0 below 1 pass; 0.1 at 16
DROPOUT_PER_DOUBLING, DROPOUT_MAX = 0.06, 0.3  # from DROPOUT_FLAT_TO passes
DROPOUT_STEP = 0.01
LABEL_SMOOTHING = 0.1  # §5.4; Table 3's (D) rows: 0 or 0.2 change < 0.5 BLEU
# Peak learning rate at d_model 256, x sqrt(256 / d_model) for other widths (§5.3's d^-0.5).
# Rule 5: 2e-3, twice gettext-small's 1e-3 (rules 1-4). An hour on one CPU thread buys 3,500-9,000
# updates here, and §5.3's step^-0.5 decay has brought the rate to a quarter to a third of its
# peak by then. On rule 4's choice, 2e-3 gained dev BLEU at 20k and 40k pairs and was level at 5k
# (en-de, 60 minutes, 1 thread, one seed each; RESULTS.md, 2026-11-29 and -30): 20k +3.5 (38.1
# vs 34.6), 40k +2.5 (45.2 vs 42.6, in 4,336 updates to 4,755), 5k -0.1 (21.7 vs 21.8, chrF
# +0.2); with pre-norm it gained only +0.4 at 20k. "xs" gets 2.8e-3 by the d^-0.5 rule: at 5
# minutes it trains (RESULTS.md, 2026-11-30), not compared with 1.4e-3. At 80k pairs (gettext
# and Debian mixed, ~4.5 passes), where auto's choice is gettext-small's but for the schedule
# (2e-3 / 250 warmup against 1e-3 / 400), test BLEU +2.3 at the same updates over two seeds
# (35.9 vs 33.5; seed 0 +2.0, seed 1 +2.7; RESULTS.md, 2026-12-07); on en-fr +1.9 (41.3 vs
# 39.4; +1.9 and +1.8). Both recipes were still learning when those hours ended; on en-fr's dev
# split (seed 0, 2026-12-07) neither a peak of 3e-3 (-1.8 BLEU, behind from the first
# validation) nor a cosine to 0 at the budget's end (train.lr_schedule=cosine, Li et al. 2020:
# -0.1; at 20k pairs, rule 3, +0.5 and -0.1) beat this schedule. Unmeasured: the longer runs a
# GPU's hour buys (at 4,000 warmup updates §5.3's formula peaks at 1e-3).
LR_AT_256 = 2e-3
# Warmup: 7% of the expected updates (100-4,000): gettext-small's 400 were 6.4% of the 6,253
# updates it made in an hour on 20k pairs, auto's 600 7% of 8,291 (RESULTS.md, "Small corpora at
# equal time"); the paper's 4,000 of 100,000 were 4% (§5.3). (Rule 1 took 1/8 of an estimate
# that was half the updates made: the same ~600 there.)
WARMUP_FRACTION, WARMUP_RANGE = 0.07, (100, 4000)
KEEP_LAST_N = 5  # §6.1: the last 5 checkpoints, averaged with `aiayn average`
CHECKPOINTS = 10  # saves in the planned run: the last 5 span its second half
# Throughput estimate (updates_per_second; `aiayn train auto` measures instead): effective
# FLOP/s per CPU thread, fit to gettext-small's measured 0.92 updates/s of 4k tokens on 2 threads
# (RESULTS.md, vs_fairseq.py, AMD EPYC fp32; in bf16 on AVX512-BF16 it made 1.74/s); a GPU's for
# small models (latency-bound); seconds of every update beyond its FLOPs.
CPU_FLOPS_PER_THREAD, GPU_FLOPS = 33e9, 30e12
UPDATE_OVERHEAD_S = {"cpu": 0.03, "cuda": 0.02}
FILL = 0.8  # real tokens / max_tokens in a length-sorted batch
# BPE pieces per whitespace word at these vocabulary sizes: 1.89 (English) and 2.22 (German) with
# 4k BPE on en-de gettext, 1.8 both sides with 8k (rule 1 took 1.4: a third fewer passes)
PIECES_PER_WORD = 1.9
MIN_PAIRS = 1000  # fewer: too few to hold out a validation split and still train
# An ensemble (aiayn.generation.ensemble) where one model would pass over the corpus
# ENSEMBLE_FROM_PASSES times or more: ENSEMBLE_MEMBERS models of the same shape, each trained for
# an equal share of the budget with its own seed, decoded as the mean of their distributions.
# At 5k pairs an hour on one thread is 100-250 passes and every validation curve had flattened
# by mid-run (RESULTS.md, 2026-12-02), so a second model costs little of the first's quality:
# en-de 5k, "s" for 30 minutes on 1 thread, seeds 0 and 1: dev BLEU 21.3 and 20.2 alone, 23.6
# as an ensemble (chrF 41.7, 40.9 -> 43.6), where one "s" of 60 minutes made 21.8 (42.7).
# At 20k-40k pairs (20-50 passes) the curves still rose at the end: one model is kept there
# (unmeasured as an ensemble).
ENSEMBLE_FROM_PASSES, ENSEMBLE_MEMBERS = 100, 2
# Concatenation augmentation (data.concat, data/concat.py; Nguyen, Murray and Chiang 2021: about
# +1 BLEU on four low-resource pairs) where one model would pass over the corpus CONCAT_FROM_PASSES
# times or more: each epoch CONCAT_SHARE x the corpus's pairs, each two random pairs joined. At
# 5k pairs an ensemble's outputs were short, the more so the longer the sentence (rule 6's with
# d_ff 1024 and label smoothing 0.2, seeds 0 and 1: beam-4 hypotheses 0.87-0.90 of the
# reference's length, 0.65 for references of 15-19 words), and the corpus holds few long ones.
# Rule 7 (RESULTS.md, 2026-12-02, a fifth session): en-de 5k, rule 6's ensemble with as many
# joins as pairs, 60 minutes on 1 thread, seeds 0 and 1: dev BLEU 26.6 and 26.8 (chrF 48.4,
# 47.9) against rule 6's 23.9 and 24.1 (43.9 mean); length 0.94-0.95.
# Rule 8 (RESULTS.md, 2026-12-06, two sessions): for one model too, from 10 passes. Added to rule
# 7's one model, 60 minutes on 1 thread, en-de, dev BLEU / chrF: at 40k (m, dropout 0.1, ~16 passes)
# seed 0 48.7 / 66.3 against 46.8 / 65.2, seed 1 48.4 / 66.3 against 47.2 / 65.6; at 20k (m, dropout
# 0.16, ~31 passes) seed 0 42.4 / 61.6 against 38.6 / 58.6; each at the same updates, its validation
# NLL still falling where the rule's had flattened. Test split (2026-12-07), en-de 40k, beside
# gettext-small, seeds 0 and 1: 51.2 / 68.1 against 47.0 / 65.5 (rule 7: +1.9 BLEU). Below 10
# passes unmeasured: an epoch twice as long leaves fewer of the pairs seen again in the budget.
CONCAT_FROM_PASSES, CONCAT_SHARE = 10, 1.0

# updates/s of (shape, vocabulary, tokens per update): the FLOP model (estimate) or, from `aiayn
# train auto`, measured on the machine (tasks/speed_probe.py)
Speed = Callable[[str, int, int], float]


@dataclass(frozen=True)
class CorpusFacts:
    """What the rule reads of a corpus's training split: lengths are whitespace words."""

    pairs: int
    src_mean: float
    tgt_mean: float
    src_p95: int
    tgt_p95: int
    chars: int  # distinct characters, both sides
    src_lang: str = "?"
    tgt_lang: str = "?"

    @property
    def pieces(self) -> float:
        """Subword tokens in one pass (both sides, </s> included), as the batches count them."""
        return self.pairs * ((self.src_mean + self.tgt_mean) * PIECES_PER_WORD + 1)


@dataclass(frozen=True)
class Budget:
    minutes: float
    device: str = "cpu"  # "cpu" or "cuda"
    threads: int = 2

    def describe(self) -> str:
        where = f"{self.threads} CPU thread(s)" if self.device == "cpu" else "a GPU"
        return f"{self.minutes:g} minute(s) on {where}"


@dataclass
class Recipe:
    """The chosen config's sections and, per choice, why (`reasons`, in the order printed)."""

    shape: str
    model: dict[str, Any]
    data: dict[str, Any]
    train: dict[str, Any]
    planned_updates: int
    epochs: float
    reasons: list[str] = field(default_factory=list)
    members: int = 1  # models trained, each as above (model, data, train), and ensembled

    def config(self, out: str | None = None) -> dict[str, Any]:
        """An ordinary translation config (`aiayn train FILE` reads it)."""
        return {"task": "seq2seq", **({"out": out} if out else {}),
                "model": dict(self.model), "data": dict(self.data), "train": dict(self.train)}


def facts_of(pairs: list[tuple[str, str]], src_lang: str = "?", tgt_lang: str = "?") -> CorpusFacts:
    """The corpus facts of training pairs (source, target)."""
    if not pairs:
        raise UserError("the training corpus is empty")
    src = sorted(len(s.split()) for s, _ in pairs)
    tgt = sorted(len(t.split()) for _, t in pairs)
    p95 = min(len(src) - 1, int(0.95 * len(src)))
    chars = set().union(*(set(s) | set(t) for s, t in pairs))
    return CorpusFacts(len(pairs), sum(src) / len(src), sum(tgt) / len(tgt), src[p95], tgt[p95],
                       len(chars), src_lang, tgt_lang)


# -- the rule -----------------------------------------------------------------------------------

def _round(x: float, step: float) -> float:
    return round(x / step) * step


def vocab_size(facts: CorpusFacts) -> int:
    size = VOCAB_AT_5K * math.sqrt(facts.pairs / 5000)
    return int(min(max(_round(size, 500), VOCAB_RANGE[0]), VOCAB_RANGE[1]))


def max_tokens(facts: CorpusFacts) -> int:
    tokens = TOKENS_AT_5K + TOKENS_PER_DOUBLING * math.log2(facts.pairs / 5000)
    # room for 4 of the longer pairs (95th percentile) in a batch
    longest = 4 * ((facts.src_p95 + facts.tgt_p95) * PIECES_PER_WORD + 1)
    return int(min(max(_round(max(tokens, longest), 500), TOKENS_RANGE[0]), TOKENS_RANGE[1]))


def shape_fields(name: str) -> dict[str, int]:
    _, d, h, ff, n = next(s for s in SHAPES if s[0] == name)
    return {"d_model": d, "n_heads": h, "d_ff": ff, "n_layers": n}


def update_flops(shape: str, vocab: int, tokens: int) -> float:
    """Training FLOPs of one update: 6 per weight per token (forward + backward), each side's
    tokens through its stack (encoder: self-attention 4d^2 + FFN 2d d_ff; decoder: + cross-
    attention 4d^2), the target's through the output projection d x vocab."""
    f = shape_fields(shape)
    d, ff, n = f["d_model"], f["d_ff"], f["n_layers"]
    per_side = FILL * tokens / 2
    weights = per_side * n * (4 * d * d + 2 * d * ff) + per_side * (
        n * (8 * d * d + 2 * d * ff) + d * vocab)
    return 6 * weights


def updates_per_second(shape: str, vocab: int, tokens: int, budget: Budget) -> float:
    flops = CPU_FLOPS_PER_THREAD * budget.threads if budget.device == "cpu" else GPU_FLOPS
    return 1 / (update_flops(shape, vocab, tokens) / flops + UPDATE_OVERHEAD_S[budget.device])


def estimate(budget: Budget) -> Speed:
    """The FLOP model's updates/s on `budget`'s device (the default `speed` of plan)."""
    return lambda shape, vocab, tokens: updates_per_second(shape, vocab, tokens, budget)


def epoch_minutes(facts: CorpusFacts, budget: Budget, speed: Speed | None = None) -> float:
    """Minutes of one pass over the corpus with the smallest shape: the shortest useful budget."""
    tokens, vocab = max_tokens(facts), vocab_size(facts)
    updates = facts.pieces / (FILL * tokens)
    return updates / (speed or estimate(budget))(SHAPES[0][0], vocab, tokens) / 60


def dropout_for(epochs: float) -> float:
    if epochs < DROPOUT_FROM:
        return 0.0
    if epochs < DROPOUT_FLAT_TO:  # log-linear from 0 at DROPOUT_FROM to the flat rate
        rate = DROPOUT_AT_FLAT * math.log2(epochs / DROPOUT_FROM) / math.log2(DROPOUT_FLAT_TO
                                                                              / DROPOUT_FROM)
    else:
        rate = DROPOUT_AT_FLAT + DROPOUT_PER_DOUBLING * math.log2(epochs / DROPOUT_FLAT_TO)
    return round(min(_round(rate, DROPOUT_STEP), DROPOUT_MAX), 2)


def plan(facts: CorpusFacts, budget: Budget, speed: Speed | None = None,
         members: int | None = None) -> Recipe:
    """The recipe for `facts` and `budget` (deterministic for one `speed`; monotone: more pairs
    never give a smaller model or vocabulary, more minutes never a smaller model). `speed`:
    updates/s of a shape, measured (SpeedProbe) or, by default, the FLOP model's estimate.
    `members`: the models of an ensemble (None: ENSEMBLE_MEMBERS where one model would make
    ENSEMBLE_FROM_PASSES passes, else 1); each is planned for its share of the budget, in the
    shape one model would get from the whole."""
    measured = speed is not None
    speed = speed or estimate(budget)
    check(facts, budget, speed)
    one = _plan_one(facts, budget, speed, measured)
    if members is None:
        members = ENSEMBLE_MEMBERS if one.epochs >= ENSEMBLE_FROM_PASSES else 1
    if members == 1:
        return _with_joins(one, one.epochs)
    share = Budget(budget.minutes / members, budget.device, budget.threads)
    recipe = _with_joins(_plan_one(facts, share, speed, measured, shape=one.shape), one.epochs)
    recipe.members = members
    recipe.reasons[0] = one.reasons[0]  # the whole budget
    recipe.reasons.append(
        f"an ensemble of {members} such models, {share.minutes:g} minute(s) and a seed each, "
        f"decoded as the mean of their distributions: one model would make ~{one.epochs:.0f} "
        f"passes (from {ENSEMBLE_FROM_PASSES}: its validation curve flattens long before the "
        "budget ends)")
    return recipe


def _with_joins(recipe: Recipe, epochs: float) -> Recipe:
    """The recipe with CONCAT_SHARE joins an epoch where one model of the whole budget would
    make `epochs` >= CONCAT_FROM_PASSES passes, said beside the dropout (the regularisation the
    passes ask for)."""
    if epochs >= CONCAT_FROM_PASSES:
        recipe.data["concat"] = CONCAT_SHARE
        at = next(i for i, line in enumerate(recipe.reasons) if line.startswith("dropout "))
        recipe.reasons[at] += (f"; from {CONCAT_FROM_PASSES} passes, each epoch as many joins of "
                               "two random pairs as pairs (Nguyen et al. 2021: longer examples "
                               "than the corpus holds)")
    return recipe


def _plan_one(facts: CorpusFacts, budget: Budget, speed: Speed, measured: bool,
              shape: str | None = None) -> Recipe:
    """One model's recipe for the budget; `shape`: this one, not the budget's choice."""
    vocab, tokens = vocab_size(facts), max_tokens(facts)
    cap = next(name for limit, name in SHAPE_BY_PAIRS if facts.pairs <= limit)
    names = [s[0] for s in SHAPES]
    seconds = budget.minutes * 60

    def trainable(name: str) -> bool:
        return seconds * speed(name, REFERENCE_VOCAB, REFERENCE_TOKENS) >= MIN_UPDATES

    shape = shape or next((n for n in reversed(names[:names.index(cap) + 1]) if trainable(n)),
                          names[0])
    planned = int(seconds * speed(shape, vocab, tokens))
    epochs = planned * FILL * tokens / facts.pieces
    dropout = dropout_for(epochs)
    fields = shape_fields(shape)
    lr = float(f"{LR_AT_256 * math.sqrt(256 / fields['d_model']):.2g}")
    warmup = int(min(max(_round(planned * WARMUP_FRACTION, 50), WARMUP_RANGE[0]), WARMUP_RANGE[1]))
    every = max(50, int(_round(planned / CHECKPOINTS, 50)))
    model = {**fields, "dropout": dropout, "attn_dropout": 0.0, "activation_dropout": 0.0,
             "max_len": 256}
    data = {"vocab_size": vocab, "valid_pairs": 200}
    train = {"max_minutes": budget.minutes, "max_steps": 1_000_000, "max_tokens": tokens,
             "lr": lr, "warmup_steps": warmup, "label_smoothing": LABEL_SMOOTHING,
             "clip_norm": 1.0, "eval_every": every * 2, "save_every": every,
             "keep_last_n": KEEP_LAST_N}
    d, ff, n, h = fields["d_model"], fields["d_ff"], fields["n_layers"], fields["n_heads"]
    why = [
        f"corpus: {facts.pairs:,} pairs {facts.src_lang}->{facts.tgt_lang}, {facts.src_mean:.1f}"
        f"/{facts.tgt_mean:.1f} words a sentence (95th percentile {facts.src_p95}/{facts.tgt_p95})"
        f", {facts.chars} characters; budget: {budget.describe()}",
        f"vocabulary {vocab:,} BPE: 2k at 5k pairs, x2 per 4x pairs (Sennrich & Zhang 2019, "
        "Araabi & Monz 2020: small vocabularies for small corpora)",
        f"model {shape}: d_model {d}, {h} heads, d_ff {ff}, {n}+{n} layers: the largest for "
        f"{facts.pairs:,} pairs (up to {cap}) that makes {MIN_UPDATES:,} updates of "
        f"{REFERENCE_TOKENS:,} tokens in the budget (Araabi & Monz: smaller for less data)",
        f"{tokens:,} tokens per update: smaller batches for less data (Sennrich & Zhang 2019); "
        f"~{planned:,} updates expected "
        f"(~{planned / seconds:.2f}/s, {'measured here' if measured else 'estimated'}), "
        f"~{epochs:.1f} passes over the data",
        f"dropout {dropout}: follows the passes the budget allows (Table 3: under one pass it "
        f"only slows learning; rising to 0.1 at {DROPOUT_FLAT_TO} passes, 0.05 at ~4, where it "
        "beat 0.1 on 80k pairs; then more, to fairseq's IWSLT 0.3; 0.2 was best at ~50 passes of "
        "20k pairs in an hour)",
        f"peak lr {lr:g} after {warmup} warmup updates (§5.3's d_model^-0.5, {LR_AT_256:g} at "
        f"256), label smoothing {LABEL_SMOOTHING} (§5.4), a checkpoint every {every} updates, the "
        f"last {KEEP_LAST_N} kept for averaging (§6.1)",
    ]
    return Recipe(shape, model, data, train, planned, round(epochs, 2), why)


def check(facts: CorpusFacts, budget: Budget, speed: Speed | None = None) -> None:
    """One-line errors for a corpus too small to split and a budget under one epoch."""
    if facts.pairs < MIN_PAIRS:
        raise UserError(f"the corpus has {facts.pairs:,} training pairs: too few for `aiayn train "
                        f"auto` to hold out validation pairs and train (it needs {MIN_PAIRS:,})")
    if budget.minutes <= 0 or not math.isfinite(budget.minutes):
        raise UserError(f"--minutes {budget.minutes:g}: must be a positive number")
    need = epoch_minutes(facts, budget, speed)
    if budget.minutes < need:
        raise UserError(f"--minutes {budget.minutes:g} is too short: one pass over the "
                        f"{facts.pairs:,} pairs takes about {need:.{1 if need < 10 else 0}f} minutes with the smallest "
                        f"model on {budget.describe().split(' on ')[1]}; give --minutes "
                        f"{math.ceil(need * 10) / 10:g} or more")


__all__ = ["CONCAT_FROM_PASSES", "CONCAT_SHARE", "ENSEMBLE_FROM_PASSES", "ENSEMBLE_MEMBERS", "RULE",
           "Budget", "CorpusFacts", "Recipe", "SHAPES", "Speed", "check", "dropout_for",
           "epoch_minutes", "estimate", "facts_of", "max_tokens", "plan", "updates_per_second",
           "vocab_size"]
