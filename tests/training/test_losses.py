import math

import pytest
import torch
import torch.nn.functional as F

from aiayn.config import TrainConfig
from aiayn.training import losses
from aiayn.training.losses import label_smoothed_nll, smoothed_cross_entropy
from aiayn.training.schedule import learning_rate, make_optimizer, noam_lr


def test_label_smoothed_loss_matches_hand_computation_and_ignores_padding():
    # One sentence of two real tokens and one pad, vocabulary of 3.
    logits = torch.tensor([[[2.0, 0.0, 0.0], [0.0, 1.0, 0.0], [5.0, -3.0, 9.0]]])
    pad = 2  # id 2 is padding here, so that id 0 is an ordinary target token
    target = torch.tensor([[0, 1, 2]])  # the last position is padding
    eps = 0.1
    loss, nll, n = label_smoothed_nll(logits, target, eps=eps, pad_id=pad)

    def logsm(row):
        z = math.log(sum(math.exp(x) for x in row))
        return [x - z for x in row]

    lp1, lp2 = logsm([2.0, 0.0, 0.0]), logsm([0.0, 1.0, 0.0])
    # (1 - eps) * -log p(y) + eps * mean_v -log p(v), summed over the two real tokens.
    expected = sum((1 - eps) * -lp[y] + eps * -sum(lp) / 3 for lp, y in ((lp1, 0), (lp2, 1)))
    assert n == 2
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    assert nll.item() == pytest.approx(-lp1[0] - lp2[1], rel=1e-6)
    # Same as torch's own label smoothing with ignore_index.
    ref = F.cross_entropy(logits.view(-1, 3), target.view(-1), ignore_index=pad,
                          label_smoothing=eps, reduction="sum")
    assert loss.item() == pytest.approx(ref.item(), rel=1e-6)


def test_loss_gradient_skips_padding_positions():
    logits = torch.randn(2, 4, 7, requires_grad=True)
    target = torch.tensor([[3, 4, 0, 0], [5, 6, 2, 0]])
    loss, _, n = label_smoothed_nll(logits, target, eps=0.1, pad_id=0)
    loss.backward()
    assert n == 5
    assert torch.all(logits.grad[target == 0] == 0)
    assert torch.all(logits.grad[target != 0].abs().sum(-1) > 0)


def _reference_rows(logits, target, eps):
    """The autograd graph the fused loss replaces: log_softmax -> gather -> mean."""
    logp = F.log_softmax(logits, dim=-1)
    nll = -logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    return (1 - eps) * nll - eps * logp.mean(-1), nll


@pytest.mark.parametrize("eps,chunk", [(0.0, 1 << 20), (0.1, 1 << 20), (0.3, 1 << 20), (0.1, 120)])
def test_fused_smoothed_loss_equals_the_log_softmax_graph_in_value_and_gradient(eps, chunk,
                                                                                 monkeypatch):
    monkeypatch.setattr(losses, "CHUNK_ELEMENTS", chunk)  # 120: blocks of 2 rows, the last of 1
    torch.manual_seed(0)
    base = torch.randn(3, 5, 50, dtype=torch.float64) * 4  # (B, T, V), large logits included
    target = torch.randint(50, (3, 5))
    weights = torch.rand(3, 5, dtype=torch.float64)  # a gradient that differs per row
    fused, ref = base.clone().requires_grad_(), base.clone().requires_grad_()
    loss, nll, argmax = smoothed_cross_entropy(fused, target, eps)
    ref_loss, ref_nll = _reference_rows(ref, target, eps)
    (loss.double() * weights).sum().backward()
    (ref_loss * weights).sum().backward()
    assert loss.dtype == torch.float32 and loss.shape == target.shape  # fp32, as the old loss
    torch.testing.assert_close(loss.double(), ref_loss.detach(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(nll.double(), ref_nll.detach(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(fused.grad, ref.grad, rtol=1e-5, atol=1e-6)
    assert torch.equal(argmax, base.argmax(-1))
    assert not nll.requires_grad and not argmax.requires_grad


def test_fused_smoothed_loss_takes_bf16_logits_and_returns_fp32_gradients_of_their_dtype():
    torch.manual_seed(1)
    logits = (torch.randn(6, 40) * 3).bfloat16().requires_grad_()
    target = torch.randint(40, (6,))
    loss, _, _ = smoothed_cross_entropy(logits, target, 0.1)
    ref, _ = _reference_rows(logits.detach().float().requires_grad_(), target, 0.1)
    torch.testing.assert_close(loss, ref, rtol=1e-5, atol=1e-5)
    loss.sum().backward()
    assert logits.grad.dtype == torch.bfloat16 and logits.grad.abs().sum() > 0


@pytest.mark.parametrize("step", [1, 100, 4000, 16000, 100000])
def test_noam_schedule_gives_the_paper_values(step):
    # §5.3: lrate = d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5), d_model 512, warmup 4000.
    expected = 512 ** -0.5 * min(step ** -0.5, step * 4000 ** -1.5)
    assert noam_lr(step, 512, 4000) == pytest.approx(expected, rel=1e-12)
    assert learning_rate(step, TrainConfig(), 512) == pytest.approx(expected, rel=1e-12)


def test_noam_schedule_landmarks():
    assert noam_lr(4000, 512, 4000) == pytest.approx(6.987712429686843e-4)  # the peak
    assert noam_lr(1, 512, 4000) == pytest.approx(512 ** -0.5 * 4000 ** -1.5)
    assert noam_lr(16000, 512, 4000) == pytest.approx(noam_lr(4000, 512, 4000) / 2)
    rising = [noam_lr(s, 512, 4000) for s in range(1, 4001, 500)]
    assert rising == sorted(rising)


def test_peak_lr_rescales_the_noam_curve_and_other_schedules():
    cfg = TrainConfig(lr=1e-3, warmup_steps=100)
    assert learning_rate(100, cfg, 256) == pytest.approx(1e-3)
    assert learning_rate(400, cfg, 256) == pytest.approx(0.5e-3)
    assert learning_rate(50, cfg, 256) == pytest.approx(0.5e-3)
    assert learning_rate(100, cfg.replace(lr_scale=2.0), 256) == pytest.approx(2e-3)
    const = TrainConfig(lr_schedule="constant", lr=1e-3, warmup_steps=10)
    assert [learning_rate(s, const, 1) for s in (5, 10, 1000)] == pytest.approx([5e-4, 1e-3, 1e-3])
    cos = TrainConfig(lr_schedule="cosine", lr=1e-3, warmup_steps=10, max_steps=110)
    assert [learning_rate(s, cos, 1) for s in (10, 60, 110)] == pytest.approx([1e-3, 5e-4, 0.0])


def test_optimizer_is_the_papers_adam():
    opt = make_optimizer(torch.nn.Linear(2, 2), TrainConfig())
    assert isinstance(opt, torch.optim.Adam)
    group = opt.param_groups[0]
    assert group["betas"] == (0.9, 0.98) and group["eps"] == 1e-9


@pytest.mark.parametrize("multiple", [8, 16])
def test_padding_a_batch_to_a_multiple_changes_no_loss_nor_gradient(multiple):
    """train.pad_to_multiple: a collated batch (the non-pad rows projected, Batch.tgt_index) and
    the same batch padded (every row projected, the padding masked) give the same loss, sums,
    units and gradients. The model in float64, so that the two only differ by the order of the
    loss's fp32 sums."""
    from aiayn import Transformer, preset
    from aiayn.data.batching import collate
    from aiayn.tasks.seq2seq_loss import seq2seq_loss

    batch = collate([([5, 6, 7, 8, 9], [10, 11]), ([12, 13], [14, 15, 16, 17, 18, 19]),
                     ([20], [21])])
    padded = batch.padded(multiple)
    assert padded.src.shape == (3, multiple) and padded.tgt_out.shape == (3, multiple)
    assert padded.tgt_index is None and padded.tgt_count == batch.tgt_count == 12

    def run(b):
        torch.manual_seed(1)
        model = Transformer(preset("tiny", vocab_size=24, d_model=16, d_ff=32)).double()
        loss, n, sums = seq2seq_loss(0.1)(model, b)
        loss.backward()
        return float(loss.detach()), int(n), {k: float(v) for k, v in sums.items()}, \
            {k: p.grad for k, p in model.named_parameters()}

    (loss, n, sums, grads), (loss_p, n_p, sums_p, grads_p) = run(batch), run(padded)
    assert n == n_p == 12 and sums["accuracy"] == sums_p["accuracy"]
    assert loss_p == pytest.approx(loss, rel=1e-6) and sums_p["nll"] == pytest.approx(sums["nll"], rel=1e-6)
    for name, g in grads.items():
        torch.testing.assert_close(grads_p[name], g, rtol=1e-5, atol=1e-9, msg=name)


def _rdrop_setup(dropout):
    from aiayn import Transformer, preset
    from aiayn.data.batching import collate

    batch = collate([([5, 6, 7, 8, 9], [10, 11]), ([12, 13], [14, 15, 16, 17, 18, 19]),
                     ([20], [21])])
    torch.manual_seed(1)
    model = Transformer(preset("tiny", vocab_size=24, d_model=16, d_ff=32,
                               dropout=dropout)).double()
    return model, batch


@pytest.mark.parametrize("padded", [False, True])
def test_rdrop_is_the_mean_of_two_dropout_reads_plus_their_symmetric_kl(padded):
    """train.rdrop (R-Drop, Liang et al. 2021): in training mode the batch is read twice under
    two dropout masks; the loss is the mean of the two label-smoothed losses plus alpha / 4 x
    (KL(P1||P2) + KL(P2||P1)), per target token, with torch's kl_div as the reference; the NLL is
    the two reads' mean, the accuracy the first read's, the units counted once."""
    from aiayn.tasks.seq2seq_loss import seq2seq_loss

    model, batch = _rdrop_setup(0.3)
    batch = batch.padded(8) if padded else batch
    model.train()
    torch.manual_seed(7)
    loss, n, sums = seq2seq_loss(0.1, rdrop=5.0)(model, batch)
    loss = loss.detach()
    torch.manual_seed(7)  # the same two masks, read one at a time
    keep = batch.tgt_out.reshape(-1) != batch.pad_id
    target = batch.tgt_out.reshape(-1)[keep]
    with torch.no_grad():
        reads = [model(batch.src, batch.tgt_in).flatten(0, 1)[keep].float() for _ in range(2)]
    assert not torch.equal(reads[0], reads[1])  # dropout made them differ
    ce = [F.cross_entropy(r, target, label_smoothing=0.1, reduction="sum") for r in reads]
    nll = [F.cross_entropy(r, target, reduction="sum") for r in reads]
    lp = [r.log_softmax(-1) for r in reads]
    kl = (F.kl_div(lp[1], lp[0], log_target=True, reduction="sum")
          + F.kl_div(lp[0], lp[1], log_target=True, reduction="sum"))
    assert int(n) == 12
    assert float(loss) == pytest.approx(float((ce[0] + ce[1]) / 2 + 5.0 / 4 * kl), rel=1e-5)
    assert float(sums["nll"]) == pytest.approx(float((nll[0] + nll[1]) / 2), rel=1e-5)
    assert int(sums["accuracy"]) == int((reads[0].argmax(-1) == target).sum())


def test_rdrop_reads_once_in_evaluation_and_changes_nothing_without_dropout():
    """Validation (eval mode) reads the batch once: the loss is the plain one. In training with
    dropout 0 the two reads agree, their KL is 0, and loss and gradients are the plain loss's."""
    from aiayn.tasks.seq2seq_loss import seq2seq_loss

    model, batch = _rdrop_setup(0.3)
    model.eval()
    calls = []
    hook = model.register_forward_hook(lambda *_: calls.append(1))
    with torch.no_grad():
        plain = seq2seq_loss(0.1)(model, batch)[0]
        rdrop = seq2seq_loss(0.1, rdrop=5.0)(model, batch)[0]
    hook.remove()
    assert len(calls) == 2 and float(rdrop) == float(plain)

    model, batch = _rdrop_setup(0.0)
    model.train()
    grads = []
    for alpha in (0.0, 5.0):
        model.zero_grad()
        loss = seq2seq_loss(0.1, rdrop=alpha)(model, batch)[0]
        loss.backward()
        grads.append((float(loss.detach()), [p.grad.clone() for p in model.parameters()]))
    assert grads[1][0] == pytest.approx(grads[0][0], rel=1e-9)
    for g, g0 in zip(grads[1][1], grads[0][1], strict=True):
        torch.testing.assert_close(g, g0, rtol=1e-6, atol=1e-12)


def test_rdrop_must_be_non_negative_and_is_for_seq2seq_only():
    from aiayn.config.experiment import load_experiment
    from aiayn.errors import UserError

    with pytest.raises(Exception, match="rdrop=-1"):
        TrainConfig(rdrop=-1.0)
    assert load_experiment("demo", ["train.rdrop=5"], task="seq2seq").train.rdrop == 5.0
    with pytest.raises(UserError, match="train.rdrop=5.0: R-Drop trains seq2seq models only"):
        load_experiment("lm", ["train.rdrop=5"], task="language_model")
