"""Language-model generation over the one loop: streaming, seeded sampling, EOS, banned tokens,
the LanguageModel text API; ragged (left-padded) prompts equal one by one, finished rows leave the
batch, and the sliding window past max_len equals nanoGPT's recompute."""

import pytest
import torch

from aiayn.config import lm_preset
from aiayn.data.tokenizer import Tokenizer
from aiayn.errors import UserError
from aiayn.generation.config import GenerationConfig
from aiayn.generation.lm import generate, left_pad, stream, stream_config
from aiayn.models import DecoderLM
from aiayn.tasks.language_model import LanguageModel

V = 50


def _model(**overrides) -> DecoderLM:
    torch.manual_seed(0)
    model = DecoderLM(lm_preset("tiny", **overrides)).eval()
    with torch.no_grad():  # wider weights: a peaked, input-dependent next-token distribution
        for p in model.parameters():
            p.normal_(0.0, 0.5)
    return model


class CountingModel(torch.nn.Module):
    """Wraps a model, recording the length of every forward call."""

    def __init__(self, model):
        super().__init__()
        self.model, self.config, self.calls = model, model.config, []

    def new_cache(self):
        return self.model.new_cache()

    def forward(self, tokens, cache=None):
        self.calls.append(tokens.shape[1])
        return self.model(tokens, cache)


def test_stream_yields_lazily_one_position_per_step():
    model = CountingModel(_model())
    it = stream(model, torch.randint(4, 50, (2, 7)), 5, temperature=0)
    first = next(it)
    assert first.shape == (2,) and model.calls == [7]  # prefill only, before any later step
    rest = list(it)
    assert len(rest) == 4 and model.calls == [7, 1, 1, 1, 1]  # no forward after the last token


def test_seeded_sampling_is_reproducible_and_seed_dependent():
    model, prompt = _model(), torch.randint(4, 50, (3, 4))
    a = generate(model, prompt, 15, temperature=1.0, top_k=20, seed=123)
    b = generate(model, prompt, 15, temperature=1.0, top_k=20, seed=123)
    c = generate(model, prompt, 15, temperature=1.0, top_k=20, seed=124)
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert torch.equal(a[:, :4], prompt)


def test_top_k_one_is_greedy():
    model, prompt = _model(), torch.randint(4, 50, (2, 3))
    assert torch.equal(generate(model, prompt, 10, temperature=0.7, top_k=1, seed=0),
                       generate(model, prompt, 10, temperature=0))


def test_eos_stops_rows_and_pads_them():
    model = _model()
    torch.manual_seed(1)
    for _ in range(50):  # a prompt batch where row 0 produces a token that row 1 never does
        prompt = torch.randint(4, 50, (4, 3))
        greedy = generate(model, prompt, 12, temperature=0)
        only_row0 = set(greedy[0, 3:-1].tolist()) - set(greedy[1, 3:].tolist()) - {0}
        if only_row0:
            break
    eos = min(only_row0)  # plays EOS
    out = generate(model, prompt, 12, temperature=0, eos_id=eos, pad_id=0)
    assert out.shape == (4, 15) and (out[0, 3:] == 0).any()  # row 0 stopped, row 1 went on
    for r in range(4):  # every row: identical to greedy up to its first EOS, padding after
        new, ref = out[r, 3:].tolist(), greedy[r, 3:].tolist()
        stop = ref.index(eos) + 1 if eos in ref else len(ref)
        assert new[:stop] == ref[:stop] and set(new[stop:]) <= {0}


def test_banned_tokens_are_never_produced():
    model, prompt = _model(), torch.randint(4, 50, (4, 3))
    common = set(generate(model, prompt, 20, temperature=0)[:, 3:].flatten().tolist())
    banned = sorted(common)[:3]
    out = generate(model, prompt, 20, temperature=1.5, seed=0, banned=banned)
    assert not set(out[:, 3:].flatten().tolist()) & set(banned)


def test_learned_positions_limit_is_a_user_error():
    with pytest.raises(UserError, match="exceeds the model's max_len=64"):
        list(stream(_model(), torch.ones(1, 60, dtype=torch.long), 5))
    assert generate(_model(positions="sinusoidal"), torch.ones(1, 60, dtype=torch.long),
                    10, temperature=0).shape == (1, 70)


@pytest.fixture(scope="module")
def lm():
    texts = ["def f(x):\n    return x + 1\n", "print('héllo wörld ✓')\n"] * 4
    tok = Tokenizer.train(texts, 300, "byte_bpe")
    torch.manual_seed(0)
    model = DecoderLM(lm_preset("tiny", vocab_size=tok.vocab_size))
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.3)
    return LanguageModel(model, tok)


def test_language_model_stream_pieces_join_to_generate(lm):
    pieces = list(lm.stream("def ", 30, temperature=1.0, seed=5))
    assert len(pieces) > 1
    assert "".join(pieces) == lm.generate("def ", 30, temperature=1.0, seed=5)


class ScriptedLM(torch.nn.Module):
    """Produces a fixed token sequence, whatever the input (for exact streaming checks)."""

    def __init__(self, script, vocab_size):
        super().__init__()
        self.config = lm_preset("tiny", vocab_size=vocab_size, positions="sinusoidal")
        self.script, self.step = script, 0
        self.anchor = torch.nn.Parameter(torch.zeros(1))

    def new_cache(self):
        self.step = 0
        return None

    def forward(self, tokens, cache=None):
        logits = torch.zeros(tokens.shape[0], tokens.shape[1], self.config.vocab_size)
        logits[:, -1, self.script[self.step]] = 10.0
        self.step += 1
        return logits


def test_stream_holds_back_a_character_split_across_byte_tokens(lm):
    tok = lm.tokenizer
    ids = [tok.token_to_id(t) for t in ("d", "Ã", "©", "x")]  # "é" is bytes C3 A9 = "Ã" "©"
    assert None not in ids
    scripted = LanguageModel(ScriptedLM(ids + [2], tok.vocab_size), tok)
    assert list(scripted.stream("", 10, temperature=0)) == ["d", "é", "x"]  # stops at </s>


def test_language_model_save_load_and_dispatch(lm, tmp_path):
    import aiayn

    lm.save(tmp_path / "m")
    again = aiayn.load(tmp_path / "m")
    assert isinstance(again, LanguageModel)
    assert again.generate("x", 20, temperature=0) == lm.generate("x", 20, temperature=0)
    r = again.evaluate("def f(x):\n    return x\n")
    assert r["tokens"] > 0 and r["bits_per_byte"] > 0


def test_bad_options_fail_before_any_token(lm):
    model = CountingModel(_model())
    for bad in (dict(top_k=0), dict(top_p=0.0), dict(temperature=-1.0)):
        with pytest.raises(UserError):
            stream(model, torch.ones(1, 3, dtype=torch.long), 5, **bad)  # not even iterated
    assert model.calls == []
    with pytest.raises(UserError, match="top_p=1.5"):
        lm.stream("def", 5, top_p=1.5)


def test_language_model_writes_past_its_context(lm):
    """tiny has max_len 64 and learned positions: the context slides (nanoGPT) instead of
    stopping; the first tokens are those of ordinary generation."""
    long = lm.generate("def ", 150, temperature=0.0)  # 1 + 2 prompt tokens + 150 > 64
    short = lm.generate("def ", 40, temperature=0.0)
    assert long.startswith(short) and len(long) > 2 * len(short)


def test_language_model_batches_prompts_of_different_lengths(lm):
    prompts = ["def ", "print('héllo wörld", "x"]
    together = lm.generate_batch(prompts, 20, temperature=0.0)
    alone = [[lm.generate(p, 20, temperature=0.0)] for p in prompts]
    assert together == alone
    samples = lm.generate_batch(["def "], 10, num_samples=3, temperature=1.0, seed=0)
    assert len(samples) == 1 and len(samples[0]) == 3
    with pytest.raises(ValueError, match="num_samples=0"):
        lm.generate_batch(["x"], 5, num_samples=0)




def _double_model(positions="learned", seed=0) -> DecoderLM:
    torch.manual_seed(seed)
    model = DecoderLM(lm_preset("tiny", positions=positions)).double().eval()  # max_len 64
    with torch.no_grad():  # positions and tokens both matter: outputs vary along a sequence
        model.embed.tokens.weight.normal_(0.0, 0.4)
        if positions == "learned":
            model.embed.positions.weight.normal_(0.0, 1.0)
    return model


class Recording(torch.nn.Module):
    """Wraps a model, recording the shape and the last position's logits of every call."""

    def __init__(self, model):
        super().__init__()
        self.model, self.config, self.calls, self.logits = model, model.config, [], []

    def new_cache(self):
        return self.model.new_cache()

    def forward(self, tokens, cache=None, **kwargs):
        self.calls.append(tuple(tokens.shape))
        out = self.model(tokens, cache, **kwargs)
        self.logits.append(out[:, -1])
        return out


def _prompts(seed, lengths):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(4, V, (n,), generator=g).tolist() for n in lengths]


def reference(model, prompt, n, max_len=None):
    """nanoGPT's loop: no cache, crop to the last max_len tokens, argmax.
    -> (new tokens, each step's next-token logits (n, V))."""
    idx, logits = torch.tensor([prompt]), []
    for _ in range(n):
        window = idx if max_len is None else idx[:, -max_len:]
        with torch.no_grad():
            logits.append(model(window)[0, -1])
        idx = torch.cat([idx, logits[-1].argmax()[None, None]], dim=1)
    return idx[0, len(prompt):].tolist(), torch.stack(logits)


def _same(got, want):
    assert got[0] == want[0]  # tokens
    assert torch.allclose(got[1], want[1], atol=1e-9)  # and the logits they came from


@pytest.mark.parametrize("positions", ["learned", "sinusoidal"])
def test_padded_forward_equals_each_row_alone(positions):
    model = _double_model(positions)
    prompts = _prompts(0, [3, 9, 6])
    tokens, mask = left_pad(prompts)
    pos = (mask.long().cumsum(1) - 1).clamp(min=0)
    logits = model(tokens, positions=pos, mask=mask[:, None, None, :])
    for row, p in enumerate(prompts):
        alone = model(torch.tensor([p]))[0]
        assert torch.allclose(logits[row, -len(p):], alone, atol=1e-10)


@pytest.mark.parametrize("positions", ["learned", "sinusoidal"])
def test_ragged_prompts_equal_one_by_one(positions):
    model = Recording(_double_model(positions, seed=1))
    prompts = _prompts(1, [2, 11, 5, 1, 7])
    out = generate(model, prompts, 12, temperature=0)
    assert out.shape == (5, 11 + 12) and model.calls[0] == (5, 11)
    logits = torch.stack(model.logits, 1)  # (B, steps, V): no EOS, so rows stay in place
    for row, p in enumerate(prompts):
        _same((out[row, 11:].tolist(), logits[row]), reference(model.model, p, 12))


def test_finished_rows_leave_the_batch_and_pad():
    model = Recording(_double_model(seed=5))
    prompts = _prompts(5, [4, 4, 4, 4])
    full = generate(model.model, torch.tensor(prompts), 15, temperature=0)[:, 4:]
    eos = full[0, 2].item()  # row 0 stops at its third token, row 1 never
    assert eos not in full[0, :2].tolist() and eos not in full[1].tolist()
    model.calls.clear()
    out = generate(model, torch.tensor(prompts), 15, temperature=0, eos_id=eos, pad_id=0)[:, 4:]
    batch = [b for b, _ in model.calls]
    assert batch[0] == 4 and batch[3] < 4  # row 0 left after its third token
    assert all(a >= b for a, b in zip(batch, batch[1:], strict=False))
    for r in range(4):  # every row: as without EOS up to its first EOS, padding after
        ref = full[r].tolist()
        stop = ref.index(eos) + 1 if eos in ref else len(ref)
        assert out[r, :stop].tolist() == ref[:stop] and set(out[r, stop:].tolist()) <= {0}


@pytest.mark.parametrize("positions", ["learned", "sinusoidal"])
def test_sliding_window_equals_full_recompute_within_context(positions):
    model = Recording(_double_model(positions, seed=3))
    prompt = _prompts(3, [20])[0]
    slid = generate(model, torch.tensor([prompt]), 44, temperature=0, sliding_window=True)
    assert [t for _, t in model.calls] == [20] + [1] * 43  # 64 positions: the cache all along
    _same((slid[0, 20:].tolist(), torch.cat(model.logits)), reference(model.model, prompt, 44))
    assert torch.equal(slid, generate(model.model, torch.tensor([prompt]), 44, temperature=0))


@pytest.mark.parametrize("positions", ["learned", "sinusoidal"])
def test_sliding_window_past_context_is_nanogpt_crop_and_recompute(positions):
    model = Recording(_double_model(positions, seed=4))
    prompt = _prompts(4, [50])[0]
    out = generate(model, torch.tensor([prompt]), 40, temperature=0, sliding_window=True)
    _same((out[0, 50:].tolist(), torch.cat(model.logits)),
          reference(model.model, prompt, 40, max_len=64))
    # Cached steps up to position 63, then the last 64 tokens recomputed at every step.
    assert [t for _, t in model.calls] == [50] + [1] * 14 + [64] * 25


@pytest.mark.parametrize("positions", ["learned", "sinusoidal"])
def test_sliding_window_with_ragged_prompts_equals_one_by_one(positions):
    model = Recording(_double_model(positions, seed=5))
    prompts = _prompts(5, [58, 30, 61, 3])
    out = generate(model, prompts, 20, temperature=0, sliding_window=True)
    logits = torch.stack(model.logits, 1)
    for row, p in enumerate(prompts):
        _same((out[row, 61:].tolist(), logits[row]), reference(model.model, p, 20, max_len=64))


def test_prompt_longer_than_context_is_cropped():
    model = Recording(_double_model("learned", seed=6))
    prompt = _prompts(6, [80])[0]
    out = generate(model, torch.tensor([prompt]), 5, temperature=0, sliding_window=True)
    _same((out[0, 80:].tolist(), torch.cat(model.logits)),
          reference(model.model, prompt, 5, max_len=64))


def test_stream_config_and_errors():
    model, prompt = _double_model(), torch.randint(4, V, (2, 3))
    config = GenerationConfig(max_new_tokens=6, eos_id=None)
    assert torch.equal(torch.stack(list(stream_config(model, prompt, config)), 1),
                       generate(model, prompt, 6, temperature=0)[:, 3:])
    with pytest.raises(ValueError, match="max_new_tokens=None"):
        stream_config(model, prompt, GenerationConfig())
    with pytest.raises(ValueError, match="beam=2"):
        stream_config(model, prompt, GenerationConfig(beam=2, max_new_tokens=3))
    with pytest.raises(ValueError, match="top_k=0: must be a positive integer"):
        stream(model, prompt, 5, top_k=0)
    with pytest.raises(ValueError, match="left-padded"):
        stream(model, prompt, 5, prompt_mask=torch.tensor([[1, 1, 1], [1, 1, 0]]).bool())
    with pytest.raises(ValueError, match="at least one token"):
        left_pad([[5, 6], []])


def _repeats(tokens, t, n):
    grams = {tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)}
    return len(tokens) >= n and (*tokens[len(tokens) - n + 1:], t) in grams


@pytest.mark.parametrize("n", [1, 2, 3])
def test_no_repeat_ngram_size_counts_the_prompt_and_not_the_padding(n):
    """HF's rule for decoder-only models: an n-gram of the prompt may not come again either.
    Ragged prompts batched (left padding, which must not count) equal the per-prompt reference."""
    model = _double_model(seed=2)
    prompts = _prompts(2, [1, 9, 4, 2]) + [[7, 8, 9, 7, 8]]  # the last ends in n-grams it has
    free = generate(model, prompts, 20, temperature=0)[:, 9:].tolist()
    assert any(_repeats(p + o[:i], o[i], n) for p, o in zip(prompts, free, strict=True)
               for i in range(20))
    out = generate(model, prompts, 20, temperature=0, no_repeat_ngram_size=n)[:, 9:].tolist()
    for prompt, got in zip(prompts, out, strict=True):
        idx = list(prompt)
        for _ in range(20):  # reference: no cache, argmax over the tokens that repeat nothing
            logits = model(torch.tensor([idx]))[0, -1].detach().clone()
            logits[[t for t in range(V) if _repeats(idx, t, n)]] = float("-inf")
            idx.append(int(logits.argmax()))
        assert got == idx[len(prompt):]
        assert not any(_repeats(prompt + got[:i], got[i], n) for i in range(20))
