"""The generation loop: streaming, seeded sampling, EOS, banned tokens; LanguageModel text API."""

import pytest
import torch

from aiayn.config import lm_preset
from aiayn.data.tokenizer import Tokenizer
from aiayn.errors import UserError
from aiayn.generation.lm import generate, stream
from aiayn.models import DecoderLM
from aiayn.tasks.language_model import LanguageModel


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny models gain nothing from more threads, and on a busy machine OpenMP threads waiting
    for each other can make them 50x slower; restore the setting afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


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
