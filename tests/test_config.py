"""conf/ composed through Hydra: what each group option sets, and `check_config` on bad input."""

from __future__ import annotations

import pytest
from helpers_sweep import compose_cfg
from hydra.errors import MissingConfigException
from omegaconf.errors import ValidationError

from proxies.registry import size as proxy_size
from transfer.core.config import check_config
from transfer.core.errors import UserError
from transfer.search.family import plan_proxies

# (d_model, n_layers, n_heads, n_kv_heads, d_ff, vocab_size, tied) as published; see conf/model.
SHAPES = {
    "1b": (2048, 16, 32, 8, 8192, 128256, True),  # Llama 3.2 1B config.json
    "3b": (3072, 28, 24, 8, 8192, 128256, True),  # Llama 3.2 3B config.json
    "7b": (4096, 32, 32, 32, 11008, 32000, False),  # Llama 2 7B, Table 1 / config.json
    "tiny": (256, 2, 8, 4, 1024, 256, False),  # CPU test target
}
BUDGETS = ("smoke", "default", "thorough")
DEFAULT_ORDER = ["lr", "batch_size", "warmup"]


def stage_trials(cfg) -> dict[str, int]:
    return {s: cfg.stages.stage[s].trials for s in cfg.stages.order}


# ---- group options ------------------------------------------------------------------------
def test_defaults_are_3b_default_budget_journal():
    cfg = compose_cfg([])
    assert (cfg.model.name, cfg.budget, cfg.storage.kind, cfg.data.kind, cfg.hardware.name) == (
        "3b", "default", "journal", "stdlib", "h100")
    assert list(cfg.stages.order) == DEFAULT_ORDER
    assert cfg.pruner.kind == "median"
    check_config(cfg)


@pytest.mark.parametrize("model", sorted(SHAPES))
def test_model_option_sets_published_shape(model):
    cfg = compose_cfg([f"model={model}"])
    m = cfg.model
    assert (m.d_model, m.n_layers, m.n_heads, m.n_kv_heads, m.d_ff, m.vocab_size,
            m.tied_embeddings) == SHAPES[model]
    assert m.name == model and m.source  # every shape says where it comes from
    assert m.d_model % m.n_heads == 0 and m.n_heads % m.n_kv_heads == 0
    check_config(cfg)


@pytest.mark.parametrize("budget", BUDGETS)
def test_budget_sets_widths_tokens_trials_consistently(budget):
    cfg = compose_cfg([f"budget={budget}"])
    assert cfg.budget == budget
    preset = proxy_size(cfg.proxy.size)
    assert cfg.proxy.width % preset["d_head"] == 0
    assert cfg.proxy.validation_width > cfg.proxy.width
    assert cfg.proxy.validation_width % preset["d_head"] == 0
    # tokens are whole steps at the budget's batch size and the preset's context
    assert cfg.train.tokens % (cfg.train.batch_size * preset["seq_len"]) == 0
    assert cfg.validation.coord_widths == sorted(cfg.validation.coord_widths)
    assert all(t >= 1 for t in stage_trials(cfg).values())
    check_config(cfg)
    plan_proxies(cfg)  # widths fit the preset's head dimension


def test_budgets_grow_from_smoke_to_thorough():
    cfgs = [compose_cfg([f"budget={b}"]) for b in BUDGETS]
    for small, big in zip(cfgs, cfgs[1:]):
        assert big.proxy.width > small.proxy.width
        assert big.proxy.validation_width > small.proxy.validation_width
        assert big.train.tokens > small.train.tokens
        assert all(big.stages.stage[s].trials > small.stages.stage[s].trials
                   for s in DEFAULT_ORDER)
        assert big.validation.points * big.validation.seeds >= (
            small.validation.points * small.validation.seeds)


def test_budget_smoke_is_tiny_proxy():
    cfg = compose_cfg(["model=tiny", "budget=smoke"])
    assert (cfg.proxy.size, cfg.proxy.width, cfg.proxy.validation_width) == ("tiny", 32, 64)
    assert stage_trials(cfg) == {"lr": 3, "batch_size": 2, "warmup": 2}


def test_stages_multipliers_extends_default_order():
    default = compose_cfg(["stages=default"])
    mult = compose_cfg(["stages=multipliers"])
    assert list(default.stages.order) == DEFAULT_ORDER
    assert list(mult.stages.order) == DEFAULT_ORDER + ["multipliers", "lr_refine"]
    assert set(mult.stages.stage.multipliers.params) == {"output_mult", "input_mult", "init_std"}
    assert list(mult.stages.stage.lr_refine.params) == ["lr"]
    for s in DEFAULT_ORDER:  # the shared stages search the same spaces
        assert mult.stages.stage[s].params == default.stages.stage[s].params
    check_config(mult)


def test_budget_wins_over_stages_preset():
    """budget comes last in the defaults list, so its trial counts hold for every preset."""
    cfg = compose_cfg(["stages=multipliers", "budget=smoke"])
    smoke = compose_cfg(["budget=smoke"])
    assert cfg.stages.stage.multipliers.trials == smoke.stages.stage.multipliers.trials == 2
    assert cfg.stages.stage.lr.trials == 3


def test_command_line_beats_budget():
    cfg = compose_cfg(["budget=smoke", "stages.stage.lr.trials=5", "train.tokens=512"])
    assert cfg.stages.stage.lr.trials == 5 and cfg.train.tokens == 512


@pytest.mark.parametrize("hw", ["a100", "h100", "h200", "cpu"])
def test_hardware_option(hw):
    cfg = compose_cfg([f"hardware={hw}"])
    h = cfg.hardware
    assert h.name == hw
    assert h.peak_flops > 0 and 0 < h.utilization <= 1 and h.price_per_gpu_hour > 0
    check_config(cfg)


def test_hardware_peaks_are_ordered():
    peak = {hw: compose_cfg([f"hardware={hw}"]).hardware.peak_flops
            for hw in ("cpu", "a100", "h100", "h200")}
    assert peak["cpu"] < peak["a100"] < peak["h100"] == peak["h200"]  # H200: same tensor cores


def test_storage_options():
    journal = compose_cfg(["storage=journal"]).storage
    pg = compose_cfg(["storage=postgres"]).storage
    assert (journal.kind, journal.url) == ("journal", None)
    assert (pg.kind, pg.url) == ("postgres", None)  # url null: $TRANSFER_STORAGE_URL
    assert pg.grace_period > pg.heartbeat_interval >= 1


def test_data_options():
    std = compose_cfg(["data=stdlib"]).data
    tok = compose_cfg(["data=tokens"]).data
    assert std.kind == "stdlib" and std.root is None
    # `???` in tokens.yaml merges onto the schema's None: nothing is set until the user says so
    assert tok.kind == "tokens" and tok.path is None and tok.vocab_size is None


def test_proxy_default_option():
    cfg = compose_cfg(["proxy=default"])
    assert (cfg.proxy.parametrization, cfg.proxy.seed) == ("mup", 0)
    assert cfg.proxy.builder._target_ == "proxies.TransformerFamily"


def test_proxy_gpu_with_thorough_budget():
    cfg = compose_cfg(["proxy=gpu", "budget=thorough"])
    assert (cfg.proxy.size, cfg.proxy.width) == ("gpu", 256)
    plan_proxies(cfg)


def test_proxy_gpu_option_alone_gives_gpu_proxies_whatever_the_budget():
    """A proxy option comes after the budget: its size and widths win."""
    for budget in ("default", "smoke"):
        cfg = compose_cfg(["proxy=gpu", f"budget={budget}"])
        assert (cfg.proxy.size, cfg.proxy.width, cfg.proxy.validation_width) == ("gpu", 256, 1024)
    plain = compose_cfg(["budget=smoke"])  # no proxy option: the budget's proxies
    assert (plain.proxy.size, plain.proxy.width, plain.proxy.validation_width) == ("tiny", 32, 64)


def test_unknown_group_option_lists_choices():
    with pytest.raises(MissingConfigException) as e:
        compose_cfg(["model=nope"])
    assert "model/nope" in str(e.value)
    assert {"1b", "3b", "7b", "tiny"} <= set(e.value.options or [])


def test_schema_types_are_enforced():
    with pytest.raises(Exception) as e:  # Hydra wraps OmegaConf's ValidationError
        compose_cfg(["proxy.width=wide"])
    assert isinstance(e.value, ValidationError) or isinstance(e.value.__cause__, ValidationError)


# ---- check_config: one line naming the field ----------------------------------------------
BAD = [
    pytest.param(["proxy.validation_width=32"], "proxy.validation_width", "must increase",
                 id="widths-equal"),
    pytest.param(["proxy.width=64", "proxy.validation_width=32"], "proxy.validation_width",
                 "must increase", id="widths-decreasing"),
    pytest.param(["model.n_kv_heads=3"], "model.n_kv_heads", "fix the target shape",
                 id="heads-not-divisible-by-kv"),
    pytest.param(["model.d_model=250"], "model.d_model", "model.n_heads", id="d-model-vs-heads"),
    pytest.param(["stages.stage.lr.params.lr.low=0.01", "stages.stage.lr.params.lr.high=0.01"],
                 "stages.stage.lr.params.lr", "need low < high", id="empty-range"),
    pytest.param(["stages.stage.lr.params.lr.low=0.1", "stages.stage.lr.params.lr.high=0.001"],
                 "stages.stage.lr.params.lr", "need low < high", id="inverted-range"),
    pytest.param(["stages.stage.batch_size.params.batch_size.choices=[]"],
                 "stages.stage.batch_size.params.batch_size.choices", "at least one",
                 id="empty-choices"),
    pytest.param(["stages.stage.lr.params.lr.low=0"], "stages.stage.lr.params.lr",
                 "log scale needs low > 0", id="log-range-from-zero"),
    pytest.param(["train.warmup_fraction=1.0"], "train.warmup_fraction", "shorter than the run",
                 id="warmup-ge-steps"),
    pytest.param(["stages.stage.warmup.params.warmup_fraction.high=1.0"],
                 "stages.stage.warmup.params.warmup_fraction.high", "keep it below 1",
                 id="warmup-space-ge-steps"),
    pytest.param(["stages.stage.lr.trials=0"], "stages.stage.lr.trials", ">= 1",
                 id="trials-zero"),
    pytest.param(["stages.stage.warmup.trials=-1"], "stages.stage.warmup.trials", ">= 1",
                 id="trials-negative"),
    pytest.param(["stages.order=[lr,momentum]"], "stages.order", "defined:",
                 id="unknown-stage"),
    pytest.param(["pruner.kind=hyperband"], "pruner.kind", "median, halving or none",
                 id="unknown-pruner"),
    pytest.param(["workers=0"], "workers", ">= 1", id="workers-zero"),
    pytest.param(["workers=many"], "workers", "workers=auto", id="workers-word"),
    pytest.param(["storage.kind=sqlite"], "storage.kind", "storage=journal", id="unknown-storage"),
    pytest.param(["validation.points=2"], "validation.points", ">= 3", id="validation-points"),
    pytest.param(["proxy.grid_widths=[16,48]"], "proxy.grid_widths", "between the two",
                 id="grid-width-outside"),
    pytest.param(["train.weight_decay_rule=cosine"], "train.weight_decay_rule", "timescale",
                 id="unknown-weight-decay-rule"),
    pytest.param(["reuse=always"], "reuse", "auto, force or off", id="unknown-reuse"),
    pytest.param(["validation.early_reject=true", "validation.focus=false"],
                 "validation.early_reject", "validation.focus=true", id="early-reject-unfocused"),
    pytest.param(["+cost.eta_prior.mup.stage=1.2"], "cost.eta_prior.mup.stage",
                 "phases: stages", id="eta-prior-unknown-phase"),
    pytest.param(["+cost.eta_prior.mup.depth=0"], "cost.eta_prior.mup.depth", "> 0",
                 id="eta-prior-zero"),
]


def test_grid_widths_double_from_width_to_validation_width():
    from transfer.core.config import grid_widths

    assert grid_widths({"width": 64, "validation_width": 256}) == [64, 128, 256]
    assert grid_widths({"width": 64, "validation_width": None}) == [64, 128, 256]
    assert grid_widths({"width": 64, "validation_width": 128}) == [64, 128]
    assert grid_widths({"width": 64, "validation_width": 256, "grid_widths": [96]}) == [64, 96, 256]


def test_proxies_train_under_the_targets_weight_decay_timescale():
    """λ·η = 1/(τ·steps) whatever the lr: the AdamW timescale is the same fraction of every
    trial, as target.yaml's λ keeps it for the target; too short a trial is refused."""
    from transfer.core import scaling
    from transfer.core.errors import UserError
    from transfer.search.training import proxy_weight_decay, train_spec

    cfg = compose_cfg(["model=tiny", "train.weight_decay_rule=timescale"])
    r = cfg.scaling.tau_recipe
    tau = scaling.adamw_timescale(r["batch_tokens"], r["lr"], r["weight_decay"], r["tokens"])
    for lr in (1e-3, 1e-2):
        assert lr * proxy_weight_decay(cfg, lr=lr, steps=150) == pytest.approx(1 / (tau * 150))
    with pytest.raises(UserError, match="train.weight_decay_rule=fixed"):
        proxy_weight_decay(cfg, lr=1e-3, steps=10)
    hp = {"lr": 0.01, "batch_size": 16, "warmup_fraction": 0.05}
    spec = train_spec(cfg, hp, width=64, seed=0, seq_len=128)
    assert spec.weight_decay == pytest.approx(proxy_weight_decay(cfg, lr=0.01, steps=spec.steps(128)))
    assert (spec.schedule, spec.min_lr_fraction) == (cfg.scaling.schedule, cfg.scaling.min_lr_fraction)
    fixed = compose_cfg(["model=tiny", "train.weight_decay_rule=fixed", "train.weight_decay=0.1"])
    assert train_spec(fixed, hp, width=64, seed=0, seq_len=128).weight_decay == 0.1
    assert compose_cfg(["model=tiny"]).train.weight_decay_rule == "fixed"  # the default, at 0


@pytest.mark.parametrize(("overrides", "field", "fix"), BAD)
def test_check_config_names_field_and_fix(overrides, field, fix):
    cfg = compose_cfg(["model=tiny", "budget=smoke", *overrides])
    with pytest.raises(UserError) as e:
        check_config(cfg)
    msg = str(e.value)
    assert "\n" not in msg
    assert field in msg and fix in msg


def test_unknown_stage_parameter_names_tunables(tmp_path):
    """A stages file of one's own (Hydra search path) with a misspelled parameter."""
    (tmp_path / "stages").mkdir()
    (tmp_path / "stages" / "typo.yaml").write_text(
        "order: [lr]\nstage:\n  lr:\n    trials: 2\n    params:\n"
        "      learning_rate: {type: float, low: 1.0e-3, high: 0.1, log: true}\n")
    cfg = compose_cfg(["model=tiny", "budget=smoke", f"hydra.searchpath=[file://{tmp_path}]",
                       "stages=typo"])
    with pytest.raises(UserError) as e:
        check_config(cfg)
    msg = str(e.value)
    assert "\n" not in msg
    assert "stages.stage.lr.params.learning_rate" in msg and "tunable: lr," in msg


@pytest.mark.parametrize(("overrides", "field"), [
    (["proxy.width=36", "proxy.validation_width=72"], "proxy.width=36"),
    (["proxy.validation_width=68"], "proxy.validation_width=68"),
    (["proxy.base_width=12"], "proxy.base_width=12"),
])
def test_width_not_divisible_by_head_dim(overrides, field):
    cfg = compose_cfg(["model=tiny", "budget=smoke", *overrides])
    check_config(cfg)  # a type-valid, increasing width: only the proxy plan can tell
    with pytest.raises(UserError) as e:
        plan_proxies(cfg)
    d_head = proxy_size("tiny")["d_head"]
    assert str(e.value).startswith(field) and f"use a multiple of {d_head}" in str(e.value)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("budget", ["smoke", "thorough"])
@pytest.mark.parametrize("model", sorted(SHAPES))
def test_shipped_models_fit_every_proxy_size(model, budget):
    """The smallest and the largest proxy preset can be planned for every shipped target."""
    cfg = compose_cfg([f"model={model}", f"budget={budget}", "stages=multipliers"])
    check_config(cfg)
    plan = plan_proxies(cfg)
    heads = plan.width // plan.derived["d_head"]
    assert heads % plan.derived["kv_group"] == 0
    assert plan.derived["kv_group"] <= cfg.model.n_heads // cfg.model.n_kv_heads


@pytest.mark.parametrize("model", [*sorted(SHAPES), "qwen2.5-3b", "gemma2-2b", "qwen3-4b",
                                   "gemma3-4b"])
def test_kv_group_divides_the_heads_at_every_grid_width_the_depth_grid_included(model):
    """budget=default trains its depth grid at width 32 (2 heads): Qwen2.5's 8 query heads per kv
    head become 2 there, not the 4 that width 64 allows, or the depth grid would fall back to
    width 64 and cost ~1.5× (transfer.verdict.depth.grid_width)."""
    cfg = compose_cfg([f"model={model}"])
    plan = plan_proxies(cfg)
    d_head, group = plan.derived["d_head"], plan.derived["kv_group"]
    for w in (plan.width, *plan.grid_widths, plan.base_width, cfg.validation.depth_width):
        assert (w // d_head) % group == 0, w
    target = cfg.model.n_heads // cfg.model.n_kv_heads
    assert group == min(2, target)  # width 32's 2 heads
    off = plan_proxies(compose_cfg([f"model={model}", "validation.depth_width=null"]))
    assert off.derived["kv_group"] >= group  # the stages' width alone allows at least as many


def test_an_explicit_kv_group_the_depth_grid_cannot_build_is_kept():
    """proxy.kv_group=4 for Qwen2.5 builds widths 64-256; the depth grid's width 32 (2 heads)
    then falls back to the stages' width (transfer.verdict.depth.grid_width), as before."""
    plan = plan_proxies(compose_cfg(["model=qwen2.5-3b", "proxy.kv_group=4"]))
    assert plan.derived["kv_group"] == 4
