"""train.compile: the model's repeated layers compiled, one region each (regional compilation).

    undo = compile_layers(model, cuda_graphs=False)   # the Trainer, as fit() starts
    ...                                               # training forwards run the compiled layers
    undo()                                            # as fit() ends: the model as it was

Every layer of an Encoder or Decoder (nn.ModuleList `layers`; every family builds on them) is one
compiled region with dynamic shapes. The layers of a stack share their code, so the compiler
traces and builds a layer once and reuses it for the others of its kind: the first update of the
base model (6+6 layers) compiles in about a third of the time the whole model and loss took as
one graph (34.7 s against 101.5 s on 2 cores of an AMD EPYC, cold caches; on an H200 the whole
graph had not finished compiling after 200 s). The embeddings, the output projection and the
loss stay eager, between the regions; the layers hold nearly all of the model's FLOPs and its
small fused operations (norms, dropout, residual adds, the attention's reshapes).

A compiled layer runs only where training runs: in train mode with gradients on. Evaluation
(eval mode, no_grad) and decoding with a cache take the eager forward, so they never wait for a
compilation, and the model a run hands back is unchanged. `cuda_graphs` compiles the regions in
torch.compile's "reduce-overhead" mode (CUDA graphs: each region's kernels replayed as one launch).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn


def layer_stacks(model: nn.Module) -> list[nn.Module]:
    """The layers of the model's stacks (every `layers` ModuleList), in order."""
    return [layer for name, stack in model.named_modules()
            if isinstance(stack, nn.ModuleList) and name.split(".")[-1] == "layers"
            for layer in stack]


def compile_layers(model: nn.Module, cuda_graphs: bool = False) -> Callable[[], None]:
    """Compile each of the model's stacked layers for training (a model without a `layers` stack:
    its whole forward); returns the function that puts the eager forwards back."""
    mode = "reduce-overhead" if cuda_graphs else None
    layers = layer_stacks(model) or [model]  # a model with no stack: one region, the whole of it
    for layer in layers:
        layer.forward = _training_only(layer, torch.compile(layer.forward, dynamic=True, mode=mode))

    def undo() -> None:
        for layer in layers:
            if "forward" in vars(layer):
                del layer.forward  # the class's forward again

    return undo


def _training_only(layer: nn.Module, compiled: Callable[..., Any]) -> Callable[..., Any]:
    eager = layer.forward

    def forward(*args: Any, **kwargs: Any) -> Any:
        if layer.training and torch.is_grad_enabled():
            return compiled(*args, **kwargs)
        return eager(*args, **kwargs)

    return forward


__all__ = ["compile_layers", "layer_stacks"]
