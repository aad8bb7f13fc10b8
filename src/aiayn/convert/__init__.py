"""Converters from other libraries' checkpoints to aiayn models. Foreign parameter names
(``c_attn``, ``query``, ...) live only in these modules, which map them to aiayn's."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from torch import Tensor

from aiayn.errors import UserError

# transformers' activation names (ACT2FN) -> aiayn's (nn/feedforward.py), and back
FROM_HF_ACTIVATION = {"relu": "relu", "gelu": "gelu", "gelu_new": "gelu_tanh",
                      "gelu_pytorch_tanh": "gelu_tanh", "silu": "silu", "swish": "silu"}
TO_HF_ACTIVATION = {"relu": "relu", "gelu": "gelu", "gelu_tanh": "gelu_new", "silu": "silu"}


def activation_from_hf(name: Any, what: str) -> str:
    """aiayn's activation for transformers' `name`; a UserError naming `what` (the config key)."""
    if not isinstance(name, str) or name not in FROM_HF_ACTIVATION:
        raise UserError(f"{what}={name!r} is not supported (known: "
                        f"{', '.join(FROM_HF_ACTIVATION)})")
    return FROM_HF_ACTIVATION[name]


# The config.json values each kind of checkpoint is built from, checked (check_hf_values) before
# anything is read or allocated: key -> what it must be. A key that is absent takes the
# converter's default (transformers' own).
SIZE, SIZE_OR_NULL, COUNT, RATE, EPS, TOKEN, TOKEN_OR_NULL = (
    "size", "size or null", "count", "rate", "eps", "token", "token or null")
HF_VALUES: dict[str, dict[str, str]] = {
    "GPT-2": {"vocab_size": SIZE, "n_positions": SIZE, "n_embd": SIZE, "n_layer": SIZE,
              "n_head": SIZE, "n_inner": SIZE_OR_NULL, "resid_pdrop": RATE, "attn_pdrop": RATE,
              "embd_pdrop": RATE, "layer_norm_epsilon": EPS, "bos_token_id": TOKEN_OR_NULL,
              "eos_token_id": TOKEN_OR_NULL, "pad_token_id": TOKEN_OR_NULL},
    "Marian": {"vocab_size": SIZE, "decoder_vocab_size": SIZE_OR_NULL, "d_model": SIZE,
               "encoder_layers": SIZE, "decoder_layers": SIZE, "encoder_attention_heads": SIZE,
               "decoder_attention_heads": SIZE, "encoder_ffn_dim": SIZE,
               "decoder_ffn_dim": SIZE, "max_position_embeddings": SIZE, "dropout": RATE,
               "attention_dropout": RATE},
    "BART": {"vocab_size": SIZE, "d_model": SIZE, "encoder_layers": SIZE,
             "decoder_layers": SIZE, "encoder_attention_heads": SIZE,
             "decoder_attention_heads": SIZE, "encoder_ffn_dim": SIZE, "decoder_ffn_dim": SIZE,
             "max_position_embeddings": SIZE, "dropout": RATE, "attention_dropout": RATE,
             "activation_dropout": RATE, "bos_token_id": TOKEN, "eos_token_id": TOKEN,
             "pad_token_id": TOKEN, "decoder_start_token_id": TOKEN},
    "T5": {"vocab_size": SIZE, "d_model": SIZE, "d_kv": SIZE, "d_ff": SIZE, "num_layers": SIZE,
           "num_decoder_layers": SIZE_OR_NULL, "num_heads": SIZE,
           "relative_attention_num_buckets": SIZE, "relative_attention_max_distance": SIZE,
           "n_positions": SIZE_OR_NULL, "dropout_rate": RATE, "layer_norm_epsilon": EPS,
           "pad_token_id": TOKEN, "eos_token_id": TOKEN, "decoder_start_token_id": TOKEN_OR_NULL},
    "BERT": {"vocab_size": SIZE, "hidden_size": SIZE, "num_attention_heads": SIZE,
             "intermediate_size": SIZE, "num_hidden_layers": SIZE,
             "max_position_embeddings": SIZE, "type_vocab_size": COUNT,
             "hidden_dropout_prob": RATE, "attention_probs_dropout_prob": RATE,
             "layer_norm_eps": EPS, "pad_token_id": TOKEN_OR_NULL},
    "ViT": {"hidden_size": SIZE, "num_attention_heads": SIZE, "intermediate_size": SIZE,
            "num_hidden_layers": SIZE, "image_size": SIZE, "patch_size": SIZE,
            "num_channels": SIZE, "hidden_dropout_prob": RATE,
            "attention_probs_dropout_prob": RATE, "layer_norm_eps": EPS},
}
# No size of these models comes near it: a larger one is a typo or a crafted file.
MAX_SIZE = 2**31 - 1


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _problem(rule: str, value: Any, vocab: Any) -> str | None:
    """Why `value` breaks `rule` (HF_VALUES), or None when it keeps it."""
    if value is None and rule.endswith(" or null"):
        return None
    rule = rule.removesuffix(" or null")
    if rule in (SIZE, COUNT):
        if not _is_int(value) or value < (1 if rule == SIZE else 0):
            return f"must be a {'positive' if rule == SIZE else 'non-negative'} integer"
        if value > MAX_SIZE:
            return f"must be at most {MAX_SIZE} (a size typo?)"
    elif rule == RATE:
        if not _is_number(value) or not 0 <= value < 1:
            return "must be a number in [0, 1)"
    elif rule == EPS:
        if not _is_number(value) or value <= 0:
            return "must be a positive number"
    elif not _is_int(value) or value < 0 or (_is_int(vocab) and value >= vocab):
        below = f" below vocab_size={vocab}" if _is_int(vocab) else ""
        return f"must be a token id (a non-negative integer{below})"
    return None


def check_hf_values(hf_config: dict[str, Any], config_path: Path, what: str) -> None:
    """The values a `what` checkpoint (a key of HF_VALUES) is built from are of the right type and
    range; a UserError naming the file and the key otherwise ("DIR/config.json: d_model=null:
    must be a positive integer"). Sizes that fit these rules may still be too large for the
    memory: the converters' typed config then goes through aiayn.sizes.check_fits."""
    vocab = hf_config.get("vocab_size")
    for key, rule in HF_VALUES.get(what, {}).items():
        if key in hf_config:
            problem = _problem(rule, hf_config[key], vocab)
            if problem is not None:
                raise UserError(f"{config_path}: {key}={json.dumps(hf_config[key])}: {problem}")


# transformers' files: the weights in one file, or in shards that an index maps names to
WEIGHTS, WEIGHTS_INDEX = "model.safetensors", "model.safetensors.index.json"
PICKLE_WEIGHTS, PICKLE_INDEX = "pytorch_model.bin", "pytorch_model.bin.index.json"


def weights_path(folder: str | Path) -> Path:
    """The file that names a folder's weights in messages: model.safetensors, or the index of a
    sharded checkpoint (model.safetensors.index.json) where there is no single file."""
    folder = Path(folder)
    if not (folder / WEIGHTS).is_file() and (folder / WEIGHTS_INDEX).is_file():
        return folder / WEIGHTS_INDEX
    return folder / WEIGHTS


def read_hf_folder(folder: str | Path, what: str) -> tuple[dict[str, Any], dict[str, Tensor], Path]:
    """A local checkpoint folder (config.json + model.safetensors, or the shards a
    model.safetensors.index.json names) -> (config dict, state, config path).

    Reads safetensors only (never a pickle); every problem is a one-line UserError naming the file.
    `what` names the expected kind of checkpoint in messages ("BERT", "ViT", "GPT-2", "Marian",
    "BART");
    config.json's values are checked (check_hf_values) before the weights are read.
    """
    from aiayn.folder import read_json

    folder = Path(folder)
    if not folder.is_dir():
        raise UserError(f"{folder}: folder not found")
    config_path, weights = folder / "config.json", weights_path(folder)
    if not config_path.is_file():
        raise UserError(f"{config_path}: not found (is {folder} a {what} checkpoint folder?)")
    if not weights.is_file():
        _refuse_missing_weights(folder, what)
    hf_config = read_json(config_path)
    if not isinstance(hf_config, dict):
        raise UserError(f"{config_path}: expected a JSON object")
    check_hf_values(hf_config, config_path, what)
    if weights.name == WEIGHTS_INDEX:
        return hf_config, _read_shards(weights), config_path
    return hf_config, _read_safetensors(weights), config_path


def _refuse_missing_weights(folder: Path, what: str) -> None:
    """The one-line UserError of a folder without model.safetensors or its index, naming what
    is there instead (pickled weights, one file or sharded) and the way on."""
    safe = "aiayn reads safetensors only: save it with transformers' save_pretrained(folder) first"
    if (folder / PICKLE_INDEX).is_file():
        raise UserError(f"{folder / PICKLE_INDEX}: a sharded pickle checkpoint "
                        f"(pytorch_model-*.bin); {safe}")
    if (folder / PICKLE_WEIGHTS).is_file():
        raise UserError(f"{folder}: only pytorch_model.bin (a pickle) is there; {safe}")
    raise UserError(f"{folder / WEIGHTS}: not found, nor a sharded {WEIGHTS_INDEX} (is {folder} "
                    f"a {what} checkpoint folder?)")


def _read_safetensors(path: Path) -> dict[str, Tensor]:
    from safetensors.torch import load_file

    try:
        return load_file(str(path))
    except Exception as e:  # safetensors raises its own error types
        raise UserError(f"{path}: not a readable safetensors file ({e})") from None


def _read_shards(index_path: Path) -> dict[str, Tensor]:
    """The weights of a sharded checkpoint: each shard its index's weight_map names (a file of
    the folder: a name, no path), read as safetensors; each tensor in the shard the map says."""
    from aiayn.folder import read_json

    index = read_json(index_path)
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not weight_map or not all(
            isinstance(v, str) for v in weight_map.values()):
        raise UserError(f"{index_path}: expected a \"weight_map\" of tensor names to shard files")
    state: dict[str, Tensor] = {}
    for shard in sorted(set(weight_map.values())):
        if Path(shard).name != shard or shard in (".", ".."):
            raise UserError(f"{index_path}: shard {shard!r} is not a file name of the folder")
        path = index_path.parent / shard
        if not path.is_file():
            raise UserError(f"{path}: not found ({index_path.name} names it as a shard)")
        tensors = _read_safetensors(path)
        wrong = sorted(n for n, f in weight_map.items() if f == shard and n not in tensors)
        if wrong:
            raise UserError(f"{path}: has no {wrong[0]!r}, which {index_path.name} puts there")
        state.update(tensors)
    return state


def require_model_type(c: dict[str, Any], where: str, model_type: str, kind: str) -> None:
    """config.json (the dict `c`, read at `where`) is transformers' `model_type`; a UserError
    naming what it is otherwise (`kind`: "T5 (T5ForConditionalGeneration)")."""
    if c.get("model_type") != model_type:
        raise UserError(f"{where}: model_type={c.get('model_type')!r}: not a {kind} folder")
