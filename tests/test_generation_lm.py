"""Language-model generation over the one loop: ragged (left-padded) prompts equal one by one,
finished rows leave the batch, and the sliding window past max_len equals nanoGPT's recompute."""

import pytest
import torch

from aiayn.config import lm_preset
from aiayn.generation.config import GenerationConfig
from aiayn.generation.lm import generate, left_pad, stream, stream_config
from aiayn.models import DecoderLM

V = 50


def _model(positions="learned", seed=0) -> DecoderLM:
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
    model = _model(positions)
    prompts = _prompts(0, [3, 9, 6])
    tokens, mask = left_pad(prompts)
    pos = (mask.long().cumsum(1) - 1).clamp(min=0)
    logits = model(tokens, positions=pos, mask=mask[:, None, None, :])
    for row, p in enumerate(prompts):
        alone = model(torch.tensor([p]))[0]
        assert torch.allclose(logits[row, -len(p):], alone, atol=1e-10)


@pytest.mark.parametrize("positions", ["learned", "sinusoidal"])
def test_ragged_prompts_equal_one_by_one(positions):
    model = Recording(_model(positions, seed=1))
    prompts = _prompts(1, [2, 11, 5, 1, 7])
    out = generate(model, prompts, 12, temperature=0)
    assert out.shape == (5, 11 + 12) and model.calls[0] == (5, 11)
    logits = torch.stack(model.logits, 1)  # (B, steps, V): no EOS, so rows stay in place
    for row, p in enumerate(prompts):
        _same((out[row, 11:].tolist(), logits[row]), reference(model.model, p, 12))


def test_finished_rows_leave_the_batch_and_pad():
    model = Recording(_model(seed=5))
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
    model = Recording(_model(positions, seed=3))
    prompt = _prompts(3, [20])[0]
    slid = generate(model, torch.tensor([prompt]), 44, temperature=0, sliding_window=True)
    assert [t for _, t in model.calls] == [20] + [1] * 43  # 64 positions: the cache all along
    _same((slid[0, 20:].tolist(), torch.cat(model.logits)), reference(model.model, prompt, 44))
    assert torch.equal(slid, generate(model.model, torch.tensor([prompt]), 44, temperature=0))


@pytest.mark.parametrize("positions", ["learned", "sinusoidal"])
def test_sliding_window_past_context_is_nanogpt_crop_and_recompute(positions):
    model = Recording(_model(positions, seed=4))
    prompt = _prompts(4, [50])[0]
    out = generate(model, torch.tensor([prompt]), 40, temperature=0, sliding_window=True)
    _same((out[0, 50:].tolist(), torch.cat(model.logits)),
          reference(model.model, prompt, 40, max_len=64))
    # Cached steps up to position 63, then the last 64 tokens recomputed at every step.
    assert [t for _, t in model.calls] == [50] + [1] * 14 + [64] * 25


@pytest.mark.parametrize("positions", ["learned", "sinusoidal"])
def test_sliding_window_with_ragged_prompts_equals_one_by_one(positions):
    model = Recording(_model(positions, seed=5))
    prompts = _prompts(5, [58, 30, 61, 3])
    out = generate(model, prompts, 20, temperature=0, sliding_window=True)
    logits = torch.stack(model.logits, 1)
    for row, p in enumerate(prompts):
        _same((out[row, 61:].tolist(), logits[row]), reference(model.model, p, 20, max_len=64))


def test_prompt_longer_than_context_is_cropped():
    model = Recording(_model("learned", seed=6))
    prompt = _prompts(6, [80])[0]
    out = generate(model, torch.tensor([prompt]), 5, temperature=0, sliding_window=True)
    _same((out[0, 80:].tolist(), torch.cat(model.logits)),
          reference(model.model, prompt, 5, max_len=64))


def test_stream_config_and_errors():
    model, prompt = _model(), torch.randint(4, V, (2, 3))
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
    model = _model(seed=2)
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
