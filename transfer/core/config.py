"""The config as plain dataclasses (`Config`), and its validation.

YAML groups in `conf/` extend these dataclasses (registered with Hydra's ConfigStore by
`transfer.core.compose`, which also turns a composed config into a `Config`); OmegaConf checks
types, `check_config` checks everything a type cannot (ranges, divisibility, ordering) and
raises `UserError` naming the field. Nothing here imports Hydra or OmegaConf.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from transfer.core import rules
from transfer.core import scaling as rules_
from transfer.core.errors import UserError
from transfer.core.hparams import TUNABLE  # the stage spaces are checked against it

PARAM_TYPES = ("float", "int", "categorical")
MISSING = "???"  # OmegaConf's mandatory-value marker (omegaconf.MISSING), as a schema default
# the targets' Hugging Face families (model_type)
FAMILIES = ("llama", "qwen2", "gemma2", "mistral", "qwen3", "olmo2", "gemma3_text", "smollm3",
            "gemma", "granite", "olmo3", "ministral", "ministral3")
MLPS = ("swiglu", "geglu", "gelu")  # geglu: Gemma's gated tanh-GELU
# what the built-in proxies build (proxies.transformer's NORMS, POSITIONS; proxies.layers'
# QK_NORMS, left in place: their files are in the trial-deciding code's hash,
# transfer.archive.code), checked here before anything runs
NORMS = ("rmsnorm", "layernorm")
POSITIONS = ("rope", "learned")
QK_NORMS = (None, "head", "proj")  # q/k RMSNorm: none, over head_dim per head, over q / k whole
SCHEDULES = ("cosine", "linear", "wsd")  # the lr's decay after warmup (transfer.search.trainer)
HORIZON_METHODS = ("two_budgets", "branched")  # validation.horizon_method


@dataclass
class ModelConf:
    """A full-scale target. Shapes are published ones; `source` says where from."""

    name: str = MISSING
    source: str = ""
    d_model: int = MISSING
    n_layers: int = MISSING
    n_heads: int = MISSING
    n_kv_heads: int = MISSING
    d_ff: int = MISSING
    vocab_size: int = MISSING
    seq_len: int = MISSING  # pretraining context length
    tied_embeddings: bool = False
    norm: str = "rmsnorm"
    mlp: str = "swiglu"
    positions: str = "rope"
    train_tokens: float = MISSING  # pretraining tokens D
    rope_theta: float = 10000.0  # rotary base; the proxies use the target's
    rope_scaling: dict[str, Any] | None = None  # as in the HF config.json (Llama 3.x: llama3)
    norm_eps: float = rules.NORM_EPS  # RMSNorm/LayerNorm ε; the proxies use the target's
    # The family (its Hugging Face class) and its own features; the proxies keep each one,
    # except where it breaks μP (target.yaml: mup.family_changes says what and why).
    family: str = "llama"  # one of FAMILIES
    config: str | None = None  # model=hf: the config.json (or its folder) these were read from
    d_head: int | None = None  # None: d_model / n_heads (Gemma 2: 256, not d_model / heads)
    qkv_bias: bool = False  # biases on q, k, v (Qwen2); vectors under μP, zero init
    o_bias: bool = False  # bias on the attention output (Llama's attention_bias sets all four)
    mlp_bias: bool = False
    norm_unit_offset: bool = False  # gain stored as w, applied as (1 + w), w starts at 0 (Gemma)
    sandwich_norm: bool = False  # a norm after each branch too, before the residual add (Gemma 2)
    attn_softcap: float | None = None  # attention logits → cap·tanh(s / cap) (Gemma 2: 50)
    logit_softcap: float | None = None  # output logits → cap·tanh(z / cap) (Gemma 2: 30)
    embedding_normalizer: bool = False  # embeddings × √d_model (Gemma): not μP, see emit
    query_pre_attn_scalar: float | None = None  # Gemma 2: q·k × scalar^-½; μP's 1/d_head instead
    sliding_window: int | None = None  # local attention span (Gemma 2: every other layer)
    # q/k RMSNorm before the rotation: "head" over head_dim per head (Qwen3, Gemma 3), "proj"
    # over the whole q / k projection (OLMo 2); None: none. Its gains are vectors under μP.
    qk_norm: str | None = None
    reordered_norm: bool = False  # a norm on each branch's output only, none before (OLMo 2)
    # every k-th layer global, the others local: sliding window, rope_local_theta (Gemma 3: 6)
    sliding_window_pattern: int | None = None
    rope_local_theta: float | None = None  # the local layers' rotary base (Gemma 3: 10000)
    no_rope_interval: int | None = None  # every k-th layer without rotary positions (SmolLM3: 4)


@dataclass
class ProxyConf:
    builder: Any = field(default_factory=lambda: {"_target_": "proxies.TransformerFamily"})
    size: str = "cpu"  # proxies.registry preset: depth, head dim, context
    parametrization: str = "mup"  # "sp" exists to show that the validator rejects it
    width: int = 64  # stages run here: the smallest, cheapest proxy
    validation_width: int | None = None  # None: 4 × width
    # The widths the validator's lr grid measures the optimum at, width and validation_width
    # among them. None: width × 2^k up to validation_width (64, 128, 256): the optimum's
    # trajectory to the target needs ≥ 3 widths to tell a converging drift from a linear one.
    grid_widths: list[int] | None = None
    base_width: int | None = None  # None: = width (μP ≡ SP there; tuned values are "base" values)
    n_layers: int | None = None  # None: from `size`
    d_head: int | None = None  # None: from `size`
    seq_len: int | None = None  # None: from `size`
    kv_group: int | None = None  # None: target's heads/kv_heads, reduced to fit the proxy
    # Architecture choices, None: the target's. Pin them to reuse one sweep for many targets.
    ffn_ratio: float | None = None
    norm: str | None = None
    mlp: str | None = None
    positions: str | None = None
    tied_embeddings: bool | None = None
    attn_mult: float = 1.0
    input_mult: float = 1.0
    output_mult: float = 1.0
    init_std: float = 0.02
    # Depth (CompleteP, Dey et al. 2025): residual branches × (base_depth / n_layers)^α with the
    # matching lr and ε factors. 1.0: CompleteP, whose optimum holds across depth; 0.5:
    # Depth-μP; 0.0: width-only μP (the depth check is built to reject it).
    depth_alpha: float = rules.DEPTH_ALPHA
    base_depth: int | None = None  # None: the stages' n_layers (m_L = 1 where they tune)
    seed: int = 0


def validation_width(proxy: Mapping[str, Any] | ProxyConf) -> int:
    """The width the validator re-sweeps at: `proxy.validation_width`, or 4 × `proxy.width`
    when that is None (ProxyConf's default). `proxy` is the config's proxy group: a ProxyConf or
    a plain dict (config.yaml's)."""
    p = proxy if isinstance(proxy, Mapping) else vars(proxy)
    return p.get("validation_width") or 4 * p["width"]


def grid_widths(proxy: Mapping[str, Any] | ProxyConf) -> list[int]:
    """The widths of the validator's lr grid: `proxy.grid_widths` (with width and
    validation_width added), or width doubling up to validation_width when that is None."""
    p = proxy if isinstance(proxy, Mapping) else vars(proxy)
    w0, w1 = int(p["width"]), int(validation_width(p))
    explicit = p.get("grid_widths")
    if explicit:
        ws = {int(w) for w in explicit} | {w0, w1}
    else:
        ws, w = {w0, w1}, w0 * 2
        while w < w1:
            ws.add(w)
            w *= 2
    return sorted(ws)


@dataclass
class TrainConf:
    """Per-trial training defaults; stages overwrite the ones they tune."""

    tokens: int = 16 * 128 * 150  # per trial; batch sizes are compared at equal tokens
    lr: float = 0.01  # used until the lr stage has a winner
    batch_size: int = 16
    warmup_fraction: float = 0.05
    # The schedule's shape, betas, ε and clipping are the target's (the `scaling` group), and
    # one weight-decay rule serves proxies and target alike. fixed: λ = train.weight_decay for
    # both (μP scales it per group). timescale: λ = B/(τ·η·D) per run, τ the AdamW timescale of
    # scaling.tau_recipe (Wang & Aitchison 2024). Default fixed at 0: under the timescale rule a
    # 150-step proxy decays 10 % a step at its peak lr and its loss is nearly flat in lr
    # (curvature S/N 1.0, optimum 3.5 octaves above λ = 0's; benchmarks/RESULTS.md), so no lr
    # could be located, let alone transferred, with it.
    weight_decay_rule: str = "fixed"
    weight_decay: float = 0.0
    n_evals: int = 4
    eval_batches: int = 8
    eval_batch_size: int = 16
    divergence_factor: float = 1.5


@dataclass
class ParamConf:
    type: str = "float"
    low: float | None = None
    high: float | None = None
    log: bool = False
    choices: list[Any] | None = None


@dataclass
class StageConf:
    trials: int = 4
    params: dict[str, ParamConf] = field(default_factory=dict)


@dataclass
class StagesConf:
    order: list[str] = field(default_factory=list)
    stage: dict[str, StageConf] = field(default_factory=dict)


@dataclass
class PrunerConf:
    kind: str = "median"  # median | halving | none
    warmup_evals: int = 1  # evaluations before a trial can be pruned (after warmup)


@dataclass
class ValidationConf:
    enabled: bool = True
    points: int = 7  # log2-lr grid points around the tuned optimum
    step_log2: float = 0.5  # half-octave spacing
    seeds: int = 2  # averaged: one seed's optimum is too noisy at CPU sizes
    tolerance_log2: float = 0.5  # |drift| allowed
    max_gap: float = 0.01  # relative loss gap at the transferred lr on the wide model
    coord_widths: list[int] = field(default_factory=lambda: [32, 64, 128, 256])
    coord_steps: int = 4
    # initialisations (each with its batch) whose activation sizes the check averages: one seed's
    # slope scatters ±0.1 and more (benchmarks/RESULTS.md, the coordinate check over seeds)
    coord_seeds: int = 8
    # |d log2 l1 / d log2 width| allowed for μP activations, judged on its interval over the
    # seeds: over 3 blocks of 8 seeds each, the three families' μP proxies reached 0.34 at the
    # top of their intervals, embeddings × √width on Llama's 0.31 at the bottom, SP's 2.35
    # (benchmarks/coord_seeds.py, benchmarks/RESULTS.md). At 0.35 μP passed 18 of 18 checks
    # (width and depth), SP was rejected 6 of 6, √width rejected 2 of 3 and never passed.
    coord_max_slope: float = 0.35
    max_extend: int = 3  # grid steps added per side, at most, to bracket an optimum at an edge
    # The grids' design (transfer.verdict.plan, benchmarks/design_replay.py): with `focus`,
    # each curve after a grid's first (wider, deeper) is laid out once the one before it is
    # whole and bracketed, centred on its best point; the later curves get `wide_points`
    # points `wide_step_log2` apart (None: points, step_log2), and on the depth grid the later
    # half of the depths `depth_later_seeds` seeds (None: depth_seeds) and its first (the
    # shallowest, the cheapest) `depth_first_seeds` (None: depth_seeds).
    focus: bool = False
    wide_points: int | None = None
    wide_step_log2: float | None = None
    depth_later_seeds: int | None = None
    depth_first_seeds: int | None = None
    # With focus: a later curve's points span `spread_basins` of the curve before's lr basin
    # (octaves within 1 % of its best loss), `wide_step_log2` apart at least and
    # `max_step_log2` at most: a flat family's points spread with its basin (None: off).
    # `spread_basins` spreads the width grid, `depth_spread_basins` the depth grid.
    spread_basins: float | None = None
    depth_spread_basins: float | None = None
    max_step_log2: float | None = None
    # With focus: before the width grid lays out a wider curve, the curves it has are judged
    # at an extra look (1 − α/2: `rounds.look_confidence` at look 2); a rejection there stops
    # the grid, and the wider curves are not trained (`width.early_rejection`). It can only
    # reject: the pass verdict is the whole grid's.
    early_reject: bool = False
    min_seeds: int = 2  # fewer: inconclusive (one seed cannot tell noise from signal)
    min_points: int = 4  # finite points per width in the fit, fewer: inconclusive
    min_curvature_snr: float = 3.0  # curvature / its standard error; flat curves never pass
    confidence: float = 0.90  # of the drift, gap and optimum intervals (two-sided)
    # Measuring more where it decides (docs/verdict.md, "More seeds where they decide"): when
    # only intervals straddling their limits, or a curvature S/N under its limit, keep a grid
    # (width, depth) from a verdict, more seeds at every point of the curves where they decide
    # it for the fewest seconds, round by round, each look judged at a stricter confidence.
    # 0 s: never.
    max_extra_seconds: float = 0.0  # predicted seconds the rounds may add, per grid
    max_rounds: int = 2  # seed rounds at most (each adds one look)
    can_pass: bool = True  # false on budgets too small for a verdict (budget=smoke)
    decide_hint: str = "budget=thorough, or validation.seeds=4"  # printed when inconclusive
    # Depth: the same lr grid at the stage width and a deeper proxy, judged like width.
    depth_enabled: bool = False  # off in budget=default: see conf/budget/thorough.yaml
    depth: int | None = None  # layers of the deep proxy; None: 4 × the stages' n_layers
    # Each depth of the grid this many times the one before (then `depth`): 2 gives 2, 4, 8, 16;
    # 4 with depth 32 gives 2, 8, 32 (at 961e65b its 32-layer curve at width 32 and 2 seeds was
    # too flat to locate: benchmarks/RESULTS.md).
    depth_ratio: int = 2
    # A target depth inside the grid read between the two measured depths around it (linear in
    # log2 L) instead of from the depth model: follows a turn, but carries one curve's noise; on
    # the 3B's held-out targets inside the default grid the model came closer (RESULTS.md).
    depth_interpolate: bool = False
    # The depth grid's width; None: the stages' (its L0 curve then copied from the width grid).
    # Narrower is cheaper per layer, so the same seconds reach deeper (docs/depth.md).
    depth_width: int | None = None
    depth_seeds: int | None = None  # seeds at every depth grid point; None: validation.seeds
    coord_depths: list[int] | None = None  # None: n_layers × 1, 2, 4 (and the deep proxy's)
    # Horizon: the lr grid at the stage width also at train.tokens / horizon_ratio tokens; the
    # measured exponent of lr* ∝ D^e replaces scaling.horizon_rule's when tight
    # (docs/scaling.md, Horizon check).
    horizon_enabled: bool = False
    horizon_ratio: float = 4.0  # full budget / short budget, >= 4 (two octaves)
    horizon_max_ci: float = 0.2  # widest exponent interval that counts as tight
    # two_budgets: the grid at train.tokens / horizon_ratio beside the width grid's full-budget
    # curve (two horizons). branched: one wsd run per (lr, seed) branched into cooldowns at
    # train.tokens × each of horizon_multiples, the exponent the slope of the optima over them
    # (transfer.judge.horizon_law); needs scaling.schedule=wsd, the schedule it measures.
    horizon_method: str = "two_budgets"
    # ≥ 4 horizons spanning ≥ 16×; the longest is train.tokens by default: one run's cost
    # (the trunk to 0.8 × train.tokens, then the cooldowns: ~1.2 runs per point)
    horizon_multiples: list[float] = field(
        default_factory=lambda: [1 / 16, 1 / 8, 1 / 4, 1 / 2, 1.0])


@dataclass
class DataConf:
    kind: str = "stdlib"
    root: str | None = None
    path: str | None = None
    val_path: str | None = None
    dtype: str | None = None
    vocab_size: int | None = None
    val_fraction: float = 0.1


@dataclass
class HardwareConf:
    name: str = MISSING
    peak_flops: float = MISSING  # dense bf16 FLOP/s per device, vendor datasheet
    utilization: float = 0.4  # achieved MFU assumed for the target run
    price_per_gpu_hour: float = MISSING  # USD, on-demand cloud list price


@dataclass
class StorageConf:
    kind: str = "journal"  # journal | postgres
    url: str | None = None  # postgres: postgresql://user@host:port/db (or $TRANSFER_STORAGE_URL)
    heartbeat_interval: int = 10
    grace_period: int = 30


# the whole-run prediction's phases (transfer.run.predict), each calibrated on its own
ETA_PHASES = ("stages", "validation", "depth", "horizon", "coord", "finalize")


@dataclass
class CostConf:
    n_gpus: int = 256
    buffer: float = 0.3  # contingency on top of the estimate
    naive_token_fraction: float = 0.01  # each naive full-scale trial: this share of D
    # own-laws baseline: the sweeps a team would run instead to fit its own lr/batch laws
    baseline_scales: list[float] = field(default_factory=lambda: [1 / 8, 1 / 16, 1 / 32, 1 / 64])
    baseline_grid: int = 16  # (lr × batch) runs per scale, e.g. 4 × 4
    baseline_tokens_per_param: float = 20.0  # Chinchilla-optimal runs (Hoffmann et al. 2022)
    max_tuning_gpu_hours: float | None = None
    max_wall_seconds: float | None = None
    # the ETA's prior (transfer.run.history): per parametrization, each phase's measured ÷
    # probe-predicted seconds on the runs `eta_prior_source` names, counted as that many runs
    eta_prior: dict[str, dict[str, float]] = field(default_factory=dict)
    eta_prior_after_stages: dict[str, dict[str, float]] = field(default_factory=dict)  # the same
    # for the re-prediction once the stages are done
    eta_prior_runs: int = 0
    eta_prior_source: str = ""


@dataclass
class ScalingConf:
    """Rules for what μP does not carry (transfer/core/scaling.py); conf/scaling/ picks a set."""

    name: str = "default"
    batch_rule: str = "step_law"  # step_law | deepseek | fixed: optimal batch tokens vs D
    batch_tokens: float | None = None  # batch_rule=fixed only
    horizon_rule: str = "bjorck"  # bjorck | step_law | none: lr vs token horizon, fixed batch
    horizon_beta: float = 0.32  # Bjorck et al.'s exponent (models >= 760M)
    batch_lr_rule: str = "adam_sqrt"  # adam_sqrt | none: lr when the batch changes
    warmup_rule: str = "tokens_per_param"  # tokens_per_param | fixed_steps
    warmup_tokens_per_param: float = 1.0
    warmup_steps: int = 2000  # warmup_rule=fixed_steps (Llama 2's)
    # AdamW timescale τ = B/(η·λ·D) of a published recipe (default: Llama 2 7B)
    tau_recipe: dict[str, float] = field(default_factory=lambda: {
        "batch_tokens": 4.0e6, "lr": 3.0e-4, "weight_decay": 0.1, "tokens": 2.0e12})
    tau_source: str = "Llama 2 7B (Touvron et al. 2023, §2.2)"
    schedule: str = "cosine"  # cosine | linear | wsd (warmup, constant, linear cooldown)
    min_lr_fraction: float = 0.1  # Llama 2: cosine down to 10 % of the peak
    # wsd: the cooldown's share of the steps; ~20 % matches cosine (Hägele et al. 2024,
    # arXiv 2405.18392, Section 3)
    wsd_cooldown_fraction: float = 0.2
    betas: list[float] = field(default_factory=lambda: [0.9, 0.95])  # as the proxies trained
    eps: float = 1e-8  # Adam ε at base width (the proxies' MuAdamW default)
    grad_clip: float = 1.0


@dataclass
class Config:
    model: ModelConf = field(default_factory=ModelConf)
    proxy: ProxyConf = field(default_factory=ProxyConf)
    train: TrainConf = field(default_factory=TrainConf)
    stages: StagesConf = field(default_factory=StagesConf)
    pruner: PrunerConf = field(default_factory=PrunerConf)
    validation: ValidationConf = field(default_factory=ValidationConf)
    data: DataConf = field(default_factory=DataConf)
    hardware: HardwareConf = field(default_factory=HardwareConf)
    storage: StorageConf = field(default_factory=StorageConf)
    cost: CostConf = field(default_factory=CostConf)
    scaling: ScalingConf = field(default_factory=ScalingConf)
    budget: str = "default"
    # run folder; None: <model>-<parametrization>-<budget>-<fingerprint[:8]> (a sweep's,
    # plan_sweep), validate-<builder>-<budget>-<fingerprint[:8]> (transfer.validate's)
    name: str | None = None
    archive_dir: str = "sweeps"
    # processes on this machine sharing the run's studies; auto: 2 on a CPU with >= 2 cores
    # (2 × 1 thread trained 1.13-1.14× faster than 1 × 2 threads on 2 cores at widths 64 and
    # 256, benchmarks/workers.py), 1 on a GPU or a 1-core CPU
    workers: Any = "auto"
    worker: int = 0  # this launch's index when many launches share a study (SLURM array, -m)
    # auto: copy an archived run's trials when its fingerprint (config and code) is this one's;
    # force: also when only the code differs (recorded in run.json: reused_from); off: never
    reuse: str = "auto"
    device: str = "auto"
    progress: str = "auto"  # auto | bar | lines | off


def _fail(msg: str) -> None:
    raise UserError(msg)


def _check_space(stage: str, name: str, p: ParamConf) -> None:
    where = f"stages.stage.{stage}.params.{name}"
    if name not in TUNABLE:
        _fail(f"{where}: unknown stage parameter {name!r}; tunable: {', '.join(TUNABLE)}")
    if p.type not in PARAM_TYPES:
        _fail(f"{where}.type={p.type!r}; use one of {', '.join(PARAM_TYPES)}")
    if p.type == "categorical":
        if not p.choices:
            _fail(f"{where}.choices is empty; list at least one value")
        return
    if p.low is None or p.high is None:
        _fail(f"{where}: low and high are required for type={p.type}")
    if not p.low < p.high:
        _fail(f"{where}: empty or inverted range low={p.low} high={p.high}; need low < high")
    if p.log and p.low <= 0:
        _fail(f"{where}: log scale needs low > 0, got {p.low}")


# The target's sizes: name → (smallest, largest) a real model has room for. Vocabulary: 2 tokens
# at least; 2^24 is 64× Gemma 3's 262k, the largest published one.
MODEL_SIZES = {"d_model": (1, 2**20), "n_layers": (1, 2**12), "n_heads": (1, 2**12),
               "n_kv_heads": (1, 2**12), "d_ff": (1, 2**22), "vocab_size": (2, 2**24),
               "seq_len": (1, 2**24), "d_head": (1, 2**14)}
# optional positive reals (None: the feature is off)
MODEL_POSITIVE = ("attn_softcap", "logit_softcap", "query_pre_attn_scalar", "sliding_window",
                  "sliding_window_pattern", "rope_local_theta", "no_rope_interval")


def _is_whole(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def check_model(m: ModelConf) -> None:
    """The target's sizes and shape, before anything divides by them: each size a whole number
    in its range, heads dividing the width, kv heads dividing the heads, ε and θ positive."""
    for name, (lo, hi) in MODEL_SIZES.items():
        v = getattr(m, name)
        if v is None and name == "d_head":
            continue
        if not _is_whole(v) or not lo <= v <= hi:
            _fail(f"model.{name}={v!r} must be a whole number in [{lo}, {hi}]; fix the target "
                  "(model.* or its config.json)")
    if m.n_kv_heads > m.n_heads or m.n_heads % m.n_kv_heads:
        _fail(f"model.n_heads={m.n_heads} is not divisible by model.n_kv_heads="
              f"{m.n_kv_heads}; fix the target shape")
    if m.d_head is None and m.d_model % m.n_heads:
        _fail(f"model.d_model={m.d_model} is not divisible by model.n_heads={m.n_heads}"
              "; set model.d_head when the head dimension is not d_model / n_heads")
    for name in ("rope_theta", "norm_eps"):
        v = getattr(m, name)
        if not isinstance(v, int | float) or not math.isfinite(v) or v <= 0:
            _fail(f"model.{name}={v!r} must be a positive number")
    if m.norm_eps >= 1:
        _fail(f"model.norm_eps={m.norm_eps} must be below 1 (a norm's ε is ~1e-5 or 1e-6)")
    for name in MODEL_POSITIVE:
        v = getattr(m, name)
        if v is not None and (not isinstance(v, int | float) or not math.isfinite(v) or v <= 0):
            _fail(f"model.{name}={v!r} must be a positive number, or null (off)")
    if not math.isfinite(float(m.train_tokens)) or m.train_tokens <= 0:
        _fail(f"model.train_tokens must be a finite number > 0, got {m.train_tokens}")


def archived_validation(saved: Mapping[str, Any]):
    """An archived run's `validation` group (its config.yaml's, a plain mapping) with the
    schema's default for every field it predates (the run ran as that default), as attributes:
    what the verdict's `limits_from` and `depth_limits_from` read when an archived run is
    re-judged."""
    from dataclasses import asdict
    from types import SimpleNamespace

    return SimpleNamespace(**{**asdict(ValidationConf()), **dict(saved)})


def check_config(cfg: Config) -> None:
    """Everything a user can get wrong that a type cannot catch, one field per message."""
    c = cfg
    check_model(c.model)
    if c.proxy.parametrization not in ("mup", "sp"):
        _fail(f"proxy.parametrization={c.proxy.parametrization!r}; use mup or sp")
    w, vw = c.proxy.width, validation_width(c.proxy)
    if w < 1:
        _fail(f"proxy.width must be >= 1, got {w}")
    if vw <= w:
        _fail(f"proxy.validation_width={vw} must be larger than proxy.width={w}; widths must "
              "increase")
    for g in c.proxy.grid_widths or []:
        if not w <= g <= vw:
            _fail(f"proxy.grid_widths has {g}, outside proxy.width={w} .. "
                  f"proxy.validation_width={vw}; list widths between the two")
    if c.model.family not in FAMILIES:
        _fail(f"model.family={c.model.family!r}; use one of {', '.join(FAMILIES)}")
    if c.model.mlp not in MLPS:
        _fail(f"model.mlp={c.model.mlp!r}; use one of {', '.join(MLPS)}")
    for name, allowed in (("norm", NORMS), ("positions", POSITIONS), ("qk_norm", QK_NORMS)):
        if getattr(c.model, name) not in allowed:
            _fail(f"model.{name}={getattr(c.model, name)!r}; use one of "
                  f"{', '.join('null' if a is None else a for a in allowed)}")
    t = c.train
    if t.weight_decay_rule not in ("timescale", "fixed"):
        _fail(f"train.weight_decay_rule={t.weight_decay_rule!r}; use timescale (the target's "
              "AdamW timescale) or fixed (train.weight_decay)")
    if t.tokens < 1:
        _fail(f"train.tokens must be >= 1, got {t.tokens}")
    if not 0 <= t.warmup_fraction < 1:
        _fail(f"train.warmup_fraction={t.warmup_fraction} must be in [0, 1): warmup must be "
              "shorter than the run")
    for name in ("batch_size", "n_evals", "eval_batches", "eval_batch_size"):
        if getattr(t, name) < 1:  # before the archive: the trainer's own check came after it
            _fail(f"train.{name} must be >= 1, got {getattr(t, name)}")
    if not t.divergence_factor > 1:
        _fail(f"train.divergence_factor must be > 1 (a loss that many times the first is "
              f"diverged), got {t.divergence_factor}")
    if not c.stages.order:
        _fail("stages.order is empty; pick a stages preset, e.g. stages=default")
    for name in c.stages.order:
        if name not in c.stages.stage:
            _fail(f"stages.order names {name!r} but stages.stage has no such entry; "
                  f"defined: {', '.join(c.stages.stage)}")
        st = c.stages.stage[name]
        if st.trials < 1:
            _fail(f"stages.stage.{name}.trials must be >= 1, got {st.trials}")
        if not st.params:
            _fail(f"stages.stage.{name}.params is empty; give at least one parameter to search")
        for pname, p in st.params.items():
            _check_space(name, pname, p)
            if pname == "warmup_fraction" and p.type != "categorical" and p.high >= 1:
                _fail(f"stages.stage.{name}.params.warmup_fraction.high={p.high} means warmup "
                      ">= steps; keep it below 1")
    if c.pruner.kind not in ("median", "halving", "none"):
        _fail(f"pruner.kind={c.pruner.kind!r}; use median, halving or none")
    if c.workers != "auto" and (isinstance(c.workers, bool) or not isinstance(c.workers, int)
                                or c.workers < 1):
        _fail(f"workers={c.workers!r}; use workers=auto or a whole number >= 1")
    if c.reuse not in ("auto", "force", "off"):
        _fail(f"reuse={c.reuse!r}; use auto, force or off")
    if c.storage.kind not in ("journal", "postgres"):
        _fail(f"storage.kind={c.storage.kind!r}; use storage=journal or storage=postgres")
    v = c.validation
    if not 0 <= c.proxy.depth_alpha <= 1:
        _fail(f"proxy.depth_alpha={c.proxy.depth_alpha} must be in [0, 1] (0 μP, 0.5 Depth-μP, "
              "1 CompleteP)")
    if c.proxy.base_depth is not None and c.proxy.base_depth < 1:
        _fail(f"proxy.base_depth must be >= 1, got {c.proxy.base_depth}")
    if v.depth is not None and v.depth < 2:
        _fail(f"validation.depth must be >= 2 layers, got {v.depth}")
    if v.depth_ratio < 2:
        _fail(f"validation.depth_ratio must be an integer >= 2 (each depth of the grid that many "
              f"times the one before), got {v.depth_ratio}")
    if v.depth_seeds is not None and v.depth_seeds < 2:
        _fail(f"validation.depth_seeds must be >= 2 (the verdict needs seeds to measure its "
              f"noise), or null: validation.seeds; got {v.depth_seeds}")
    if v.depth_width is not None and v.depth_width < 1:
        _fail(f"validation.depth_width must be >= 1 (or null: the stages' width), got "
              f"{v.depth_width}")
    if v.horizon_ratio < 4:
        _fail(f"validation.horizon_ratio must be >= 4 (budgets at least 4× apart), got "
              f"{v.horizon_ratio}")
    if v.horizon_max_ci <= 0:
        _fail(f"validation.horizon_max_ci must be > 0, got {v.horizon_max_ci}")
    _check_horizon_method(v, c.scaling)
    if v.horizon_enabled and v.horizon_method == "branched" and t.weight_decay_rule != "fixed":
        _fail("validation.horizon_method=branched shares one run between its horizons, so one λ, "
              f"but train.weight_decay_rule={t.weight_decay_rule} sets λ per horizon: use "
              "train.weight_decay_rule=fixed or validation.horizon_method=two_budgets")
    if v.points < 3:
        _fail(f"validation.points must be >= 3 to fit a parabola, got {v.points}")
    if v.wide_points is not None and v.wide_points < max(3, v.min_points):
        _fail(f"validation.wide_points must be >= 3 and >= validation.min_points "
              f"({v.min_points}) to fit a parabola, or null: validation.points; got "
              f"{v.wide_points}")
    if v.wide_step_log2 is not None and not v.wide_step_log2 > 0:
        _fail(f"validation.wide_step_log2 must be > 0 (octaves between points), or null: "
              f"validation.step_log2; got {v.wide_step_log2}")
    if v.early_reject and not v.focus:
        _fail("validation.early_reject needs validation.focus=true (the early look comes before "
              "a focused grid lays out its next width); set both, or early_reject=false")
    for name in ("spread_basins", "depth_spread_basins"):
        value = getattr(v, name)
        if value is not None and not value > 0:
            _fail(f"validation.{name} must be > 0 (basins a later curve's points span), or "
                  f"null: off; got {value}")
        if value is not None and not (v.max_step_log2 or 0) > 0:
            _fail(f"validation.max_step_log2 must be > 0 with validation.{name} (the widest a "
                  f"spread curve's step grows); got {v.max_step_log2}")
    for name in ("depth_later_seeds", "depth_first_seeds"):
        value = getattr(v, name)
        if value is not None and value < 2:
            _fail(f"validation.{name} must be >= 2 (the verdict needs seeds to measure its "
                  f"noise), or null: validation.depth_seeds; got {value}")
    if v.seeds < 1:
        _fail(f"validation.seeds must be >= 1, got {v.seeds}")
    for name in ("step_log2", "tolerance_log2", "max_gap", "coord_max_slope"):
        if not getattr(v, name) > 0:
            _fail(f"validation.{name} must be > 0, got {getattr(v, name)}")
    if v.coord_steps < 2:
        _fail(f"validation.coord_steps must be >= 2 (a zero-initialised readout moves after its "
              f"first update), got {v.coord_steps}")
    for name in ("coord_widths", "coord_depths"):
        sizes = getattr(v, name)
        if sizes is not None and (len(set(sizes)) < 2 or min(sizes) < 1):
            _fail(f"validation.{name}={list(sizes)} needs two or more distinct sizes >= 1 (a "
                  f"slope; three to reject), e.g. [32, 64, 128, 256]")
    if v.coord_seeds < 1:
        _fail(f"validation.coord_seeds must be >= 1, got {v.coord_seeds}")
    if v.max_extend < 0:
        _fail(f"validation.max_extend must be >= 0, got {v.max_extend}")
    if v.max_extra_seconds < 0:
        _fail(f"validation.max_extra_seconds must be >= 0 (0: never measure more), got "
              f"{v.max_extra_seconds}")
    if v.max_rounds < 0:
        _fail(f"validation.max_rounds must be >= 0, got {v.max_rounds}")
    if v.min_points < 3:
        _fail(f"validation.min_points must be >= 3 to fit a parabola, got {v.min_points}")
    if not 0 < v.confidence < 1:
        _fail(f"validation.confidence must be in (0, 1), got {v.confidence}")
    if c.cost.n_gpus < 1:
        _fail(f"cost.n_gpus must be >= 1, got {c.cost.n_gpus}")
    _check_eta_prior(c.cost)
    if not 0 < c.hardware.utilization <= 1:
        _fail(f"hardware.utilization={c.hardware.utilization} must be in (0, 1]")
    _check_scaling(c.scaling)


def _check_eta_prior(c: CostConf) -> None:
    if c.eta_prior_runs < 0:
        _fail(f"cost.eta_prior_runs must be >= 0, got {c.eta_prior_runs}")
    for key in ("eta_prior", "eta_prior_after_stages"):
        for par, ratios in getattr(c, key).items():
            for k, r in ratios.items():
                if k not in ETA_PHASES:
                    _fail(f"cost.{key}.{par}.{k}: unknown phase; phases: {', '.join(ETA_PHASES)}")
                if not r > 0:
                    _fail(f"cost.{key}.{par}.{k} must be > 0 (measured ÷ predicted seconds), "
                          f"got {r}")


def _check_horizon_method(v: ValidationConf, s: ScalingConf) -> None:
    if v.horizon_method not in HORIZON_METHODS:
        _fail(f"validation.horizon_method={v.horizon_method!r}; use one of "
              f"{', '.join(HORIZON_METHODS)}")
    if v.horizon_method != "branched":
        return
    if v.horizon_enabled and s.schedule != "wsd":
        _fail(f"validation.horizon_method=branched measures the lr optimum under wsd cooldowns, "
              f"but scaling.schedule={s.schedule}: set scaling.schedule=wsd (the target is then "
              "emitted with the schedule measured) or validation.horizon_method=two_budgets")
    m = sorted({float(x) for x in v.horizon_multiples})
    if len(m) < 4 or m[0] <= 0 or m[-1] / m[0] < 16:
        _fail(f"validation.horizon_multiples={list(v.horizon_multiples)} must hold >= 4 distinct "
              "positive multiples of train.tokens spanning >= 16× (e.g. [0.0625, 0.125, 0.25, "
              "0.5, 1.0])")


def _check_scaling(s) -> None:
    for key, allowed in (("batch_rule", rules_.BATCH_RULES), ("horizon_rule", rules_.HORIZON_RULES),
                         ("warmup_rule", rules_.WARMUP_RULES), ("batch_lr_rule", ("adam_sqrt", "none"))):
        if getattr(s, key) not in allowed:
            _fail(f"scaling.{key}={getattr(s, key)!r}; use one of {', '.join(allowed)}")
    if s.schedule not in SCHEDULES:
        _fail(f"scaling.schedule={s.schedule!r}; use one of {', '.join(SCHEDULES)}")
    if not 0 < s.wsd_cooldown_fraction < 1:
        _fail(f"scaling.wsd_cooldown_fraction={s.wsd_cooldown_fraction} must be in (0, 1): the "
              "share of the steps the wsd cooldown takes (0.2 matches cosine)")
    if s.batch_rule == "fixed" and not s.batch_tokens:
        _fail("scaling.batch_rule=fixed needs scaling.batch_tokens (tokens per step), e.g. 4.0e+6")
