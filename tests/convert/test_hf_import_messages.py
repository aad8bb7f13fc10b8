"""`aiayn import` of a folder it cannot read says why in one line, naming the file that holds the
cause (a Marian vocabulary of another size: which file holds how many tokens, and what
config.json says); a sharded checkpoint (model.safetensors.index.json + shards) is read, shard
by shard, as safetensors; a sharded pickle is refused naming the way on."""

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from aiayn.cli import main
from aiayn.folder import load_model

# ruff: noqa: F811 (the fixtures imported below are the tests' arguments)
from tests.convert.test_hf_bart import hf_bart_folder  # noqa: F401 (a fixture)
from tests.convert.test_hf_export import hf_gpt2_folder, opus_mt_folder  # noqa: F401 (fixtures)
from tests.convert.test_hf_t5 import hf_t5_v10_folder  # noqa: F401 (a fixture)

pytest.importorskip("transformers")


def refused(kind, folder, tmp_path, capsys) -> str:
    """`aiayn import KIND folder` exits 2 with one line, writing nothing; that line."""
    capsys.readouterr()
    assert main(["import", kind, str(folder), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert not (tmp_path / "out").exists()
    return err


def copy_with(folder, into, config=None, **files):
    """A copy of `folder`, config.json's values `config` changed, files (name -> JSON) written."""
    shutil.copytree(folder, into)
    if config:
        original = json.loads((into / "config.json").read_text())
        (into / "config.json").write_text(json.dumps({**original, **config}))
    for name, value in files.items():
        (into / name.replace("_", ".")).write_text(json.dumps(value))
    return into


def test_a_marian_vocabulary_of_another_size_names_the_file_and_config(opus_mt_folder, tmp_path,
                                                                     capsys):
    folder = opus_mt_folder[0]
    vocab = json.loads((folder / "vocab.json").read_text())
    rows = json.loads((folder / "config.json").read_text())["vocab_size"]
    assert len(vocab) == rows
    more = copy_with(folder, tmp_path / "more", vocab_json={**vocab, "extra": rows})
    err = refused("hf-marian", more, tmp_path, capsys)
    assert f"{more / 'vocab.json'}: holds {rows + 1} tokens ('extra' has id {rows}), but " \
        f"config.json says vocab_size={rows}, as the weights have it" in err, err
    fewer = copy_with(folder, tmp_path / "fewer",
                      vocab_json={t: i for t, i in vocab.items() if i < rows - 2})
    err = refused("hf-marian", fewer, tmp_path, capsys)  # <pad> (the last id) is gone too
    assert f"{fewer / 'config.json'}: pad_token_id={rows - 1}, but {fewer / 'vocab.json'} " \
        f"holds {rows - 2} tokens, none with id {rows - 1}" in err, err
    edited = copy_with(folder, tmp_path / "edited",
                       config={"vocab_size": rows + 5, "decoder_vocab_size": rows + 5})
    err = refused("hf-marian", edited, tmp_path, capsys)
    assert f"{edited / 'config.json'}: vocab_size={rows + 5}, but " \
        f"{edited / 'model.safetensors'} has {rows} embedding rows" in err, err
    target = copy_with(folder, tmp_path / "target", config={"decoder_vocab_size": rows - 4})
    err = refused("hf-marian", target, tmp_path, capsys)  # not share_encoder_decoder_embeddings
    assert f"vocab_size={rows} but decoder_vocab_size={rows - 4}: a target vocabulary of its " \
        "own" in err and "share_encoder_decoder_embeddings" not in err, err


def shard(folder, into, index_name="model.safetensors.index.json"):
    """A copy of `folder` whose model.safetensors is two shards and their index, as transformers
    writes a large checkpoint (model-00001-of-00002.safetensors, ...)."""
    shutil.copytree(folder, into)
    state = load_file(into / "model.safetensors")
    (into / "model.safetensors").unlink()
    names = sorted(state)
    weight_map = {}
    for i, part in enumerate((names[::2], names[1::2]), start=1):
        file = f"model-{i:05d}-of-00002.safetensors"
        save_file({n: state[n] for n in part}, into / file, metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(part, file))
    (into / index_name).write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return into


@pytest.mark.parametrize("kind, fixture", [("hf-t5", "hf_t5_v10_folder"),
                                           ("hf-marian", "opus_mt_folder")])
def test_a_sharded_checkpoint_imports_as_the_one_file(request, kind, fixture, tmp_path):
    folder = request.getfixturevalue(fixture)
    folder = folder[0] if isinstance(folder, tuple) else folder
    sharded = shard(folder, tmp_path / "sharded")
    assert not (sharded / "model.safetensors").exists()
    for source, out in ((folder, "one"), (sharded, "shards")):
        assert main(["import", kind, str(source), "--out", str(tmp_path / out)]) == 0
    one, _ = load_model(tmp_path / "one")
    shards, _ = load_model(tmp_path / "shards")
    assert one.state_dict().keys() == shards.state_dict().keys()
    assert all(torch.equal(a, shards.state_dict()[k]) for k, a in one.state_dict().items())


def test_a_sharded_checkpoint_that_cannot_be_read_says_why(hf_t5_v10_folder, tmp_path, capsys):
    sharded = shard(hf_t5_v10_folder, tmp_path / "sharded")
    (sharded / "model-00002-of-00002.safetensors").unlink()
    err = refused("hf-t5", sharded, tmp_path, capsys)
    assert f"{sharded / 'model-00002-of-00002.safetensors'}: not found " \
        "(model.safetensors.index.json names it as a shard)" in err, err
    index = json.loads((sharded / "model.safetensors.index.json").read_text())
    escaped = copy_with(sharded, tmp_path / "escaped", model_safetensors_index_json={
        "weight_map": dict.fromkeys(index["weight_map"], "../model.safetensors")})
    err = refused("hf-t5", escaped, tmp_path, capsys)
    assert "shard '../model.safetensors' is not a file name of the folder" in err, err
    pickled = shard(hf_t5_v10_folder, tmp_path / "pickled", "pytorch_model.bin.index.json")
    err = refused("hf-t5", pickled, tmp_path, capsys)
    assert f"{pickled / 'pytorch_model.bin.index.json'}: a sharded pickle checkpoint " \
        "(pytorch_model-*.bin); aiayn reads safetensors only" in err, err
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(hf_t5_v10_folder / "config.json", bare / "config.json")
    err = refused("hf-t5", bare, tmp_path, capsys)
    assert f"{bare / 'model.safetensors'}: not found, nor a sharded " \
        "model.safetensors.index.json" in err, err


def test_a_tokenizer_of_another_size_names_its_file(hf_t5_v10_folder, hf_bart_folder, tmp_path,
                                                    capsys):
    t5 = copy_with(hf_t5_v10_folder, tmp_path / "t5")
    state = load_file(t5 / "model.safetensors")
    save_file({**state, "shared.weight": state["shared.weight"][:40]}, t5 / "model.safetensors")
    err = refused("hf-t5", t5, tmp_path, capsys)
    assert f"{t5 / 'tokenizer.json'}: holds " in err and "but the model has 40 embedding rows " \
        "(config.json: vocab_size=" in err, err
    bart = copy_with(hf_bart_folder[0], tmp_path / "bart")
    rows = json.loads((bart / "config.json").read_text())["vocab_size"]
    state = load_file(bart / "model.safetensors")
    cut = {k: v[:rows - 8] if v.shape[:1] == (rows,) and "embed_tokens" in k or k in (
        "model.shared.weight", "lm_head.weight") else v for k, v in state.items()}
    save_file(cut, bart / "model.safetensors")
    copy_with(bart, tmp_path / "bart2", config={"vocab_size": rows - 8})
    err = refused("hf-bart", tmp_path / "bart2", tmp_path, capsys)
    assert f"{tmp_path / 'bart2' / 'tokenizer.json'}: holds" in err and \
        f"but config.json says vocab_size={rows - 8}" in err, err


def test_a_gpt2_the_importer_cannot_read_names_the_file(hf_gpt2_folder, tmp_path, capsys):
    crossed = copy_with(hf_gpt2_folder[0], tmp_path / "crossed", config={"add_cross_attention": True})
    err = refused("hf-gpt2", crossed, tmp_path, capsys)
    assert f"{crossed / 'config.json'}: add_cross_attention=True is not supported" in err, err
    missing = copy_with(hf_gpt2_folder[0], tmp_path / "missing")
    state = load_file(missing / "model.safetensors")
    save_file({k: v for k, v in state.items() if not k.endswith("ln_f.weight")},
              missing / "model.safetensors")
    err = refused("hf-gpt2", missing, tmp_path, capsys)
    assert f"{missing / 'model.safetensors'}: GPT-2 checkpoint lacks parameter" in err, err
