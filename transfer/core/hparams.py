"""The hyperparameter names, defined once: what a stage may tune, and which of them the model
reads (the rest configure the training run).

The config schema checks stage spaces against `TUNABLE`, the proxy family is built and replaced
with `MODEL_HPARAMS`, and the emitter requires every `TUNABLE` name among its winners. Plain
tuples, no framework: every layer may import them.
"""

from __future__ import annotations

__all__ = ["MODEL_HPARAMS", "RUN_HPARAMS", "TUNABLE"]

# Stage parameters that change the training run.
RUN_HPARAMS = ("lr", "batch_size", "warmup_fraction")
# Stage parameters that change the model: the μP multipliers the proxy family is built with.
MODEL_HPARAMS = ("input_mult", "output_mult", "init_std", "attn_mult")
# Hyperparameters a stage may search.
TUNABLE = RUN_HPARAMS + MODEL_HPARAMS
