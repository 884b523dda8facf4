"""transfer.outputs.hf: target.yaml → GraniteConfig (hf/config.json), against target.yaml's own numbers
and against what GraniteForCausalLM actually does with them."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest
import torch
import yaml
from helpers_sweep import TINY, compose_cfg, only_run
from helpers_target import group, small_target

from transfer.archive import Archive
from transfer.cli.sweep import sweep
from transfer.core.compose import as_config, compose
from transfer.outputs import apply, hf


# ---- the pure mapping (no transformers needed) ----------------------------------------------
def test_config_dict_carries_target_shapes():
    d = hf.config_dict(small_target())
    assert (d["hidden_size"], d["num_hidden_layers"], d["num_attention_heads"],
            d["num_key_value_heads"], d["intermediate_size"], d["vocab_size"],
            d["max_position_embeddings"]) == (128, 2, 8, 4, 512, 256, 32)
    assert d["tie_word_embeddings"] is False and d["hidden_act"] == "silu"
    assert "head_dim" not in d  # 128 / 8 = 16: Granite derives it


def test_config_dict_multipliers_are_target_yaml_values():
    t = small_target()
    d, mup = hf.config_dict(t), t["mup"]
    assert d["embedding_multiplier"] == mup["input_mult"] == 0.5
    assert d["attention_multiplier"] == pytest.approx(1.5 / 16)  # μP: attn_mult / d_head
    assert d["attention_multiplier"] == mup["attn_scale"]
    # Granite divides the logits by logits_scaling; μP multiplies by output_mult / width_mult
    assert d["logits_scaling"] == pytest.approx(1 / mup["logits_scale"]) == pytest.approx(4 / 2.0)
    assert d["residual_multiplier"] == 1.0
    assert d["initializer_range"] == group(t, "hidden_attn")["init_std"] == pytest.approx(0.05 / 2)


def test_rope_theta_and_norm_eps_default_and_follow_the_model():
    d = hf.config_dict(small_target())
    assert d["rope_theta"] == hf.DEFAULT_ROPE_THETA and d["rms_norm_eps"] == hf.DEFAULT_NORM_EPS
    d = hf.config_dict(small_target(rope_theta=500000.0, norm_eps=1e-6))
    assert d["rope_theta"] == 500000.0 and d["rms_norm_eps"] == 1e-6


def test_rope_scaling_is_carried_with_its_extended_context():
    llama3 = {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
              "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
    d = hf.config_dict(small_target(rope_scaling=llama3))
    assert d["rope_scaling"] == llama3 and d["max_position_embeddings"] == 8192 * 32
    assert "rope_scaling" not in hf.config_dict(small_target(rope_scaling=None))


def test_model_configs_with_rope_scaling_give_a_valid_granite_config(transformers):
    t = small_target(rope_theta=500000.0, rope_scaling={
        "rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192})
    cfg = hf.granite_config(t)
    rope = (getattr(cfg, "rope_parameters", None)  # transformers 5; 4.x keeps them apart
            or {**cfg.rope_scaling, "rope_theta": cfg.rope_theta})
    assert rope["rope_type"] == "llama3" and rope["rope_theta"] == 500000.0


def test_head_dim_is_written_when_heads_do_not_divide_width():
    d = hf.config_dict(small_target(n_heads=4, n_kv_heads=4))  # d_head 32 = 128 / 4: derived
    assert "head_dim" not in d
    t = small_target()
    t["mup"]["d_head"] = 32  # 8 heads × 32 ≠ 128
    assert hf.config_dict(t)["head_dim"] == 32


@pytest.mark.parametrize(("field", "value"), [("norm", "layernorm"), ("positions", "learned"),
                                              ("mlp", "gelu")])
def test_architecture_granite_cannot_express_is_refused(field, value):
    with pytest.raises(hf.NotExpressible, match=f"model.{field}"):
        hf.config_dict(small_target(**{field: value}))


def test_without_transformers_hf_is_skipped_with_the_install_hint(tmp_path, monkeypatch):
    monkeypatch.setattr(hf, "transformers_or_none", lambda: None)
    a = Archive(tmp_path)
    a.create_run("r", fingerprint="f00d")
    note = hf.write_config(a, "r", small_target())
    assert "pip install -e '.[hf]'" in note
    assert not (tmp_path / "r" / "hf").exists()


# ---- with transformers ----------------------------------------------------------------------
def test_written_config_loads_with_autoconfig(tmp_path, transformers):
    t = small_target(tied_embeddings=True)
    a = Archive(tmp_path)
    a.create_run("r", fingerprint="f00d")
    assert hf.write_config(a, "r", t) is None
    raw = json.loads((tmp_path / "r" / "hf" / "config.json").read_text())
    assert raw["model_type"] == "granite"
    cfg = transformers.AutoConfig.from_pretrained(tmp_path / "r" / "hf")
    assert type(cfg).__name__ == "GraniteConfig"
    want = hf.config_dict(t)
    for key in ("hidden_size", "num_hidden_layers", "vocab_size", "embedding_multiplier",
                "attention_multiplier", "logits_scaling", "initializer_range",
                "tie_word_embeddings", "rms_norm_eps"):
        assert getattr(cfg, key) == pytest.approx(want[key]), key


def test_reduced_granite_keeps_the_multipliers_of_target_yaml(transformers):
    t = small_target()
    cfg = hf.granite_config(t, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                            num_attention_heads=4, num_key_value_heads=2)
    model = transformers.GraniteForCausalLM(cfg)
    assert model.model.embedding_multiplier == t["mup"]["input_mult"]
    assert model.model.layers[0].self_attn.scaling == pytest.approx(t["mup"]["attn_scale"])
    assert 1 / model.config.logits_scaling == pytest.approx(t["mup"]["logits_scale"])
    assert model.model.layers[0].residual_multiplier == 1.0
    assert model.lm_head.weight.shape == (256, 64) and len(model.model.layers) == 1


def test_granite_divides_logits_by_logits_scaling(transformers):
    """The convention config_dict relies on, measured on the installed transformers."""
    t = small_target()
    kw = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
          "num_attention_heads": 2, "num_key_value_heads": 2}
    tokens = torch.randint(0, 256, (1, 8), generator=torch.Generator().manual_seed(0))
    one, four = (transformers.GraniteForCausalLM(hf.granite_config(t, logits_scaling=s, **kw))
                 for s in (1.0, 4.0))
    four.load_state_dict(one.state_dict())  # same weights, only the config differs
    with torch.no_grad():
        torch.testing.assert_close(four(tokens).logits, one(tokens).logits / 4.0)


def test_a_sweep_writes_a_loadable_hf_config(tmp_path, transformers):
    """End to end, the cheapest sweep (one trial a stage, no validation): hf/ beside target.yaml."""
    stages = [f"stages.stage.{s}.trials=1" for s in ("lr", "batch_size", "warmup")]
    sweep(compose_cfg([*TINY, *stages, "validation.enabled=false",
                       f"archive_dir={tmp_path / 'sweeps'}"]))
    run_dir = only_run(tmp_path / "sweeps")
    target = yaml.safe_load((run_dir / "target.yaml").read_text())
    cfg = transformers.AutoConfig.from_pretrained(run_dir / "hf")
    assert cfg.hidden_size == target["model"]["d_model"] == 256  # conf/model/tiny.yaml
    assert cfg.embedding_multiplier == target["mup"]["input_mult"]
    assert cfg.logits_scaling == pytest.approx(1 / target["mup"]["logits_scale"])
    # the README's five lines, on this run
    target = apply.load_target(run_dir)
    model = hf.granite_model(run_dir)
    apply.init_(model, target, seed=0)
    opt = torch.optim.AdamW(apply.param_groups(model, target), betas=(0.9, 0.95))
    assert sum(len(g["params"]) for g in opt.param_groups) == len(list(model.parameters()))


@pytest.mark.parametrize("name", ["1b", "3b", "7b", "tiny"])
def test_every_shipped_model_gives_a_granite_config(name, transformers):
    """conf/model/*.yaml as emitted: Granite accepts them and keeps shapes and tying."""
    model = dataclasses.asdict(as_config(compose([f"model={name}"])).model)
    cfg = hf.granite_config(small_target(**model))
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.vocab_size) == (
        model["d_model"], model["n_layers"], model["vocab_size"])
    assert cfg.tie_word_embeddings == model["tied_embeddings"]
    assert cfg.rms_norm_eps == model.get("norm_eps", hf.DEFAULT_NORM_EPS)


def test_granite_multiplies_both_branches_by_the_residual_multiplier(transformers):
    """target.yaml's CompleteP multiplier lands in residual_multiplier, and the installed Granite
    applies it to the attention *and* the MLP branch: layer out = x + r·attn + r·mlp."""
    t = small_target(n_layers=4, proxy={"depth_alpha": 1.0, "base_depth": 1, "n_layers": 1})
    assert t["mup"]["residual_mult"] == pytest.approx(0.25)
    cfg = hf.granite_config(t, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                            num_attention_heads=4, num_key_value_heads=2)
    assert cfg.residual_multiplier == pytest.approx(0.25)
    model = transformers.GraniteForCausalLM(cfg)
    layer, seen = model.model.layers[0], {}

    def layer_hook(module, args, kwargs, out):
        seen["x"] = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]
        seen["out"] = out[0] if isinstance(out, tuple) else out

    layer.self_attn.register_forward_hook(lambda m, a, out: seen.__setitem__("attn", out[0]))
    layer.mlp.register_forward_hook(lambda m, a, out: seen.__setitem__("mlp", out))
    layer.register_forward_hook(layer_hook, with_kwargs=True)
    with torch.no_grad():
        model(torch.randint(0, 256, (2, 8), generator=torch.Generator().manual_seed(0)))
    assert seen["attn"].abs().sum() > 0 and seen["mlp"].abs().sum() > 0
    torch.testing.assert_close(seen["out"], seen["x"] + 0.25 * seen["attn"] + 0.25 * seen["mlp"])


def test_a_users_own_transformers_import_works_in_this_venv():
    """The README's install leaves no torchvision built for another torch (mup declares it but
    never imports it): a user's trainer script can `import transformers` itself."""
    pytest.importorskip("transformers")
    done = subprocess.run([sys.executable, "-c", "from transformers import GraniteForCausalLM"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr.strip().splitlines()[-1:]
