"""`aiayn import hf-*` of a crafted config.json: every importer checks config.json's values
(type, range) and the model's memory (aiayn.sizes.check_fits, as for a native folder) before it
makes a tensor; a bad value is one line naming the file and the key, exit 2, nothing written."""

import json
import shutil

import pytest
import torch

from aiayn import sizes
from tests.builders import run
from tests.convert.test_hf_bart import hf_bart_folder  # noqa: F401 (a fixture)
from tests.convert.test_hf_export import hf_gpt2_folder, opus_mt_folder  # noqa: F401 (fixtures)
from tests.convert.test_hf_t5 import hf_t5_v10_folder  # noqa: F401 (a fixture)

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def hf_bert_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bert")
    config = transformers.BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=1,
                                     num_attention_heads=2, intermediate_size=32,
                                     max_position_embeddings=32)
    torch.manual_seed(0)
    transformers.BertModel(config).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def hf_vit_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("vit")
    config = transformers.ViTConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                    intermediate_size=32, image_size=8, patch_size=4, num_labels=3)
    torch.manual_seed(0)
    transformers.ViTForImageClassification(config).save_pretrained(folder)
    return folder


# kind -> (its folder's fixture, its width key, a dropout key)
KINDS = {"hf-gpt2": ("hf_gpt2_folder", "n_embd", "resid_pdrop"),
         "hf-marian": ("opus_mt_folder", "d_model", "dropout"),
         "hf-bart": ("hf_bart_folder", "d_model", "activation_dropout"),
         "hf-t5": ("hf_t5_v10_folder", "d_model", "dropout_rate"),
         "hf-bert": ("hf_bert_folder", "hidden_size", "hidden_dropout_prob"),
         "hf-vit": ("hf_vit_folder", "hidden_size", "hidden_dropout_prob")}


def _crafted(request, kind, tmp_path, **values):
    """A copy of `kind`'s folder whose config.json has `values`."""
    folder = request.getfixturevalue(KINDS[kind][0])
    folder = folder[0] if isinstance(folder, tuple) else folder
    crafted = tmp_path / "crafted"
    shutil.copytree(folder, crafted)
    config = json.loads((crafted / "config.json").read_text())
    (crafted / "config.json").write_text(json.dumps({**config, **values}))
    return crafted


def _refused(capsys, kind, crafted, tmp_path):
    """`aiayn import KIND crafted`: exit 2, one line without a traceback, no --out folder."""
    capsys.readouterr()  # what writing the fixture's folder printed (transformers' progress)
    code, out, err = run(capsys, "import", kind, crafted, "--out", tmp_path / "out")
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert not (tmp_path / "out").exists()
    return err


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("value, shown, problem", [
    (None, "null", "must be a positive integer"), ("32", '"32"', "must be a positive integer"),
    (-32, "-32", "must be a positive integer"), (32.5, "32.5", "must be a positive integer"),
    (True, "true", "must be a positive integer"),
    (2**40, str(2**40), "must be at most 2147483647")])
def test_a_width_that_is_not_a_size_is_refused_naming_the_file_and_key(
        request, kind, value, shown, problem, tmp_path, capsys):
    key = KINDS[kind][1]
    crafted = _crafted(request, kind, tmp_path, **{key: value})
    err = _refused(capsys, kind, crafted, tmp_path)
    assert f"{crafted / 'config.json'}: {key}={shown}: {problem}" in err, err


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("value", [None, "0.1", 1.5])
def test_a_rate_that_is_not_a_probability_is_refused(request, kind, value, tmp_path, capsys):
    key = KINDS[kind][2]
    crafted = _crafted(request, kind, tmp_path, **{key: value})
    err = _refused(capsys, kind, crafted, tmp_path)
    assert f"{crafted / 'config.json'}: {key}={json.dumps(value)}: must be a number in [0, 1)" \
        in err, err


@pytest.mark.parametrize("kind", KINDS)
def test_a_width_too_large_for_the_memory_is_refused_before_allocating(request, kind, tmp_path,
                                                                      capsys):
    """d_model 2**20 (terabytes of weights): the memory check of a native folder, on the
    typed config the importer translated, before the model is made."""
    key = KINDS[kind][1]
    # T5's heads have a width of their own (d_kv): here d_model / num_heads, as in t5-small
    heads = {"d_kv": 2**20 // 4, "num_heads": 4} if kind == "hf-t5" else {}
    crafted = _crafted(request, kind, tmp_path, **{key: 2**20}, **heads)
    err = _refused(capsys, kind, crafted, tmp_path)
    assert f"{crafted / 'config.json'}: about " in err and "parameters need" in err, err
    assert sizes.SKIP_ENV in err


def test_a_gpt2_without_an_end_token_is_refused_at_import(hf_gpt2_folder, tmp_path,  # noqa: F811
                                                          capsys):
    """eos_token_id null imported "fine" and then failed in every `aiayn generate`."""
    crafted = tmp_path / "crafted"
    shutil.copytree(hf_gpt2_folder[0], crafted)
    config = json.loads((crafted / "config.json").read_text())
    (crafted / "config.json").write_text(json.dumps({**config, "eos_token_id": None}))
    err = _refused(capsys, "hf-gpt2", crafted, tmp_path)
    assert f"{crafted / 'config.json'}: eos_token_id=null: a language model needs the id of " \
        "<|endoftext|>, below vocab_size=" in err, err


def _converted(kind: str, values: dict):
    """The typed config `kind`'s converter makes of a config.json holding `values`."""
    from aiayn.convert import hf_bart, hf_bert, hf_gpt2, hf_marian, hf_vit

    if kind == "Marian":
        return hf_marian.config_from_hf({**values, "model_type": "marian"}, 10, "config.json")
    if kind == "T5":
        from aiayn.convert import hf_t5

        return hf_t5.config_from_hf({**values, "model_type": "t5"}, 10, "config.json")
    if kind == "BART":
        return hf_bart.config_from_hf({**values, "model_type": "bart"}, "config.json")
    return {"GPT-2": hf_gpt2, "BERT": hf_bert, "ViT": hf_vit}[kind].config_from_hf(values)


def test_any_config_values_give_a_typed_config_or_one_user_error():
    """Whatever config.json holds under the keys a converter reads: checked values convert to a
    typed config, others are one UserError; never a TypeError or ValueError of Python's own."""
    from pathlib import Path

    from hypothesis import given, settings
    from hypothesis import strategies as st

    from aiayn.convert import HF_VALUES, check_hf_values
    from aiayn.errors import UserError

    values = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(),
                       st.text(max_size=4), st.lists(st.integers(0, 9), max_size=2),
                       st.sampled_from([0, 1, 2, 4, 16, 0.1, "gelu", "relu"]))

    @settings(max_examples=400, deadline=None, derandomize=True)
    @given(st.sampled_from(sorted(HF_VALUES)).flatmap(lambda kind: st.tuples(
        st.just(kind), st.dictionaries(st.sampled_from(sorted(HF_VALUES[kind]) + [
            "activation_function", "hidden_act"]), values, max_size=4))))
    def check(case):
        kind, config = case
        try:
            check_hf_values(config, Path("config.json"), kind)
            _converted(kind, config)
        except UserError as e:
            assert "\n" not in str(e)

    check()
