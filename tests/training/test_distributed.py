"""Data-parallel training under torchrun (gloo, 2 processes on the CPU): the same model as one
process summing the same batches, rank 0 alone writing, stops taken together, exact resume."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from aiayn.cli import main
from tests.builders import write_config

pytestmark = pytest.mark.slow

# fp32: equality up to float order is a property of fp32 (the auto precision is bf16 on CPUs that
# compute it, and bf16 rounds each process's partial sums differently)
# train.device=cpu: these check gloo on the CPU, also on a machine with a GPU.
EXACT = ["model.dropout=0", "train.deterministic=true", "train.precision=fp32", "train.device=cpu"]


def torchrun(*argv, n=2, wait=True):
    """`torchrun --standalone --nproc_per_node=n -m aiayn ARGV` (one thread per process)."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={n}",
           "-m", "aiayn", *map(str, argv)]
    # PYTHONFAULTHANDLER: a process that crashes (a signal, not an exception) prints its stack
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "PYTHONFAULTHANDLER": "1"}
    if not wait:
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                                start_new_session=True)
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)


def weights(folder):
    return load_file(str(folder / "model.safetensors"))


def max_difference(a, b):
    return max(float((a[k] - b[k]).abs().max()) for k in a)


def test_two_processes_train_the_model_one_process_with_accum_2_trains(tmp_path):
    """Translation: 2 processes x 1 batch per update == 1 process x accum_steps 2, parameters
    within 1e-5; and the comparison could fail: 1 process x 1 batch trains another model."""
    config = write_config(tmp_path, max_steps=6, save_every=3)
    two = torchrun("train", config, *EXACT, "--out", tmp_path / "two")
    assert two.returncode == 0, two.stderr[-2000:]
    assert main(["train", str(config), *EXACT, "train.accum_steps=2", "--out",
                 str(tmp_path / "one")]) == 0
    assert main(["train", str(config), *EXACT, "--out", str(tmp_path / "half")]) == 0
    a, b = weights(tmp_path / "two"), weights(tmp_path / "one")
    assert max_difference(a, b) <= 1e-5
    assert max_difference(a, weights(tmp_path / "half")) > 1e-3
    # Rank 0 alone wrote and printed: one metrics row per logged step, one closing line.
    rows = [json.loads(line) for line in (tmp_path / "two" / "metrics.jsonl").read_text().splitlines()]
    train_steps = [r["step"] for r in rows if "loss" in r]
    assert train_steps == sorted(set(train_steps)) == [5]
    assert two.stdout.count("trained 6 steps") == 1
    assert two.stderr.count("data: ") == 1 and two.stderr.count("step 6 | valid loss") == 1
    state = torch.load(tmp_path / "two" / "train_state.pt", weights_only=True)
    assert state["world"] == {"size": 2, "accum_steps": 1} and len(state["rng_ranks"]) == 1
    # Each update counted the tokens of both processes.
    one_state = torch.load(tmp_path / "one" / "train_state.pt", weights_only=True)
    assert state["tokens"] == one_state["tokens"]


def test_language_model_two_processes_with_accum_2_equal_one_with_accum_4(tmp_path):
    text = tmp_path / "fox.txt"
    text.write_text("the quick brown fox jumps over the lazy dog\n" * 300, encoding="utf-8")
    common = ["lm", "train", "tiny", "model.d_model=32", "model.d_ff=64", "data.tokenizer=char",
              "data.vocab_size=64", "train.max_tokens=512", "train.lr=3e-3", "train.warmup_steps=4",
              "train.max_steps=5", "train.tensorboard=false", "train.progress=false",
              "train.eval_every=0", "train.threads=1", *EXACT, "--text", str(text)]
    two = torchrun(*common, "train.accum_steps=2", "--out", tmp_path / "two")
    assert two.returncode == 0, two.stderr[-2000:]
    assert main([*common, "train.accum_steps=4", "--out", str(tmp_path / "one")]) == 0
    assert main([*common, "train.accum_steps=2", "--out", str(tmp_path / "half")]) == 0
    a = weights(tmp_path / "two")
    # Summed in another order (two partial sums, then across processes): Adam's per-parameter
    # normalisation magnifies last-bit differences of near-zero gradients, hence 1e-4 here.
    assert max_difference(a, weights(tmp_path / "one")) <= 1e-4
    assert max_difference(a, weights(tmp_path / "half")) > 1e-3


def test_classifier_with_parameters_the_loss_never_uses_trains_under_torchrun(tmp_path):
    """Fine-tuning leaves the masked-LM head without gradients: DDP is told so (found on the
    first batch), and the run matches one process summing the same batches."""
    from tests.cli.test_encoder import _examples, _write_tsv

    train = _write_tsv(tmp_path / "train.tsv", _examples(200, 0))
    common = ["classify", "train", "tiny", "model.d_model=32", "model.d_ff=64",
              "data.vocab_size=120", "data.mlm_steps=4", "data.batch_size=16", "train.max_steps=4",
              "train.lr=3e-3", "train.warmup_steps=2", "train.tensorboard=false",
              "train.progress=false", "train.eval_every=0", "train.threads=1", *EXACT,
              "--train", str(train)]
    two = torchrun(*common, "--out", tmp_path / "two")
    assert two.returncode == 0, two.stderr[-2000:]
    assert main([*common, "train.accum_steps=2", "--out", str(tmp_path / "one")]) == 0
    assert max_difference(weights(tmp_path / "two"), weights(tmp_path / "one")) <= 1e-5


def test_sigkill_of_the_whole_job_then_resume_equals_an_uninterrupted_run(tmp_path):
    config = write_config(tmp_path, max_steps=100_000, save_every=3, log_every=1)
    out = tmp_path / "model"
    proc = torchrun("train", config, *EXACT, "--out", out, wait=False)
    deadline = time.monotonic() + 120
    while not (out / "train_state.pt").exists():
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()[1][-2000:]
        time.sleep(0.1)
    time.sleep(0.5)
    workers = [int(pid) for pid in Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
               .read_text().split()]
    for pid in [proc.pid, *workers]:  # torchrun and both workers at once
        os.kill(pid, signal.SIGKILL)
    proc.communicate()
    saved = torch.load(out / "train_state.pt", weights_only=True)["step"]
    total = saved + 3
    resumed = torchrun("train", config, *EXACT, f"train.max_steps={total}", "--out", out, "--resume")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    straight = torchrun("train", config, *EXACT, f"train.max_steps={total}", "--out",
                        tmp_path / "straight")
    assert straight.returncode == 0, straight.stderr[-2000:]
    a, b = weights(out), weights(tmp_path / "straight")
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_sigterm_stops_every_process_after_the_same_update_and_saves(tmp_path):
    config = write_config(tmp_path, max_steps=100_000, save_every=0, log_every=1)
    out = tmp_path / "model"
    proc = torchrun("train", config, *EXACT, "--out", out, wait=False)
    deadline = time.monotonic() + 120
    while not (out / "metrics.jsonl").exists() or \
            len((out / "metrics.jsonl").read_text().splitlines()) < 3:
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()[1][-2000:]
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)  # to torchrun, which passes it on to the workers
    _, err = proc.communicate(timeout=120)
    err = err.decode()
    state = torch.load(out / "train_state.pt", weights_only=True)
    assert state["step"] >= 3
    assert f"aiayn: stopped by SIGTERM at step {state['step']};" in err
    assert "Traceback" not in err.split("aiayn: stopped by SIGTERM")[0]
    resumed = torchrun("train", config, *EXACT, f"train.max_steps={state['step'] + 2}",
                       "--out", out, "--resume")
    assert resumed.returncode == 0, resumed.stderr[-2000:]


def test_a_saturated_validation_stops_every_process_after_the_same_update(tmp_path):
    """Rank 0 alone evaluates; its decision (train.stop_when met twice in a row, at the
    evaluations of steps 2 and 4) reaches every process before the next update."""
    config = write_config(tmp_path, max_steps=1000, eval_every=2, save_every=0)
    two = torchrun("train", config, *EXACT, "train.stop_when=valid_loss<=1000", "--out",
                   tmp_path / "model")
    assert two.returncode == 0, two.stderr[-2000:]
    assert two.stdout.count("trained 4 steps") == 1 and "(stopped by saturated)" in two.stdout
    assert two.stderr.count("stopped at step 4: valid_loss ") == 1
    state = torch.load(tmp_path / "model" / "train_state.pt", weights_only=True)
    assert state["step"] == 4 and state["world"]["size"] == 2


def test_resume_with_another_number_of_processes_keeps_the_batches_per_update(tmp_path, capsys):
    config = write_config(tmp_path, max_steps=4, save_every=2)
    out = tmp_path / "model"
    two = torchrun("train", config, *EXACT, "--out", out)
    assert two.returncode == 0, two.stderr[-3000:]
    code = main(["train", str(config), *EXACT, "train.max_steps=6", "--out", str(out), "--resume"])
    assert code == 2
    err = capsys.readouterr().err.splitlines()[-1]
    assert err.startswith("aiayn: error: --resume: ") and "summed 2 batches per update (2 process(es) x accum_steps 1)" \
        in err and "use train.accum_steps=2" in err
    assert main(["train", str(config), *EXACT, "train.max_steps=6", "train.accum_steps=2",
                 "--out", str(out), "--resume"]) == 0
    assert torch.load(out / "train_state.pt", weights_only=True)["step"] == 6


def test_commands_other_than_training_refuse_torchrun_once(monkeypatch, capsys):
    """Under torchrun every process would translate (or generate, ...) everything and print it
    again: the command is refused, and only rank 0 says so."""
    from aiayn.cli import main

    monkeypatch.setenv("WORLD_SIZE", "2")
    for rank, said in (("0", True), ("1", False)):
        monkeypatch.setenv("RANK", rank)
        assert main(["translate", "--model", "nowhere", "a"]) == 2
        err = capsys.readouterr().err
        assert ("torchrun runs the training commands" in err) == said
        assert err.count("\n") == int(said)


def test_more_processes_than_gpus_is_one_line_before_any_work(tmp_path, monkeypatch, capsys):
    """`torchrun --nproc_per_node=2` on a machine with one GPU: rank 1 would ask for cuda:1
    (CUDA's 'invalid device ordinal' traceback, found on an H200); it is refused, naming the
    fix, before the process group or the folder exist."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "set_device", lambda *_: pytest.fail("set_device reached"))
    for key, value in (("WORLD_SIZE", "2"), ("RANK", "0"), ("LOCAL_RANK", "0"),
                       ("LOCAL_WORLD_SIZE", "2")):
        monkeypatch.setenv(key, value)
    config = write_config(tmp_path)
    assert main(["train", str(config), "train.device=cuda", "--out", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert ("torchrun started 2 processes on this machine but it has 1 CUDA device(s), one per "
            "process: use --nproc_per_node=1 (with train.accum_steps x2 for the same batch per "
            "update), or train.device=cpu") in err
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize("world_size", ["2", "1"])
def test_the_command_exits_with_mains_code_and_its_output_written(world_size):
    """`run()` ends a process that torchrun started with os._exit (no interpreter shutdown while
    gloo's threads live): main's exit code and its block-buffered stdout must survive that, as
    they do a normal exit outside torchrun. run() imports nothing of torch: after Ctrl-C cut
    torch's import short (main then returns 130), importing it again raises."""
    snippet = ("import sys, aiayn.cli as cli\n"
               "sys.modules['torch'] = sys.modules['torch.distributed'] = None  # cut short\n"
               "cli.main = lambda: print('the last line', end='') or 3\n"
               "cli.run()\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    done = subprocess.run([sys.executable, "-c", snippet], capture_output=True, text=True,
                          env={**env, "WORLD_SIZE": world_size}, timeout=120)
    assert (done.returncode, done.stdout) == (3, "the last line"), done.stderr[-2000:]


def test_host_numbers_go_through_the_host_group_and_device_sums_stay_tensors(tmp_path):
    """Under NCCL, setup() adds a gloo group for host numbers (units, clock, stop decisions) so
    that summing them never waits for the GPU; device sums are summed as tensors, unread. Here
    the same two groups on gloo: both sums are right, and the group is gone after finish()."""
    script = tmp_path / "sums.py"
    script.write_text(
        "import torch, torch.distributed as dist\n"
        "from aiayn.training import distributed as d\n"
        "here = d.setup('cpu')\n"
        "d._HOST_GROUP[0] = dist.new_group(backend='gloo')  # as setup() does under NCCL\n"
        "assert d.all_sum([here.rank + 1, 10]) == [3.0, 20.0]\n"
        "sums = d.all_sum_tensors([torch.tensor(here.rank + 0.5), 2])\n"
        "assert all(isinstance(s, torch.Tensor) and s.dtype == torch.float64 for s in sums)\n"
        "assert [float(s) for s in sums] == [2.0, 4.0], sums\n"
        "d.finish()\n"
        "assert d._HOST_GROUP[0] is None\n"
        "print('sums ok', here.rank)\n")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           str(script)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0 and "sums ok 0" in done.stdout, done.stderr[-3000:]
