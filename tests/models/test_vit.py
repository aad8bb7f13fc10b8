"""VisionTransformer: parity with HF ViT on copied weights, patching invariants, round trips."""

import pytest
import torch

from aiayn.config import ViTConfig, vit_preset
from aiayn.convert.hf_vit import convert_state_dict, from_hf, load_hf_folder
from aiayn.errors import ConfigError, UserError
from aiayn.folder.load import load_model
from aiayn.folder.weights import save_model
from aiayn.models import VisionTransformer
from aiayn.models.vit import PatchEmbedding, patchify, unpatchify

transformers = pytest.importorskip("transformers")


def _hf_vit(cls_name: str = "ViTModel", seed: int = 0, **overrides):
    torch.manual_seed(seed)
    cfg = dict(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
               image_size=8, patch_size=4, num_channels=3, num_labels=5)
    hf = getattr(transformers, cls_name)(transformers.ViTConfig(**{**cfg, **overrides}))
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if "layernorm" not in name:
                p.normal_(0.0, 0.3)
    return hf.eval()


def test_vit_hidden_states_match_hf():
    hf = _hf_vit()
    model = from_hf(hf)
    images = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        ref = hf(pixel_values=images).last_hidden_state
        got = model.features(images)
    assert got.shape == (2, 5, 16) and ref.abs().max() > 1.0
    assert (got - ref).abs().max() <= 1e-4


def test_vit_classifier_matches_hf():
    hf = _hf_vit("ViTForImageClassification", seed=1, num_channels=1, image_size=12, patch_size=3)
    model = from_hf(hf)
    assert (model.config.n_classes, model.config.n_patches) == (5, 16)
    images = torch.randn(3, 1, 12, 12)
    with torch.no_grad():
        ref, got = hf(pixel_values=images).logits, model(images)
    assert ref.abs().max() > 0.5
    assert (got - ref).abs().max() <= 1e-4


def test_vit_checkpoint_folder_with_file_names(tmp_path):
    """Checkpoint files use the older names (encoder.layer.i.attention.attention.query, ...)."""
    hf = _hf_vit("ViTForImageClassification", seed=2)
    hf.save_pretrained(tmp_path / "hf")
    model = load_hf_folder(tmp_path / "hf")
    images = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        assert (model(images) - hf(pixel_values=images).logits).abs().max() <= 1e-4
    with pytest.raises(UserError, match="not found"):
        load_hf_folder(tmp_path / "nothing")


def test_converter_rejects_unknown_parameters():
    hf = _hf_vit()
    state = {**hf.state_dict(), "embeddings.mask_token": torch.zeros(1, 1, 16)}
    with pytest.raises(UserError, match="mask_token"):
        convert_state_dict(state, vit_preset("tiny"))


@pytest.mark.parametrize("channels, size, patch", [(1, 8, 2), (3, 8, 4), (3, 6, 3), (2, 4, 1)])
def test_image_rebuilt_from_patches_equals_input(channels, size, patch):
    images = torch.randn(2, channels, size, size)
    patches = patchify(images, patch)
    assert patches.shape == (2, (size // patch) ** 2, channels * patch * patch)
    assert torch.equal(unpatchify(patches, patch, channels, size), images)


def test_patch_order_is_row_major_and_channel_first():
    image = torch.arange(2 * 4 * 4, dtype=torch.float32).reshape(1, 2, 4, 4)
    patches = patchify(image, 2)
    # patch 1 is the top-right 2x2 block; within it channel 0's pixels come first
    assert patches[0, 1].tolist() == [2, 3, 6, 7, 18, 19, 22, 23]
    assert patches[0, 2].tolist()[:4] == [8, 9, 12, 13]  # bottom-left block


def test_patch_embedding_equals_strided_conv():
    cfg = vit_preset("tiny", channels=3)
    embed = PatchEmbedding(cfg)
    conv = torch.nn.Conv2d(3, cfg.d_model, cfg.patch_size, stride=cfg.patch_size)
    with torch.no_grad():
        conv.weight.copy_(embed.proj.weight.reshape(conv.weight.shape))
        conv.bias.copy_(embed.proj.bias)
        images = torch.randn(2, 3, 8, 8)
        expected = conv(images).flatten(2).transpose(1, 2)  # (B, N, D)
        assert torch.allclose(embed(images), expected, atol=1e-5)


def test_patchify_rejects_indivisible_images():
    with pytest.raises(ValueError, match="not divisible"):
        patchify(torch.zeros(1, 1, 7, 8), 2)


def test_save_load_round_trip_and_shape_check(tmp_path):
    model = VisionTransformer(vit_preset("tiny")).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_()
    save_model(tmp_path / "m", "vit", model)
    loaded, meta = load_model(tmp_path / "m")
    assert meta["family"] == "vit" and isinstance(loaded, VisionTransformer)
    images = torch.rand(3, 1, 8, 8)
    with torch.no_grad():
        assert torch.equal(model(images), loaded(images))
    with pytest.raises(ValueError, match=r"\(B, 1, 8, 8\)"):
        model(torch.rand(3, 3, 8, 8))


def test_attention_weights_and_batch_independence():
    model = VisionTransformer(vit_preset("tiny")).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.5)
        images = torch.rand(4, 1, 8, 8)
        hidden, weights = model.features(images, return_attn=True)
        assert len(weights) == 2 and weights[0].shape == (4, 2, 5, 5)
        assert torch.allclose(weights[1].sum(-1), torch.ones(4, 2, 5), atol=1e-5)
        alone = torch.cat([model(images[i:i + 1]) for i in range(4)])
        assert torch.allclose(model(images), alone, atol=1e-5)


@pytest.mark.parametrize("field, value", [("patch_size", 3), ("image_size", 0), ("n_classes", -1),
                                          ("channels", 0)])
def test_config_checks(field, value):
    with pytest.raises(ConfigError, match=field):
        ViTConfig.from_dict({**vit_preset("tiny").to_dict(), field: value})


def test_presets():
    digits = vit_preset("vit-digits")
    assert (digits.image_size, digits.patch_size, digits.channels, digits.n_classes) == (8, 4, 1, 10)
    assert digits.norm_first and digits.activation == "gelu"
    base = vit_preset("vit-base")
    assert (base.d_model, base.n_layers, base.n_patches) == (768, 12, 196)
