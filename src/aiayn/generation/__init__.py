"""Generation, outside the models: one decode loop for every family.

    config.py      GenerationConfig: strategy, lengths, special tokens (typed, checked)
    steps.py       step(new_tokens, cache) -> logits adapters: encoder-decoder, decoder-only LM
    loop.py        the one loop that owns the cache (reorders it, drops finished rows)
    strategies.py  greedy / sampling;  beam.py  §6.1 beam search;  sampling.py  logit filters
    search.py      encoder-decoder entry points;  lm.py  language-model streaming / generation
"""

from aiayn.generation.config import GenerationConfig

__all__ = ["GenerationConfig"]
