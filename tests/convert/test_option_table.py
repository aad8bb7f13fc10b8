"""The option table (aiayn.config.options) against the exporters it drives: every field of
TransformerConfig has a row with an entry for every exporter, and for every field and exporter a
changed value does what the entry says: a Maps changes what is written, an Only is refused in one
line naming the option, an Inert changes nothing. Derived from the table: a new field is covered
by its row."""

from dataclasses import fields, replace

import numpy as np
import pytest
import torch

from aiayn import sizes
from aiayn.config import TransformerConfig, preset
from aiayn.config.options import EXPORTERS, OPTIONS, Inert, Maps, Only, refusal
from aiayn.convert import ctranslate2, hf_bart, hf_marian, hf_t5
from aiayn.errors import UserError
from aiayn.models import Transformer

TINY = dict(vocab_size=50, d_model=16, n_heads=2, d_ff=32, n_layers=2, max_len=64)
PAPER, BART, T5 = TransformerConfig(**TINY), preset("bart-tiny", **TINY), preset("t5-tiny", **TINY)
# the models each exporter is tried on: its own shape (for CTranslate2 and the count, all three)
HOMES = {"marian": [PAPER], "bart": [BART], "t5": [T5], "ctranslate2": [PAPER, BART, T5],
         "params": [replace(PAPER, positions="learned"), BART, T5]}


class _Tokens:
    """A tokenizer as model_spec reads it: a token string per id."""

    class hf:  # noqa: N801 (Tokenizer.hf, the `tokenizers` object)
        @staticmethod
        def id_to_token(i):
            return f"t{i}"


def export(config, exporter):
    """What `exporter` writes for `config`: config.json, CTranslate2's spec (every variable, its
    config) or the parameter count. A UserError where it refuses."""
    if exporter in ("marian", "bart", "t5"):
        return {"marian": hf_marian, "bart": hf_bart, "t5": hf_t5}[exporter].config_to_hf(config)
    if exporter == "params":
        return sizes.count_parameters(config)
    torch.manual_seed(0)  # the same weights for configs of one shape
    spec = ctranslate2.model_spec(Transformer(config), {}, _Tokens(), "m")
    written = {k: (np.asarray(v).shape, np.asarray(v).tobytes()) for k, v in spec.variables().items()}
    return {**written, "config": spec.config.to_dict()}


def outcome(config, exporter):
    try:
        return export(config, exporter), None
    except UserError as e:
        return None, str(e)


def changed(home, field):
    """(home with what `field`'s other value needs, that and the field changed): the first of the
    row's values that differs from the home's."""
    option = OPTIONS[field]
    value = next(v for v in option.values if v != getattr(home, field))
    base = replace(home, **dict(option.needs))
    return base, replace(base, **{field: value})


def test_every_field_of_the_encoder_decoder_has_a_row_in_its_order():
    assert list(OPTIONS) == [f.name for f in fields(TransformerConfig)]
    for field, option in OPTIONS.items():
        for exporter in EXPORTERS:
            assert isinstance(option.entry(exporter), Maps | Only | Inert), (field, exporter)


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_each_exporter_takes_the_models_of_its_shape(exporter):
    for home in HOMES[exporter]:
        assert outcome(home, exporter)[1] is None


@pytest.mark.parametrize("exporter", EXPORTERS)
@pytest.mark.parametrize("field", list(OPTIONS))
def test_a_changed_option_is_written_or_refused_by_name(field, exporter):
    entry = OPTIONS[field].entry(exporter)
    differs, compared, own = [], 0, 0
    for home in HOMES[exporter]:
        base, new = changed(home, field)
        (before, refused_before), (after, refused) = outcome(base, exporter), outcome(new, exporter)
        if refused is not None:  # one line, naming an option, as the table words it
            assert "\n" not in refused and refused.endswith(refusal(new, exporter, "m") or
                                                            refusal(new, exporter))
        if isinstance(entry, Only) and getattr(new, field) != entry.value:
            assert refused is not None, f"{exporter} wrote {field}={getattr(new, field)!r}"
            if refused_before is None:  # nothing else differs: the message names this field
                assert f"model.{field}={getattr(new, field)!r}" in refused
            continue
        if refused_before is None and refused is not None:  # a value it cannot express
            own += f"model.{field}=" in refused
        if refused_before is not None or refused is not None:
            continue
        compared += 1
        if isinstance(entry, Inert):
            assert after == before, f"{exporter} changed with {field} ({entry.why})"
        elif exporter in ("marian", "bart", "t5"):
            assert entry.name in after, f"{exporter} writes no {entry.name!r}"
            differs.append(after[entry.name] != before[entry.name])
        else:
            differs.append(after != before)
    if isinstance(entry, Maps):  # written, or (only) refused by the row's own `refuse`
        assert any(differs) or (own and entry.refuse), \
            f"{exporter} writes nothing of {field} under {entry.name!r}"
    if isinstance(entry, Inert):
        assert compared, f"{field} is never exported by {exporter} to compare"


@pytest.mark.parametrize("exporter, config, message", [
    ("marian", replace(PAPER, positions="learned"),
     "model.positions='learned': Marian has positions='sinusoidal', so this translation model "
     "has no exact MarianMTModel"),
    ("t5", replace(T5, gated_ffn=True, activation="gelu"),
     "model.activation='gelu' with model.gated_ffn=True: T5's gated GELU (feed_forward_proj "
     "'gated-gelu') is the tanh form, activation='gelu_tanh'"),
    ("ctranslate2", replace(PAPER, n_decoder_layers=0),
     "m: model.n_decoder_layers=0: the CTranslate2 export needs an encoder and a decoder"),
])
def test_a_refusal_is_one_line_naming_the_option_and_its_value(exporter, config, message):
    with pytest.raises(UserError) as e:
        export(config, exporter)
    assert str(e.value) == message
