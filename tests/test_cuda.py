"""The CUDA paths, on a GPU: fused attention kernels, the model and search against the CPU with
the same weights, bf16 autocast training, resume and translation from a folder trained there.

These run only where torch sees a CUDA device (CI has none: pytest -ra lists them as skipped,
with the reason). `scripts/gpu_check.sh` runs them on a GPU, with the rest of the suite and the
GPU benchmarks; benchmarks/RESULTS.md ("On a GPU") records the last such run.
"""

import json

import pytest
import torch

from aiayn import Transformer, preset
from aiayn.cli import main
from aiayn.generation.search import beam_search, greedy_search
from aiayn.nn import MultiHeadAttention

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

PAD, BOS, EOS = 0, 1, 2
IDS = dict(bos_id=BOS, eos_id=EOS, pad_id=PAD)


def _kernels(fn) -> list[str]:
    """Names of the CUDA kernels `fn` launches."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return [e.key for e in prof.key_averages() if e.device_type.name == "CUDA"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("case", ["causal", "padding"])
def test_fused_attention_equals_the_reference_path(dtype, case):
    """The fast path (PyTorch's fused SDPA kernels on a GPU) against the explicit softmax path of
    the same module (return_attn=True), forward and backward."""
    torch.manual_seed(0)
    mha = MultiHeadAttention(256, 4).cuda()
    x = torch.randn(6, 50, 256, device="cuda")
    kw = dict(is_causal=True) if case == "causal" else {}
    if case == "padding":
        lengths = torch.tensor([50, 41, 30, 17, 5, 1], device="cuda")
        kw["mask"] = (torch.arange(50, device="cuda")[None, :] < lengths[:, None])[:, None, None, :]
    grads = []
    for reference in (False, True):
        xi = x.clone().requires_grad_()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=dtype == torch.bfloat16):
            out = mha(xi, xi, xi, return_attn=reference, **kw)
            out = out[0] if reference else out
        out.float().square().mean().backward()
        grads.append((out.float().detach(), xi.grad))
    tol = 1e-5 if dtype == torch.float32 else 3e-2
    for fast, ref in zip(grads[0], grads[1], strict=True):
        assert (fast - ref).abs().max() <= tol * ref.abs().max(), (fast - ref).abs().max()


def test_causal_self_attention_in_bf16_runs_the_flash_kernel():
    """§3.2.3's masked self-attention without a materialised mask reaches FlashAttention on a GPU
    (the speed the GPU path is for); a padding mask takes another fused kernel, not the math one."""
    torch.manual_seed(0)
    mha = MultiHeadAttention(256, 4).cuda()
    x = torch.randn(8, 128, 256, device="cuda")
    mask = torch.ones(8, 1, 1, 128, dtype=torch.bool, device="cuda")
    mask[0, ..., 100:] = False
    with torch.autocast("cuda", dtype=torch.bfloat16), torch.no_grad():
        causal = _kernels(lambda: mha(x, x, x, is_causal=True))
        padded = _kernels(lambda: mha(x, x, x, mask=mask))
    print("causal:", causal, "\npadded:", padded)
    assert any("flash" in k.lower() for k in causal), causal
    assert any("fmha" in k.lower() or "efficient" in k.lower() or "flash" in k.lower()
               for k in padded), padded


# The 2017 Transformer and its two descendants' options: T5's relative position bias (a float
# bias added to the fused attention's scores) and BART's post-norm with learned offset positions.
PRESETS = ["tiny", "t5-tiny", "bart-tiny"]


def _model_and_sources(name: str = "tiny"):
    torch.manual_seed(0)
    model = Transformer(preset(name, vocab_size=40)).eval()
    src = torch.randint(4, 40, (6, 9))
    src[1, 5:] = PAD
    src[3, 2:] = PAD
    return model, src


@pytest.mark.parametrize("name", PRESETS)
def test_model_on_the_gpu_equals_the_cpu_with_the_same_weights(name):
    """Forward and gradients in fp32, padded batch, dropout off: CPU and GPU agree."""
    model, src = _model_and_sources(name)
    tgt = torch.randint(4, 40, (6, 7))
    gpu = Transformer(model.config).cuda().eval()
    gpu.load_state_dict(model.state_dict())
    out = {}
    for name, m, dev in (("cpu", model, "cpu"), ("cuda", gpu, "cuda")):
        m.zero_grad()
        logits = m(src.to(dev), tgt.to(dev))
        logits.log_softmax(-1).mean().backward()
        out[name] = (logits.detach().cpu(), [p.grad.cpu() for p in m.parameters()])
    assert torch.allclose(out["cpu"][0], out["cuda"][0], atol=1e-4)
    for a, b in zip(out["cpu"][1], out["cuda"][1], strict=True):
        assert torch.allclose(a, b, atol=1e-5)


@pytest.mark.parametrize("name", PRESETS)
def test_search_on_the_gpu_keeps_its_invariants_and_equals_the_cpu(name):
    """beam 1 == greedy, batch == one by one, GPU == CPU (tokens) for greedy and beam 4."""
    model, src = _model_and_sources(name)
    gpu = Transformer(model.config).cuda().eval()
    gpu.load_state_dict(model.state_dict())
    g_src = src.cuda()
    greedy = greedy_search(gpu, g_src, max_extra=8, **IDS)
    assert beam_search(gpu, g_src, beam=1, max_extra=8, **IDS) == greedy
    assert greedy == greedy_search(model, src, max_extra=8, **IDS)
    beam = beam_search(gpu, g_src, beam=4, max_extra=8, **IDS)
    assert beam == beam_search(model, src, beam=4, max_extra=8, **IDS)
    alone = [beam_search(gpu, row[row != PAD][None], beam=4, max_extra=8, **IDS)[0] for row in g_src]
    assert beam == alone


@pytest.mark.parametrize("name", PRESETS)
def test_kv_cache_equals_recompute_on_the_gpu(name):
    """Incremental decoding with the cache gives the logits of decoding the whole prefix again."""
    model, src = _model_and_sources(name)
    model = model.cuda()
    src = src.cuda()
    src_mask = (src != PAD)[:, None, None, :]
    tgt = torch.randint(4, 40, (6, 8), device="cuda")
    with torch.no_grad():
        memory = model.encode(src, src_mask)
        full = model.decode(tgt, memory, src_mask)
        cache = model.new_cache()
        steps = [model.decode(tgt[:, i:i + 1], memory, src_mask, cache) for i in range(8)]
    assert torch.allclose(torch.cat(steps, 1), full, atol=1e-5)


def _train(tmp_path, capsys, name, *argv, **train):
    from tests.builders import write_config

    (tmp_path / name).mkdir()
    config = write_config(tmp_path / name, device="cuda", eval_every=0, log_every=10, **train)
    assert main(["train", str(config), *argv]) == 0, capsys.readouterr().err
    rows = [json.loads(line) for line in (tmp_path / name / "model" / "metrics.jsonl")
            .read_text().splitlines()]
    return config, tmp_path / name / "model", [r["loss"] for r in rows if "loss" in r]


def test_training_on_the_gpu_bf16_learns_as_fp32_and_resumes_and_translates(tmp_path, capsys):
    """`aiayn train` on cuda: bf16 autocast's loss follows fp32's; a run stopped at step 30 and
    resumed ends where the uninterrupted run ends (GPU kernels are not bit-deterministic, so within
    a tolerance); the folder translates on the GPU as on the CPU."""
    _, fp32, loss32 = _train(tmp_path, capsys, "fp32", max_steps=60, precision="fp32",
                             save_every=30)
    _, bf16, loss16 = _train(tmp_path, capsys, "bf16", max_steps=60, precision="bf16",
                             save_every=0)
    assert loss32[-1] < 0.8 * loss32[0] and loss16[-1] < 0.8 * loss16[0]
    assert abs(loss16[-1] - loss32[-1]) < 0.05 * loss32[-1]
    meta = json.loads((bf16 / "config.json").read_text())
    assert meta["experiment"]["train"]["precision"] == "bf16"

    config, half, _ = _train(tmp_path, capsys, "half", max_steps=30, precision="fp32",
                             save_every=30)
    assert main(["train", str(config), "--resume", "train.max_steps=60"]) == 0, \
        capsys.readouterr().err
    from safetensors.torch import load_file

    a, b = load_file(fp32 / "model.safetensors"), load_file(half / "model.safetensors")
    assert a.keys() == b.keys()
    for k in a:
        assert torch.allclose(a[k], b[k], atol=2e-3), (k, (a[k] - b[k]).abs().max())

    from aiayn import load

    sentences = (tmp_path / "fp32" / "valid.src").read_text().splitlines()
    on_gpu = load(fp32, device="cuda").translate(sentences, beam=4)
    on_cpu = load(fp32, device="cpu").translate(sentences, beam=4)
    assert on_gpu == on_cpu


def test_validation_between_the_trainers_gpu_updates_reads_the_current_weights():
    """The trainer's GPU optimizer is fused Adam, whose update leaves the weights' version
    counters as they were: no_grad forwards between its steps (validation) must still read the
    weights as they are now (they once read a q/k/v copy kept from the first validation)."""
    from aiayn.config import TrainConfig
    from aiayn.training.schedule import make_optimizer

    model, src = _model_and_sources()
    model, src = model.cuda().train(), src.cuda()
    tgt = torch.randint(4, 40, (6, 7), device="cuda")
    opt = make_optimizer(model, TrainConfig(), "cuda")
    assert opt.defaults["fused"] is True
    for group in opt.param_groups:  # the trainer sets it per step
        group["lr"] = 1e-2
    first = None
    for _ in range(3):
        with torch.no_grad():
            seen = model(src, tgt)
        now = model(src, tgt)
        torch.testing.assert_close(seen, now.detach(), rtol=1e-5, atol=1e-5)
        first = seen if first is None else first
        now.logsumexp(-1).mean().backward()
        opt.step()
        opt.zero_grad()
    assert (seen - first).abs().max() > 1e-2  # the premise: the weights moved


def _sync_free_run(tmp_path, settings: dict, dropout: float = 0.1):
    """A tiny model's 8 updates whose steady ones (3 to 7: not the first two, whose allocations,
    cuBLAS set-up and compilation may wait; not the logged eighth, which reads the sums) run
    under torch.cuda.set_sync_debug_mode("error"). The task's own loss (seq2seq_loss)."""
    from aiayn.config import TrainConfig
    from aiayn.data.batching import collate
    from aiayn.tasks.seq2seq_loss import seq2seq_loss
    from aiayn.training.stream import BatchStream
    from aiayn.training.trainer import Trainer

    g = torch.Generator().manual_seed(0)
    seqs = [torch.randint(4, 40, (int(k),), generator=g).tolist()
            for k in torch.randint(3, 9, (64,), generator=g)]
    stream = BatchStream(lambda epoch: [list(range(i, i + 8)) for i in range(0, 64, 8)],
                         lambda idx: collate([(seqs[i], seqs[i]) for i in idx], PAD))

    torch.manual_seed(0)
    model = Transformer(preset("tiny", vocab_size=40, d_model=32, d_ff=64, dropout=dropout))
    cfg = TrainConfig(**{**dict(device="cuda", precision="bf16", max_steps=8, log_every=8,
                                accum_steps=2, clip_norm=1.0, lr=1e-3, warmup_steps=2,
                                eval_every=0, save_every=0, tensorboard=False, progress=False),
                         **settings})
    trainer = Trainer(model, cfg, stream, seq2seq_loss(0.1), tmp_path, family="transformer")
    update, strict = trainer._update, []

    def checked():
        steady = 2 <= trainer.step < 7
        strict.append(steady)
        torch.cuda.set_sync_debug_mode("error" if steady else "default")
        try:
            return update()
        finally:
            torch.cuda.set_sync_debug_mode("default")

    trainer._update = checked
    result = trainer.fit()
    assert strict.count(True) == 5 and result.step == 8
    assert result.metrics["loss"] > 0 and result.metrics["grad_norm"] > 0  # read at log time
    return result


# Compiled: lengths padded to 16, so every batch (sources and targets of 3 to 8 tokens) has one
# shape, compiled and (CUDA graphs) recorded in the first two updates.
COMPILED = {"compile": True, "pad_to_multiple": 16}


@pytest.mark.parametrize("settings", [{}, {"pad_to_multiple": 8}, COMPILED,
                                      {**COMPILED, "cuda_graphs": True}],
                         ids=["eager", "padded", "compiled", "cuda-graphs"])
def test_the_trainers_steady_updates_make_no_host_synchronisation(tmp_path, settings):
    """Issue 38: the GPU runs ahead of the host: any wait for the GPU inside a steady update
    (.item(), float(loss), int(n), a boolean mask's nonzero, a blocking copy) raises. bf16,
    gradient accumulation and clipping on, the running weight average and the batch thread as
    by default; eager (the loss on the non-pad rows the host located), on padded batches (the
    padding masked), compiled, and replayed as CUDA graphs."""
    _sync_free_run(tmp_path, settings)


def test_cuda_graphs_train_as_the_eager_update(tmp_path):
    """train.cuda_graphs: the same losses as the eager run (fp32, no dropout: the compiled
    kernels draw other masks; their order of sums differs)."""
    eager = _sync_free_run(tmp_path / "eager", {"precision": "fp32", "pad_to_multiple": 16}, 0.0)
    graphs = _sync_free_run(tmp_path / "graphs", {**COMPILED, "cuda_graphs": True,
                                                  "precision": "fp32"}, 0.0)
    assert graphs.metrics["loss"] == pytest.approx(eager.metrics["loss"], rel=1e-3)
