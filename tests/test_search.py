import math

import pytest
import torch

from aiayn import Transformer, preset
from aiayn.generation.search import (
    beam_search,
    beam_search_hypotheses,
    greedy_search,
    length_penalty,
)

PAD, BOS, EOS, A, B = 0, 1, 2, 3, 4
IDS = dict(bos_id=BOS, eos_id=EOS, pad_id=PAD)


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


def _random_model():
    torch.manual_seed(0)
    return Transformer(preset("tiny", vocab_size=40)).eval()


def _sources():
    torch.manual_seed(1)
    src = torch.randint(4, 40, (5, 8))
    src[1, 5:] = PAD
    src[3, 2:] = PAD
    return src


def test_beam_size_one_equals_greedy():
    model, src = _random_model(), _sources()
    assert beam_search(model, src, beam=1, max_extra=6, **IDS) == greedy_search(model, src, max_extra=6, **IDS)


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


@pytest.mark.parametrize("beam", [1, 3])
def test_cache_on_equals_cache_off(beam):
    model, src = _random_model(), _sources()
    cached = beam_search_hypotheses(model, src, beam=beam, max_extra=6, **IDS)
    uncached = beam_search_hypotheses(Uncached(model), src, beam=beam, max_extra=6, **IDS)
    for c, u in zip(cached, uncached, strict=True):
        assert [h.tokens for h in c] == [h.tokens for h in u]
        assert [h.score for h in c] == pytest.approx([h.score for h in u], abs=1e-4)


@pytest.mark.parametrize("beam", [1, 4])
def test_batch_equals_each_sentence_alone(beam):
    model, src = _random_model(), _sources()
    batched = beam_search(model, src, beam=beam, max_extra=6, **IDS)
    alone = [beam_search(model, row[row != PAD][None], beam=beam, max_extra=6, **IDS)[0] for row in src]
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
