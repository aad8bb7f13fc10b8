"""Special tokens: the ONE place their ids and strings are defined.

Every tokenizer aiayn trains puts them first, in this order, so the ids are the same everywhere
(the model's ``pad_id``, the collate function, the decoder's start and stop symbols):

    id  string   role
    0   <pad>    padding; masked out of attention (aiayn.masks) and of the loss (§5.4)
    1   <s>      BOS: the decoder input is the target shifted right, starting with it (§3.1)
    2   </s>     EOS: the decoder learns to emit it; generation stops on it (§6.1)
    3   <unk>    a character the tokenizer never saw in training
"""

from __future__ import annotations

PAD = 0
BOS = 1
EOS = 2
UNK = 3

PAD_TOKEN = "<pad>"
BOS_TOKEN = "<s>"
EOS_TOKEN = "</s>"
UNK_TOKEN = "<unk>"

# In id order: SPECIAL_TOKENS[i] is the string of id i.
SPECIAL_TOKENS: tuple[str, ...] = (PAD_TOKEN, BOS_TOKEN, EOS_TOKEN, UNK_TOKEN)
SPECIAL_IDS: tuple[int, ...] = (PAD, BOS, EOS, UNK)
