"""Search: greedy and beam search on scripted fake models with exact expected tokens and scores,
and the vectorised decode loop against a straightforward reference (one sentence at a time, no
cache, Python lists): beam 1..5, both length penalties, several random models; finished sentences
leaving the batch (and the cache) change nothing; typed GenerationConfig errors."""

import math

import pytest
import torch

from aiayn import Transformer, preset
from aiayn.generation.beam import length_penalty
from aiayn.generation.config import GenerationConfig
from aiayn.generation.search import (
    beam_search,
    beam_search_hypotheses,
    greedy_search,
    search,
    search_hypotheses,
)
from aiayn.masks import padding_mask

PAD, BOS, EOS, A, B = 0, 1, 2, 3, 4
IDS = dict(bos_id=BOS, eos_id=EOS, pad_id=PAD)
# BART's options of the encoder-decoder, with its ids: <pad> 1, the decoder starts from </s> 2
BART = dict(positions="learned", position_offset=2, embedding_norm=True, output_bias=True,
            activation="gelu", scale_embeddings=False, pad_id=1)
BART_IDS = dict(bos_id=EOS, eos_id=EOS, pad_id=1)
# T5's options (v1.1: relative position bias, RMSNorm, gated GELU, untied output); aiayn's ids
T5 = dict(positions="none", relative_attention_num_buckets=8, relative_attention_max_distance=12,
          norm="rms_norm", norm_first=True, bias=False, scale_attention=False,
          scale_embeddings=False, tie_output=False, gated_ffn=True, activation="gelu_tanh")
FAMILIES = pytest.mark.parametrize("kw, ids", [({}, IDS), (BART, BART_IDS), (T5, IDS)],
                                   ids=["paper", "bart", "t5"])


class ScriptedCache:
    def __init__(self):
        self.prefixes = None

    def reorder(self, indices):
        self.prefixes = [list(self.prefixes[i]) for i in indices.tolist()]


class ScriptedModel:
    """Next-token probabilities looked up from a table keyed by the prefix generated so far."""

    def __init__(self, table, default):
        self.table, self.default = table, default

    def encode(self, src, src_mask):
        return src.float()[..., None]

    def new_cache(self):
        return ScriptedCache()

    def decode(self, tgt_new, memory, src_mask, cache):
        if cache.prefixes is None:
            cache.prefixes = [[] for _ in range(tgt_new.shape[0])]
        rows = []
        for prefix, tok in zip(cache.prefixes, tgt_new[:, -1].tolist(), strict=True):
            if tok != BOS:
                prefix.append(tok)
            probs = dict(self.table.get(tuple(prefix), self.default))
            rows.append([math.log(probs.get(t, 1e-12)) for t in range(5)])
        return torch.tensor(rows)[:, None, :]


TABLE = {
    (): {A: 0.5, B: 0.4, EOS: 0.1},
    (A,): {A: 0.4, B: 0.35, EOS: 0.25},
    (B,): {EOS: 0.9, A: 0.05, B: 0.05},
    (A, A): {EOS: 0.98, A: 0.01, B: 0.01},
    (A, B): {EOS: 0.98, A: 0.01, B: 0.01},
}
DEFAULT = {EOS: 0.98, A: 0.01, B: 0.01}
SRC = torch.tensor([[5, 6, 7]])


def test_beam_search_finds_the_hypotheses_greedy_misses():
    model = ScriptedModel(TABLE, DEFAULT)
    assert greedy_search(model, SRC, **IDS) == [[A, A]]
    hyps = beam_search_hypotheses(model, SRC, beam=2, alpha=0.6, **IDS)[0]
    assert [h.tokens for h in hyps] == [[B], [A, A]]
    lp_b = math.log(0.4) + math.log(0.9)
    lp_aa = math.log(0.5) + math.log(0.4) + math.log(0.98)
    assert hyps[0].logprob == pytest.approx(lp_b, abs=1e-5)
    assert hyps[0].score == pytest.approx(lp_b / (7 / 6) ** 0.6, abs=1e-5)
    assert hyps[1].score == pytest.approx(lp_aa / (8 / 6) ** 0.6, abs=1e-5)
    assert beam_search(model, SRC, beam=2, **IDS) == [[B]]


def test_length_penalty_formulas():
    assert length_penalty(3, 0.6, "gnmt") == pytest.approx(((5 + 3) / 6) ** 0.6)
    assert length_penalty(3, 1.0, "avg") == 3.0
    assert length_penalty(7, 0.0, "gnmt") == 1.0
    with pytest.raises(ValueError, match="length_penalty='x'"):
        length_penalty(1, 0.6, "x")


def test_length_penalty_can_prefer_longer_output():
    # Raw log-probs favour [B] (0.4 * 0.9 > 0.5 * 0.6 * 0.98); with the "avg" penalty and
    # alpha = 1 the mean log-prob per token of [A, A] + EOS is higher than that of [B] + EOS.
    table = dict(TABLE)
    table[(A,)] = {A: 0.6, B: 0.15, EOS: 0.25}
    model = ScriptedModel(table, DEFAULT)
    raw = beam_search_hypotheses(model, SRC, beam=2, alpha=0.0, **IDS)[0]
    avg = beam_search_hypotheses(model, SRC, beam=2, alpha=1.0, length_penalty_kind="avg", **IDS)[0]
    assert raw[0].tokens == [B] and avg[0].tokens == [A, A]


def test_max_length_is_input_plus_extra():
    never_ends = ScriptedModel({}, {A: 0.9, EOS: 1e-6, B: 0.1})
    src = torch.tensor([[5, 6, 0, 0], [5, 6, 7, 8]])
    assert [len(t) for t in greedy_search(never_ends, src, max_extra=3, **IDS)] == [5, 7]
    assert [len(t) for t in beam_search(never_ends, src, beam=2, max_extra=3, **IDS)] == [5, 7]


def test_padding_and_bos_are_never_emitted():
    model = ScriptedModel({(): {PAD: 0.6, BOS: 0.3, A: 0.1}}, DEFAULT)
    assert greedy_search(model, SRC, **IDS) == [[A]]
    assert beam_search(model, SRC, beam=2, **IDS) == [[A]]


def _random_model(**kw):
    torch.manual_seed(0)
    model = Transformer(preset("tiny", vocab_size=40, **kw)).eval()
    if model.output.bias is not None:  # BART's final_logits_bias, not left at zero
        torch.nn.init.normal_(model.output.bias)
    return model


def _sources(pad=PAD):
    torch.manual_seed(1)
    src = torch.randint(4, 40, (5, 8))
    src[1, 5:] = pad
    src[3, 2:] = pad
    return src


@FAMILIES
def test_beam_size_one_equals_greedy(kw, ids):
    model, src = _random_model(**kw), _sources(ids["pad_id"])
    assert beam_search(model, src, beam=1, max_extra=6, **ids) == greedy_search(model, src, max_extra=6, **ids)


class Uncached:
    """The same model without a KV cache: every step recomputes the whole prefix."""

    def __init__(self, model):
        self.model = model

    def encode(self, src, src_mask):
        return self.model.encode(src, src_mask)

    def new_cache(self):
        return ScriptedCache()

    def decode(self, tgt_new, memory, src_mask, cache):
        if cache.prefixes is None:
            cache.prefixes = [[] for _ in range(tgt_new.shape[0])]
        for prefix, tok in zip(cache.prefixes, tgt_new[:, -1].tolist(), strict=True):
            prefix.append(tok)
        return self.model.decode(torch.tensor(cache.prefixes), memory, src_mask)[:, -1:]


@FAMILIES
@pytest.mark.parametrize("beam", [1, 3])
def test_cache_on_equals_cache_off(beam, kw, ids):
    model, src = _random_model(**kw), _sources(ids["pad_id"])
    cached = beam_search_hypotheses(model, src, beam=beam, max_extra=6, **ids)
    uncached = beam_search_hypotheses(Uncached(model), src, beam=beam, max_extra=6, **ids)
    for c, u in zip(cached, uncached, strict=True):
        assert [h.tokens for h in c] == [h.tokens for h in u]
        assert [h.score for h in c] == pytest.approx([h.score for h in u], abs=1e-4)


@FAMILIES
@pytest.mark.parametrize("beam", [1, 4])
def test_batch_equals_each_sentence_alone(beam, kw, ids):
    model, src = _random_model(**kw), _sources(ids["pad_id"])
    batched = beam_search(model, src, beam=beam, max_extra=6, **ids)
    alone = [beam_search(model, row[row != ids["pad_id"]][None], beam=beam, max_extra=6, **ids)[0]
             for row in src]
    assert batched == alone


def test_a_decoding_loop_keeps_the_joined_qkv_weights_and_drops_them_after():
    """The loop runs in the model's decoding() context, found through a wrapper's .model too:
    the decoder's self-attention layers keep one joined q/k/v copy for every step (the encoder
    runs before the loop), and no copy outlives the loop (a later optimizer step cannot leave
    one stale)."""
    from aiayn.nn import MultiHeadAttention

    model, src = _random_model(), _sources()
    layers = [m for m in model.modules() if isinstance(m, MultiHeadAttention)]
    kept_per_step = []

    class Wrapper:
        def __init__(self, inner):
            self.model = inner

        def encode(self, src, src_mask):
            return self.model.encode(src, src_mask)

        def new_cache(self):
            return self.model.new_cache()

        def decode(self, tgt_new, memory, src_mask, cache):
            logits = self.model.decode(tgt_new, memory, src_mask, cache)
            kept_per_step.append(sum(m._qkv_kept is not None for m in layers))
            return logits

    out = greedy_search(Wrapper(model), src, max_extra=6, **IDS)
    assert out == greedy_search(model, src, max_extra=6, **IDS)
    assert len(kept_per_step) > 1 and set(kept_per_step) == {model.config.n_decoder_layers}
    assert all(m._qkv_kept is None and m._keeping == 0 for m in layers)


V = 40


class EosBias:
    """A model whose EOS logit is raised by `bias`, so that sentences end at varied lengths.
    Records the number of decoder rows of every step."""

    def __init__(self, model, bias):
        self.model, self.bias, self.rows = model, bias, []

    def encode(self, src, src_mask):
        return self.model.encode(src, src_mask)

    def new_cache(self):
        return self.model.new_cache()

    def decode(self, tgt, memory, src_mask, cache=None):
        self.rows.append(tgt.shape[0])
        logits = self.model.decode(tgt, memory, src_mask, cache)
        logits[..., EOS] += self.bias
        return logits


def _model(seed, bias=None):
    torch.manual_seed(seed)
    bias = 0.5 + 0.5 * seed if bias is None else bias  # best outputs from empty to max length
    # float64: the batched cached loop and the reference agree to ~1e-15, so no near-tie flips
    return EosBias(Transformer(preset("tiny", vocab_size=V)).double().eval(), bias)


def _ragged_sources(seed, b=6, s=7):
    g = torch.Generator().manual_seed(100 + seed)
    src = torch.randint(4, V, (b, s), generator=g)
    lengths = torch.randint(1, s + 1, (b,), generator=g)
    src[torch.arange(s)[None] >= lengths[:, None]] = PAD
    return src


def _alone(src_row):
    src = src_row[src_row != PAD][None]
    mask = padding_mask(src, PAD)
    return src, mask


def repeats(tokens, t, n):
    """Would appending t to tokens repeat one of their n-grams? (n = 0: never)"""
    if n == 0 or len(tokens) < n:
        return False
    grams = {tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)}
    return (*tokens[len(tokens) - n + 1:], t) in grams


def reference_beam(model, src_row, k, alpha, kind, max_extra, min_length=0, stopping="exact",
                   no_repeat=0):
    """§6.1 beam search's rules, one sentence, recomputing every prefix: (score, tokens, logprob).
    stopping: when to stop once k hypotheses have finished (see GenerationConfig.early_stopping);
    no_repeat: no n-gram of that size twice."""
    src, mask = _alone(src_row)
    memory, max_len = model.encode(src, mask), src.shape[1] + max_extra
    live, finished = [([], 0.0)], []
    for step in range(max_len + 1):
        tgt = torch.tensor([[BOS] + toks for toks, _ in live])
        n = len(live)
        logits = model.decode(tgt, memory.expand(n, -1, -1), mask.expand(n, -1, -1, -1))[:, -1]
        lprobs = torch.log_softmax(logits, -1).tolist()
        cands = [(score + lprobs[b][t], b, t) for b, (_, score) in enumerate(live) for t in range(V)
                 if t not in (PAD, BOS) and (t == EOS or step < max_len)
                 and (t != EOS or step >= min_length) and not repeats(live[b][0], t, no_repeat)]
        cands = sorted(cands, key=lambda c: -c[0])[:2 * k]  # 2k candidates
        for score, b, t in cands[:k]:  # EOS is finalised only among the top k
            if t == EOS:
                finished.append((score / length_penalty(step + 1, alpha, kind), live[b][0], score))
        live = [(live[b][0] + [t], score) for score, b, t in cands if t != EOS][:k]
        if not live:
            break
        if len(finished) >= k:
            if stopping == "first_k":
                break
            kth = sorted((f[0] for f in finished), reverse=True)[k - 1]
            lengths = (step + 2,) if stopping == "current_length" else (step + 2, max_len + 1)
            bound = max(length_penalty(m, alpha, kind) for m in lengths)
            if live[0][1] / bound <= kth:
                break
    return sorted(finished, key=lambda f: -f[0])[:k]


def reference_greedy(model, src_row, max_extra, min_length=0, no_repeat=0):
    src, mask = _alone(src_row)
    memory, out = model.encode(src, mask), []
    for step in range(src.shape[1] + max_extra):
        logits = model.decode(torch.tensor([[BOS] + out]), memory, mask)[0, -1].clone()
        logits[[PAD, BOS]] = -math.inf
        logits[[t for t in range(V) if repeats(out, t, no_repeat)]] = -math.inf
        if step < min_length:
            logits[EOS] = -math.inf
        token = int(logits.argmax())
        if token == EOS:
            break
        out.append(token)
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("beam", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("kind, alpha", [("gnmt", 0.6), ("avg", 1.0)])
@pytest.mark.parametrize("stopping", ["exact", "first_k", "current_length"])
def test_beam_search_equals_reference_loop(seed, beam, kind, alpha, stopping):
    model, src = _model(seed), _ragged_sources(seed)
    hyps = beam_search_hypotheses(model, src, beam=beam, alpha=alpha, length_penalty_kind=kind,
                                  max_extra=5, early_stopping=stopping, **IDS)
    for row, got in zip(src, hyps, strict=True):
        want = reference_beam(model, row, beam, alpha, kind, max_extra=5, stopping=stopping)
        assert [h.tokens for h in got] == [w[1] for w in want]
        assert [h.score for h in got] == pytest.approx([w[0] for w in want], abs=1e-9)
        assert [h.logprob for h in got] == pytest.approx([w[2] for w in want], abs=1e-9)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_greedy_equals_reference_loop_and_beam_one(seed):
    model, src = _model(seed), _ragged_sources(seed)
    greedy = greedy_search(model, src, max_extra=5, **IDS)
    assert greedy == [reference_greedy(model, row, 5) for row in src]
    assert beam_search(model, src, beam=1, max_extra=5, **IDS) == greedy


@pytest.mark.parametrize("beam", [1, 4])
def test_finished_sentences_leave_the_batch_without_changing_results(beam):
    model, src = _model(0, bias=3.0), _ragged_sources(0, b=8)
    batched = beam_search_hypotheses(model, src, beam=beam, max_extra=6, **IDS)
    rows = model.rows
    # The first step runs one row per sentence (its beams are alike), then K per sentence ...
    assert rows[0] == 8 and len(rows) > 1 + (beam > 1) and rows[-1] < 8 * beam  # ... then leave
    later = rows[1:] if beam > 1 else rows
    assert later[0] == 8 * beam and all(a >= b for a, b in zip(later, later[1:], strict=False))
    for row, got in zip(src, batched, strict=True):  # ... and each is what it is alone
        alone = beam_search_hypotheses(model, row[row != PAD][None], beam=beam, max_extra=6, **IDS)
        assert [h.tokens for h in got] == [h.tokens for h in alone[0]]
        assert [h.score for h in got] == pytest.approx([h.score for h in alone[0]], abs=1e-9)


def test_greedy_rows_leave_the_batch():
    model, src = _model(1, bias=2.0), _ragged_sources(1, b=8)
    out = greedy_search(model, src, max_extra=6, **IDS)
    # the premise: this random model's sentences end at several different steps
    assert len({len(o) for o in out}) >= 4, [len(o) for o in out]
    assert model.rows[0] == 8 and 1 <= model.rows[-1] < 8 and len(set(model.rows)) >= 4
    assert all(a >= b for a, b in zip(model.rows, model.rows[1:], strict=False))
    assert out == [greedy_search(model, row[row != PAD][None], max_extra=6, **IDS)[0] for row in src]


def test_min_length_bans_eos_until_then():
    model, src = _model(2, bias=6.0), _ragged_sources(2)  # EOS nearly always first
    assert all(t == [] for t in greedy_search(model, src, max_extra=5, **IDS))
    config = GenerationConfig(min_length=3, max_extra=5, **IDS)
    out = search(model, src, config)
    assert out == [reference_greedy(model, row, 5, min_length=3) for row in src]
    assert all(len(t) >= 3 for t in out)
    hyps = search_hypotheses(model, src, config.replace(beam=3))
    for row, got in zip(src, hyps, strict=True):
        want = reference_beam(model, row, 3, 0.6, "gnmt", 5, min_length=3)
        assert [h.tokens for h in got] == [w[1] for w in want]


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("beam", [1, 3])
def test_no_repeat_ngram_size_equals_reference_loop(n, beam):
    """fairseq's/HF's no_repeat_ngram_size: the vectorised ban against a per-hypothesis Python
    check; the premise (this model repeats n-grams without the ban) is asserted first."""
    model, src = _model(0, bias=-3.0), _ragged_sources(0)  # long outputs: room to repeat
    config = GenerationConfig(beam=beam, max_extra=12, early_stopping="first_k", **IDS)
    free = search(model, src, config)
    assert any(repeats(o[:i], o[i], n) for o in free for i in range(len(o))), free
    banned = config.replace(no_repeat_ngram_size=n)
    if beam == 1:
        out = search(model, src, banned)
        assert out == [reference_greedy(model, row, 12, no_repeat=n) for row in src]
    else:
        hyps = search_hypotheses(model, src, banned)
        out = [h[0].tokens for h in hyps]
        for row, got in zip(src, hyps, strict=True):
            want = reference_beam(model, row, beam, 0.6, "gnmt", 12, stopping="first_k",
                                  no_repeat=n)
            assert [h.tokens for h in got] == [w[1] for w in want]
    assert not any(repeats(o[:i], o[i], n) for o in out for i in range(len(o)))
    assert out != free


def test_a_decoder_started_from_eos_can_still_end_with_it():
    """fairseq's models start the decoder with </s> (BOS = EOS): that token stays a possible
    output (only padding and a separate BOS are banned), so sentences end as they should."""
    model, src = _model(2, bias=6.0), _ragged_sources(2)  # EOS nearly always first
    for beam in (1, 3):
        config = GenerationConfig(beam=beam, max_extra=5, **{**IDS, "bos_id": IDS["eos_id"]})
        assert all(t == [] for t in search(model, src, config))


def test_a_forced_first_token_comes_first_and_adds_nothing_to_the_score():
    """forced_first_id (BART's forced_bos_token_id): every output starts with it, even where
    the model would end at once; its log-probability counts as 0, as transformers scores it."""
    model, src = _model(2, bias=6.0), _ragged_sources(2)  # EOS nearly always first
    for beam in (1, 3):
        config = GenerationConfig(beam=beam, max_extra=5, forced_first_id=A,
                                  **{**IDS, "bos_id": IDS["eos_id"]})
        assert all(t[:1] == [A] for t in search(model, src, config))
    row, mask = _alone(src[0])
    one = search_hypotheses(model, row, GenerationConfig(beam=1, max_extra=5, forced_first_id=A,
                                                         **IDS))[0][0]
    with torch.no_grad():
        logits = model.decode(torch.tensor([[BOS, A]]), model.encode(row, mask), mask)[0, -1]
    assert one.tokens == [A] and one.score == pytest.approx(
        float(torch.log_softmax(logits.double(), -1)[EOS]) / length_penalty(2, 0.6), abs=1e-6)
    with pytest.raises(ValueError, match="forced_first_id=-1"):
        GenerationConfig(forced_first_id=-1)


def test_max_new_tokens_caps_every_row():
    model, src = _model(0, bias=-50.0), _ragged_sources(0)  # EOS never wins: rows run to their limit
    config = GenerationConfig(max_new_tokens=4, **IDS)
    assert [len(t) for t in search(model, src, config)] == [4] * len(src)
    assert [len(t) for t in search(model, src, config.replace(beam=3))] == [4] * len(src)


def test_sampling_is_seeded_and_top_k_one_is_greedy():
    model, src = _model(3), _ragged_sources(3)
    config = GenerationConfig(temperature=1.0, seed=7, max_extra=5, **IDS)
    a, b = search(model, src, config), search(model, src, config)
    c = search(model, src, config.replace(seed=8))
    assert a == b and a != c
    assert search(model, src, config.replace(top_k=1)) == greedy_search(model, src, max_extra=5, **IDS)


def test_early_stop_bounds_live_hypotheses_by_the_largest_penalty():
    # EOS first is likely (0.7) but one token long; the A-run is unlikely at first (0.25), then
    # near-certain. With the mean log-prob ("avg", alpha 1) the 10 A's win (-1.50 / 11 > log 0.7).
    # After step 0 the live "A" has log-prob -1.39: divided by the penalty of the next length
    # (2) it cannot beat log 0.7, but divided by that of the longest (54) it can, so the search
    # must go on (stopping there is the bug the bound prevents).
    a = 3
    table = {(): {EOS: 0.7, a: 0.25, 4: 0.05}}
    table.update({(a,) * n: {a: 0.99, EOS: 0.005, 4: 0.005} for n in range(1, 10)})
    table[(a,) * 10] = {EOS: 0.99, a: 0.005, 4: 0.005}

    model = ScriptedModel(table, {EOS: 0.98, a: 0.01, 4: 0.01})
    src = torch.tensor([[5, 6, 7]])
    best = beam_search_hypotheses(model, src, beam=1, alpha=1.0, length_penalty_kind="avg",
                                  **IDS)[0][0]
    assert best.tokens == [a] * 10
    assert best.score == pytest.approx((math.log(0.25) + 9 * math.log(0.99) + math.log(0.99)) / 11)
    # The cheaper rules stop at step 0 with EOS alone: what they trade for speed.
    for rule in ("first_k", "current_length"):
        cheap = beam_search_hypotheses(model, src, beam=1, alpha=1.0, length_penalty_kind="avg",
                                       early_stopping=rule, **IDS)[0][0]
        assert cheap.tokens == [] and cheap.score == pytest.approx(math.log(0.7))


@pytest.mark.parametrize("kwargs, message", [
    (dict(beam=0), "beam=0: must be a positive integer"),
    (dict(beam=-3), "beam=-3: must be a positive integer"),
    (dict(length_penalty="x"), "length_penalty='x': must be one of gnmt, avg"),
    (dict(early_stopping="never"), "early_stopping='never': must be one of exact, first_k"),
    (dict(alpha=float("nan")), "alpha=nan: must be a finite number"),
    (dict(temperature=-1.0), "temperature=-1.0: must be >= 0"),
    (dict(top_k=0), "top_k=0: must be a positive integer"),
    (dict(top_p=1.5), "top_p=1.5: must be in"),
    (dict(max_extra=-1), "max_extra=-1: must be non-negative"),
    (dict(max_new_tokens=-2), "max_new_tokens=-2: must be non-negative"),
    (dict(min_length=-1), "min_length=-1: must be non-negative"),
    (dict(beam=4, temperature=0.7), "temperature=0.7: beam search"),
    (dict(banned=(3, -1)), r"banned\[1\]=-1: must be a token id"),
    (dict(beam=2.5), "beam=2.5: must be int"),
])
def test_config_errors_name_the_python_parameter(kwargs, message):
    with pytest.raises(ValueError, match=message) as err:
        GenerationConfig(**kwargs)
    assert "--" not in str(err.value)  # never a command-line flag


def test_search_functions_raise_value_errors_not_index_errors():
    model, src = _model(0), _ragged_sources(0)
    with pytest.raises(ValueError, match="beam=0: must be a positive integer"):
        beam_search(model, src, beam=0, **IDS)
    with pytest.raises(ValueError, match="length_penalty='x'"):
        beam_search_hypotheses(model, src, length_penalty_kind="x", **IDS)
    with pytest.raises(ValueError, match="max_extra=-1"):
        greedy_search(model, src, max_extra=-1, **IDS)


def test_config_round_trips_through_json():
    config = GenerationConfig(beam=4, alpha=0.8, length_penalty="avg", banned=(5, 6), seed=1)
    assert GenerationConfig.from_json(config.to_json()) == config
    assert config.strategy == "beam" and GenerationConfig().strategy == "greedy"
    assert GenerationConfig(temperature=0.5).strategy == "sample"
