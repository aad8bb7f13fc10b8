"""The language model's memory checks behind the API (LanguageModel.check_memory,
check_eval_memory): a Python user's generate, generate_batch, stream and evaluate refuse the
oversize requests `aiayn generate` and `aiayn lm eval` refuse, naming the arguments, before any
work; what fits still runs. A small machine is simulated (aiayn.sizes.available_bytes
patched)."""

import pytest
import torch

from aiayn import sizes
from aiayn.config import lm_preset
from aiayn.data.tokenizer import Tokenizer
from aiayn.errors import ConfigError, UserError
from aiayn.models.decoder_lm import DecoderLM
from aiayn.tasks.language_model import LanguageModel

TEXT = "the quick brown fox jumps over the lazy dog\n"


@pytest.fixture(scope="module")
def lm():
    tok = Tokenizer.train([TEXT] * 4, 64, "char")
    torch.manual_seed(0)
    return LanguageModel(DecoderLM(lm_preset("tiny", vocab_size=tok.vocab_size)), tok)


def small_machine(monkeypatch, mib: int) -> None:
    monkeypatch.delenv(sizes.SKIP_ENV, raising=False)
    monkeypatch.setattr(sizes, "available_bytes", lambda device=None: mib * 2**20)


def test_generation_beyond_the_memory_is_refused_by_name(lm, monkeypatch):
    small_machine(monkeypatch, 1)
    with pytest.raises(UserError, match=r"^num_samples 1000000000: would need ~.*for the batch"):
        lm.generate_batch(["the"], 4, num_samples=10**9)
    with pytest.raises(UserError, match=rf"^max_new_tokens {10**13}: would need ~.*; at most "):
        lm.generate("the", max_new_tokens=10**13)
    with pytest.raises(UserError, match=rf"^max_new_tokens {10**13}: would need ~"):
        lm.stream("the", 10**13)  # refused when called, before the first token
    with pytest.raises(UserError, match=r"^--num-samples 1000000000: would need ~"):  # the CLI's
        lm.check_memory(["the"], 4, 10**9, names=("--max-new-tokens", "--num-samples"))
    with pytest.raises(ConfigError, match=r"^num_samples=0: must be a positive integer"):
        lm.generate_batch(["the"], 4, num_samples=0)  # a bad value: refused by its own check
    samples = lm.generate_batch(["the", "a"], 3, num_samples=2, temperature=0)
    assert [len(s) for s in samples] == [2, 2]  # what fits decodes


def test_evaluation_beyond_the_memory_is_refused_by_name(lm, monkeypatch):
    small_machine(monkeypatch, 1)
    texts = [TEXT * 2000]
    with pytest.raises(UserError, match=r"^batch_size 100000: would need ~.*-token blocks; "):
        lm.evaluate(texts, batch_size=100_000)
    with pytest.raises(UserError, match=r"^--batch-size 100000: would need ~"):  # the CLI's name
        lm.check_eval_memory(texts, batch_size=100_000, name="--batch-size")
    small_machine(monkeypatch, 64)
    # a batch larger than the text has blocks needs only the blocks there are
    assert lm.evaluate(TEXT, batch_size=10**9)["tokens"] == len(TEXT) + 1


def test_corpus_splits_are_the_folders_own_text(lm, tmp_path):
    """What `aiayn lm eval` scores without --text: the documents the folder was trained on."""
    (tmp_path / "a.txt").write_text(TEXT * 40)
    trained = LanguageModel(lm.model, lm.tokenizer, meta={"experiment": {
        "data": {"corpus": None, "valid_frac": 0.25}, "texts": [str(tmp_path / "a.txt")]}})
    splits = trained.corpus_splits()
    assert sorted(splits) == ["train", "valid"]
    assert [len(d[1].splitlines()) for d in splits["train"] + splits["valid"]] == [30, 10]
