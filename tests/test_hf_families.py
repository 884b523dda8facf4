"""The 2025-26 families through `model=hf` (transfer.core.hf_families): Mistral, Qwen3, OLMo 2
and 3, Gemma 3, SmolLM3 and Ministral 3 (and Gemma 1, which CodeGemma shares), each from its
published config.json to the proxies that keep its features, target.yaml, an hf/config.json
transformers builds the family's model from, and `transfer.apply` grouping every parameter of
that model."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
import torch
import torch.nn.functional as F
from helpers_sweep import TINY, compose_cfg
from helpers_target import emitted, small_target

from proxies import TransformerFamily
from proxies.layers import rope_tables
from transfer.archive import Archive
from transfer.cli.sweep import sweep
from transfer.core.compose import as_config, compose
from transfer.core.cost import target_params
from transfer.core.errors import UserError
from transfer.outputs import apply, hf
from transfer.search.family import plan_proxies
from transfer.search.trainer import TrainSpec, make_optimizer

# The published config.json files, the fields a team's copy holds (token ids and dtype left
# out): mistralai/Mistral-7B-v0.1, Qwen/Qwen3-4B-Base, allenai/OLMo-2-1124-7B,
# allenai/Olmo-3-1025-7B, google/gemma-3-4b-pt (multimodal: the text model in text_config, the
# rest Gemma3TextConfig's defaults), mistralai/Ministral-3-3B-Base-2512 (multimodal too) and
# HuggingFaceTB/SmolLM3-3B.
CONFIGS = {
    "mistral": {
        "model_type": "mistral", "architectures": ["MistralForCausalLM"], "hidden_size": 4096,
        "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
        "num_key_value_heads": 8, "hidden_act": "silu", "max_position_embeddings": 32768,
        "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "sliding_window": 4096,
        "tie_word_embeddings": False, "vocab_size": 32000},
    "qwen3": {
        "model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"], "attention_bias": False,
        "head_dim": 128, "hidden_act": "silu", "hidden_size": 2560, "intermediate_size": 9728,
        "max_position_embeddings": 32768, "max_window_layers": 36, "num_attention_heads": 32,
        "num_hidden_layers": 36, "num_key_value_heads": 8, "rms_norm_eps": 1e-6,
        "rope_scaling": None, "rope_theta": 1000000, "sliding_window": None,
        "tie_word_embeddings": True, "use_sliding_window": False, "vocab_size": 151936},
    "olmo2": {
        "model_type": "olmo2", "architectures": ["Olmo2ForCausalLM"], "attention_bias": False,
        "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 11008,
        "max_position_embeddings": 4096, "num_attention_heads": 32, "num_hidden_layers": 32,
        "num_key_value_heads": 32, "rms_norm_eps": 1e-6, "rope_scaling": None,
        "rope_theta": 500000, "tie_word_embeddings": False, "vocab_size": 100352},
    "gemma3": {
        "model_type": "gemma3", "architectures": ["Gemma3ForConditionalGeneration"],
        "text_config": {
            "model_type": "gemma3_text", "hidden_size": 2560, "intermediate_size": 10240,
            "num_hidden_layers": 34, "num_attention_heads": 8, "num_key_value_heads": 4,
            "head_dim": 256, "vocab_size": 262208, "query_pre_attn_scalar": 256,
            "sliding_window": 1024, "sliding_window_pattern": 6, "rope_theta": 1000000.0,
            "rope_local_base_freq": 10000.0, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
            "max_position_embeddings": 131072, "rms_norm_eps": 1e-6,
            "hidden_activation": "gelu_pytorch_tanh", "attn_logit_softcapping": None,
            "final_logit_softcapping": None}},
    "smollm3": {
        "model_type": "smollm3", "architectures": ["SmolLM3ForCausalLM"], "attention_bias": False,
        "hidden_act": "silu", "hidden_size": 2048, "intermediate_size": 11008,
        "max_position_embeddings": 65536, "mlp_bias": False, "num_attention_heads": 16,
        "num_hidden_layers": 36, "num_key_value_heads": 4, "rms_norm_eps": 1e-6,
        "rope_theta": 5000000.0, "no_rope_layer_interval": 4,
        "no_rope_layers": [0 if (i + 1) % 4 == 0 else 1 for i in range(36)],
        "tie_word_embeddings": True, "use_sliding_window": False, "vocab_size": 128256},
    # allenai/Olmo-3-1025-7B: OLMo 2's layer, 3 of 4 layers local, YaRN on the global ones
    "olmo3": {
        "model_type": "olmo3", "architectures": ["Olmo3ForCausalLM"], "attention_bias": False,
        "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 11008,
        "max_position_embeddings": 65536, "num_attention_heads": 32, "num_hidden_layers": 32,
        "num_key_value_heads": 32, "rms_norm_eps": 1e-6, "rope_theta": 500000,
        "rope_scaling": {"rope_type": "yarn", "factor": 8.0,
                         "original_max_position_embeddings": 8192, "beta_fast": 32.0,
                         "beta_slow": 1.0, "attention_factor": 1.2079441541679836},
        "sliding_window": 4096,
        "layer_types": ["full_attention" if (i + 1) % 4 == 0 else "sliding_attention"
                        for i in range(32)],
        "tie_word_embeddings": False, "vocab_size": 100278},
    # Ministral-8B-Instruct-2410's shapes as transformers' MinistralConfig writes them (its
    # hub file says model_type mistral, one window on every layer): every 4th layer global
    "ministral": {
        "model_type": "ministral", "architectures": ["MinistralForCausalLM"],
        "hidden_size": 4096, "intermediate_size": 12288, "num_hidden_layers": 36,
        "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
        "hidden_act": "silu", "max_position_embeddings": 32768, "rms_norm_eps": 1e-5,
        "rope_theta": 100000000.0, "sliding_window": 32768,
        "layer_types": ["full_attention" if (i + 1) % 4 == 0 else "sliding_attention"
                        for i in range(36)],
        "tie_word_embeddings": False, "vocab_size": 131072},
    # mistralai/Ministral-3-3B-Base-2512 (multimodal: the text model in text_config)
    "ministral3": {
        "model_type": "mistral3", "architectures": ["Mistral3ForConditionalGeneration"],
        "text_config": {
            "model_type": "ministral3", "hidden_size": 3072, "intermediate_size": 9216,
            "num_hidden_layers": 26, "num_attention_heads": 32, "num_key_value_heads": 8,
            "head_dim": 128, "hidden_act": "silu", "max_position_embeddings": 262144,
            "rms_norm_eps": 1e-5, "sliding_window": None, "tie_word_embeddings": True,
            "vocab_size": 131072,
            "rope_parameters": {"rope_type": "yarn", "type": "yarn", "rope_theta": 1000000.0,
                                "factor": 16.0, "original_max_position_embeddings": 16384,
                                "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0,
                                "mscale_all_dim": 1.0, "llama_4_scaling_beta": 0.1}}},
    # google/gemma-7b (Gemma 1): its legacy hidden_act "gelu" is GemmaConfig's tanh GELU
    "gemma": {
        "model_type": "gemma", "architectures": ["GemmaForCausalLM"], "attention_bias": False,
        "head_dim": 256, "hidden_act": "gelu", "hidden_size": 3072, "intermediate_size": 24576,
        "max_position_embeddings": 8192, "num_attention_heads": 16, "num_hidden_layers": 28,
        "num_key_value_heads": 16, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
        "vocab_size": 256000},
}
# each family's own features as model=hf maps them (everything else at ModelConf's defaults)
FEATURES = {
    "mistral": {"family": "mistral", "mlp": "swiglu", "sliding_window": 4096},
    "qwen3": {"family": "qwen3", "qk_norm": "head", "d_head": 128, "tied_embeddings": True},
    "olmo2": {"family": "olmo2", "qk_norm": "proj", "reordered_norm": True},
    "gemma3": {"family": "gemma3_text", "mlp": "geglu", "qk_norm": "head", "d_head": 256,
               "norm_unit_offset": True, "sandwich_norm": True, "embedding_normalizer": True,
               "query_pre_attn_scalar": 256.0, "sliding_window": 1024,
               "sliding_window_pattern": 6, "rope_theta": 1e6, "rope_local_theta": 1e4,
               "rope_scaling": {"factor": 8.0, "rope_type": "linear"}, "attn_softcap": None,
               "logit_softcap": None},
    "smollm3": {"family": "smollm3", "no_rope_interval": 4, "rope_theta": 5e6},
    "olmo3": {"family": "olmo3", "qk_norm": "proj", "reordered_norm": True,
              "sliding_window": 4096, "sliding_window_pattern": 4, "rope_theta": 5e5,
              "seq_len": 8192,
              "rope_scaling": {"rope_type": "yarn", "factor": 8.0,
                               "original_max_position_embeddings": 8192, "beta_fast": 32.0,
                               "beta_slow": 1.0, "attention_factor": 1.2079441541679836}},
    "ministral": {"family": "ministral", "mlp": "swiglu", "rope_theta": 1e8,
                  "sliding_window": 32768, "sliding_window_pattern": 4},
    "ministral3": {"family": "ministral3", "mlp": "swiglu", "d_head": 128, "seq_len": 16384,
                   "tied_embeddings": True, "rope_theta": 1e6},
    "gemma": {"family": "gemma", "mlp": "geglu", "d_head": 256, "norm_unit_offset": True,
              "embedding_normalizer": True, "tied_embeddings": True},
}
# the HF model class hf/config.json names
CLASSES = {"mistral": "MistralForCausalLM", "qwen3": "Qwen3ForCausalLM",
           "olmo2": "Olmo2ForCausalLM", "gemma3": "Gemma3ForCausalLM",
           "smollm3": "SmolLM3ForCausalLM", "gemma": "GemmaForCausalLM",
           "olmo3": "Olmo3ForCausalLM", "ministral": "MinistralForCausalLM",
           "ministral3": "Ministral3ForCausalLM"}
SMALL_HF = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2)



def write_config(tmp_path, name: str, **changes) -> list[str]:
    """CONFIGS[name] (with `changes`) as a config.json; the model=hf overrides that read it."""
    raw = {**CONFIGS[name], **changes}
    (tmp_path / "config.json").write_text(json.dumps(raw), encoding="utf-8")
    return ["model=hf", f"model.config={tmp_path}", "model.train_tokens=1e12"]


def model_of(overrides: list[str]) -> dict:
    return dataclasses.asdict(as_config(compose(overrides)).model)


# ---- config.json → model.* -------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_config_json_maps_each_familys_features(name, tmp_path, transformers):
    m = model_of(write_config(tmp_path, name))
    raw = CONFIGS[name].get("text_config", CONFIGS[name])
    assert (m["d_model"], m["n_layers"], m["n_heads"], m["vocab_size"]) == (
        raw["hidden_size"], raw["num_hidden_layers"], raw["num_attention_heads"],
        raw["vocab_size"])
    for key, want in FEATURES[name].items():
        assert m[key] == want, key
    off = {"qk_norm": None, "reordered_norm": False, "sliding_window_pattern": None,
           "rope_local_theta": None, "no_rope_interval": None, "sliding_window": None}
    for key, default in off.items():  # a feature the family lacks stays off
        if key not in FEATURES[name]:
            assert m[key] == default, key


def test_a_config_json_that_leaves_the_class_defaults_out_maps_as_the_filled_one(tmp_path,
                                                                               transformers):
    """google/gemma-3-4b-pt's config.json as published: its text_config holds only what differs
    from Gemma3TextConfig's defaults (no heads, vocabulary, context or rope bases), which
    AutoConfig fills in; the sizes are checked after that, so it maps as the filled copy."""
    published = {k: v for k, v in CONFIGS["gemma3"].items() if k != "text_config"}
    published["text_config"] = {
        "hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text",
        "num_hidden_layers": 34, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
        "sliding_window": 1024}
    published["vision_config"] = {
        "hidden_size": 1152, "image_size": 896, "intermediate_size": 4304,
        "model_type": "siglip_vision_model", "num_attention_heads": 16, "num_hidden_layers": 27,
        "patch_size": 14, "vision_use_head": False}
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "config.json").write_text(json.dumps(published), encoding="utf-8")
    got = model_of(["model=hf", f"model.config={tmp_path / 'a'}", "model.train_tokens=1e12"])
    want = model_of(write_config(tmp_path, "gemma3"))
    assert {k: v for k, v in got.items() if k not in ("config", "source")} == {
        k: v for k, v in want.items() if k not in ("config", "source")}
    # a size the file does hold is still checked, and one AutoConfig fills in must still fit
    published["text_config"]["num_attention_heads"] = 0
    (tmp_path / "a" / "config.json").write_text(json.dumps(published), encoding="utf-8")
    with pytest.raises(UserError, match="num_attention_heads=0"):
        model_of(["model=hf", f"model.config={tmp_path / 'a'}", "model.train_tokens=1e12"])
    published["text_config"].update(num_attention_heads=8, num_key_value_heads=3)
    (tmp_path / "a" / "config.json").write_text(json.dumps(published), encoding="utf-8")
    with pytest.raises(UserError, match="not divisible by num_key_value_heads=3"):
        model_of(["model=hf", f"model.config={tmp_path / 'a'}", "model.train_tokens=1e12"])


@pytest.mark.parametrize(("name", "changes", "says"), [
    ("smollm3", {"no_rope_layers": [1, 0, 1, 1] * 9}, "no_rope_layers"),
    ("qwen3", {"use_sliding_window": True, "sliding_window": 4096, "max_window_layers": 28},
     "layer_types"),
    ("olmo2", {"hidden_act": "gelu"}, "hidden_act='gelu'"),
    # Ministral 3's query scale β must be a number (the multimodal file: its text_config)
    ("ministral3", {"text_config": {**CONFIGS["ministral3"]["text_config"], "rope_parameters": {
        **CONFIGS["ministral3"]["text_config"]["rope_parameters"],
        "llama_4_scaling_beta": "0.1"}}}, "llama_4_scaling_beta"),
])
def test_a_pattern_the_proxies_cannot_keep_is_one_line_and_exit_2(name, changes, says, tmp_path,
                                                                  transformers, capsys):
    (tmp_path / "in").mkdir()
    overrides = write_config(tmp_path / "in", name, **changes)
    with pytest.raises(UserError, match=says):
        as_config(compose(overrides))
    code = sweep(compose_cfg([*TINY[1:], *overrides, f"archive_dir={tmp_path / 'sweeps'}"]))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and says.split("=")[0] in err[0]
    assert not (tmp_path / "sweeps").exists()


# ---- target.yaml and hf/config.json ----------------------------------------------------------
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_config_json_gives_a_target_yaml_and_a_loadable_hf_config(name, tmp_path,
                                                                  transformers):
    t = emitted(write_config(tmp_path, name))
    for key, want in FEATURES[name].items():
        if want and key not in ("d_head", "mlp", "rope_theta", "rope_scaling"):
            assert t["model"][key] == want, key
    a = Archive(tmp_path / "sweeps")
    a.create_run("r", fingerprint="f00d")
    assert hf.write_config(a, "r", t) is None
    cfg = transformers.AutoConfig.from_pretrained(tmp_path / "sweeps" / "r" / "hf")
    assert cfg.architectures == [CLASSES[name]] and type(cfg).__name__ == hf.FAMILY_CLASSES[
        t["model"]["family"]][0]
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.head_dim if hasattr(cfg, "head_dim")
            else cfg.hidden_size // cfg.num_attention_heads) == (
        t["model"]["d_model"], t["model"]["n_layers"], t["model"]["d_head"])
    small = transformers.AutoModelForCausalLM.from_config(
        hf.hf_config(t, **SMALL_HF, head_dim=16))
    assert type(small).__name__ == CLASSES[name]


def test_each_familys_own_fields_in_hf_config(tmp_path, transformers):
    """What transformers reads back: Mistral's window; Qwen3's head_dim; Gemma 3's layer kinds,
    its two rotary bases and μP's attention scale; SmolLM3's NoPE layers."""
    def load(name):
        t = emitted(write_config(tmp_path, name))
        return t, hf.hf_config(t)

    t, c = load("mistral")
    assert c.sliding_window == 4096
    t, c = load("qwen3")
    assert c.head_dim == 128 and not c.use_sliding_window and c.attention_bias is False
    t, c = load("gemma3")
    kinds = c.layer_types
    assert [i for i, k in enumerate(kinds) if k == "full_attention"] == [5, 11, 17, 23, 29]
    assert c.rope_parameters["sliding_attention"]["rope_theta"] == 1e4
    assert c.rope_parameters["full_attention"]["rope_theta"] == 1e6
    assert c.rope_parameters["full_attention"]["factor"] == 8.0
    assert c.query_pre_attn_scalar ** -0.5 == pytest.approx(t["mup"]["attn_scale"])
    assert c.sliding_window == 1024
    t, c = load("smollm3")
    assert c.no_rope_layers == CONFIGS["smollm3"]["no_rope_layers"]
    t, c = load("olmo3")  # YaRN on the global layers only, the context it extends to
    assert c.layer_types == CONFIGS["olmo3"]["layer_types"] and c.sliding_window == 4096
    assert c.rope_parameters["full_attention"]["rope_type"] == "yarn"
    assert c.rope_parameters["full_attention"]["factor"] == 8.0
    assert c.rope_parameters["sliding_attention"] == {"rope_type": "default",
                                                      "rope_theta": 500000.0}
    assert (t["model"]["seq_len"], c.max_position_embeddings) == (8192, 65536)
    t, c = load("ministral")
    assert c.layer_types == CONFIGS["ministral"]["layer_types"] and c.sliding_window == 32768
    t, c = load("ministral3")  # the query scaling's β, the context the YaRN extends to
    assert c.rope_parameters["llama_4_scaling_beta"] == 0.1
    assert c.rope_parameters["original_max_position_embeddings"] == 16384
    assert (t["model"]["seq_len"], c.max_position_embeddings) == (16384, 262144)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_apply_groups_every_parameter_of_the_familys_model(name, tmp_path, transformers):
    t = emitted(write_config(tmp_path, name))
    model = transformers.AutoModelForCausalLM.from_config(hf.hf_config(t, **SMALL_HF,
                                                                       head_dim=16))
    assigned = apply.assign(model, t, strict=False)
    assert len(assigned) == len(list(model.parameters()))
    by_name = {a.name: a for a in assigned}
    qk = [n for n in by_name if "q_norm" in n or "k_norm" in n]
    assert bool(qk) == bool(FEATURES[name].get("qk_norm"))  # Qwen3, OLMo 2, Gemma 3 have them
    for n in qk:  # vectors in the block, as the other norm gains
        assert by_name[n].role == "qk_norm" and by_name[n].group["name"] == "vector_block"
    groups = apply.param_groups(model, t, strict=False)
    ids = [id(p) for g in groups for p in g["params"]]
    assert sorted(ids) == sorted(id(p) for p in model.parameters())  # each exactly once
    apply.init_(model, t, strict=False)
    s, r = t["mup"]["logits_scale"], t["mup"]["residual_mult"]
    gemma = name in ("gemma3", "gemma")  # (1 + w) gains
    gain = model.model.norm.weight + (1.0 if gemma else 0.0)
    torch.testing.assert_close(gain, torch.full_like(gain, s))  # the readout input × s
    layer = model.model.layers[0]
    assert layer.self_attn.scaling == pytest.approx(t["mup"]["attn_scale"])
    if name in ("gemma3", "olmo2"):  # a norm after each branch holds the residual multiplier
        post = layer.post_attention_layernorm.weight + (1.0 if gemma else 0.0)
        torch.testing.assert_close(post, torch.full_like(post, r))
    for n in qk:
        w = dict(model.named_parameters())[n]
        torch.testing.assert_close(w, torch.full_like(w, 0.0 if gemma else 1.0))  # gain 1
    if gemma:
        assert model.model.embed_tokens.embed_scale.item() == pytest.approx(
            t["mup"]["embedding_multiplier"])


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_target_param_count_is_the_hf_models(name, transformers):
    """cost.target_params counts what the family's HF model holds (q/k norms, OLMo 2's two
    norms a block instead of Llama's two before the branches)."""
    features = {k: v for k, v in FEATURES[name].items()
                if k not in ("d_head", "rope_theta", "rope_scaling", "tied_embeddings")}
    t = small_target(**features,
                     **({"d_head": 32} if name in ("qwen3", "gemma3", "gemma") else {}))
    model = transformers.AutoModelForCausalLM.from_config(hf.hf_config(t))
    assert t["model"]["n_params"] == sum(p.numel() for p in model.parameters())
    assert target_params(t["model"])["n_params"] == t["model"]["n_params"]


# ---- the proxies keep each feature -----------------------------------------------------------
SMALL = dict(n_layers=2, d_head=16, seq_len=32, base_width=32)


def tokens(seed: int = 0) -> torch.Tensor:
    return torch.randint(0, 256, (2, 32), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_plan_passes_each_familys_features_to_the_proxies(name, tmp_path, transformers):
    d = plan_proxies(as_config(compose(write_config(tmp_path, name)))).derived
    assert d.get("qk_norm") == FEATURES[name].get("qk_norm")
    assert d.get("reordered_norm", False) == FEATURES[name].get("reordered_norm", False)
    assert d.get("no_rope_interval") == FEATURES[name].get("no_rope_interval")
    assert d.get("rope_local_theta") == FEATURES[name].get("rope_local_theta")
    assert "sliding_window" not in d  # 1024 and 4096 tokens: wider than the proxies' 128


@pytest.mark.parametrize("changes", [
    dict(qk_norm="head"), dict(qk_norm="proj", reordered_norm=True),
    dict(qk_norm="head", mlp="geglu", norm_unit_offset=True, sandwich_norm=True,
         sliding_window=8, sliding_window_pattern=2, rope_local_theta=100.0),
    dict(no_rope_interval=2, sliding_window=8)],
    ids=["qwen3", "olmo2", "gemma3", "smollm3-window"])
def test_mup_equals_sp_at_base_width_with_the_new_features(changes):
    mu = TransformerFamily(**SMALL, parametrization="mup", readout_zero_init=False,
                           zero_init_query=False, **changes)
    sp = mu.replace(parametrization="sp", attn_mult=mu.attn_mult / math.sqrt(mu.d_head))
    outs = []
    for fam in (mu, sp):
        model = fam.build(fam.base_width)
        opt = make_optimizer(model, TrainSpec(width=model.width, lr=1e-2), fam.parametrization,
                             fam)
        x = tokens()
        F.cross_entropy(model(x[:, :-1]).flatten(0, 1), x[:, 1:].flatten()).backward()
        opt.step()
        with torch.no_grad():
            outs.append(model(x[:, :-1]))
    torch.testing.assert_close(outs[0], outs[1])


@pytest.mark.parametrize(("kind", "shape"), [("head", lambda w: 16), ("proj", lambda w: w)])
def test_qk_norm_gains_are_block_vectors_and_normalise_q_and_k(kind, shape):
    fam = TransformerFamily(**SMALL, qk_norm=kind, zero_init_query=False, norm_eps=1e-12)
    model, classes = fam.build(128), fam.param_classes(128)
    groups = {id(p): g for g in fam.param_groups(model, lr=1e-2) for p in g["params"]}
    params = dict(model.named_parameters())
    for n in ("blocks.0.attn.q_norm.weight", "blocks.0.attn.k_norm.weight"):
        assert classes[n].role == "qk_norm" and classes[n].kind == "vector"
        assert params[n].shape == (shape(128),) and torch.all(params[n] == 1)
        assert groups[id(params[n])]["lr"] == 1e-2  # 4× the base width: no 1/width_mult
    seen = {}
    model.blocks[0].attn.q_norm.register_forward_hook(lambda m, a, out: seen.update(q=out))
    with torch.no_grad():
        model.blocks[0].attn.q_norm.weight.fill_(3.0)
        model(tokens())
    rms = seen["q"].pow(2).mean(-1).sqrt()  # over head_dim, or over the whole projection
    torch.testing.assert_close(rms, torch.full_like(rms, 3.0), rtol=1e-3, atol=1e-3)


def test_reordered_norms_come_after_each_branch_and_none_before():
    fam = TransformerFamily(**SMALL, reordered_norm=True, zero_init_query=False)
    model = fam.build(64)
    block = model.blocks[0]
    assert not hasattr(block, "norm1") and not hasattr(block, "norm2")
    seen = {}
    hooks = [block.register_forward_pre_hook(lambda m, a: seen.update(x=a[0])),
             block.attn.register_forward_pre_hook(lambda m, a: seen.update(attn_in=a[0])),
             block.attn.register_forward_hook(lambda m, a, out: seen.update(a=out))]
    with torch.no_grad():
        block.post_norm1.weight.fill_(2.0)
        model(tokens())
    for h in hooks:
        h.remove()
    torch.testing.assert_close(seen["attn_in"], seen["x"])  # the branch sees x itself
    h = seen["x"] + block.residual_mult * block.post_norm1(seen["a"])
    with torch.no_grad():
        torch.testing.assert_close(block(seen["x"], model.rope_cos, model.rope_sin),
                                   h + block.residual_mult * block.post_norm2(block.mlp(h)))


def test_nope_layers_skip_rope_every_kth_layer():
    fam = TransformerFamily(**{**SMALL, "n_layers": 8}, no_rope_interval=4,
                            zero_init_query=False)
    model = fam.build(64)
    assert [b.attn.rope for b in model.blocks] == [True, True, True, False] * 2
    x = torch.randn(2, 32, 64, generator=torch.Generator().manual_seed(0))
    cos, sin = model.rope_cos, model.rope_sin
    with torch.no_grad():  # a NoPE layer ignores the rotary tables, a rotary layer does not
        for i, changes in ((3, False), (0, True)):
            attn = model.blocks[i].attn
            moved = not torch.allclose(attn(x, cos, sin), attn(x, cos.flip(0), sin.flip(0)))
            assert moved == changes, i


def test_gemma3_local_layers_rotate_with_the_local_base():
    fam = TransformerFamily(**{**SMALL, "n_layers": 6}, rope_theta=1e6, rope_local_theta=1e4,
                            sliding_window_pattern=6)
    model = fam.build(64)
    seen = []
    for block in model.blocks:
        block.attn.register_forward_pre_hook(lambda m, a: seen.append(a[1]))
    with torch.no_grad():
        model(tokens())
    local, glob = (rope_tables(32, 16, theta=t)[0] for t in (1e4, 1e6))
    for i, cos in enumerate(seen):
        torch.testing.assert_close(cos, glob if i == 5 else local, msg=f"layer {i}")


def test_a_window_shorter_than_the_context_limits_what_a_token_sees():
    """One layer, window 8: logits at position t depend on tokens t-7 .. t only; a window as
    long as the context is plain causal attention."""
    fam = TransformerFamily(**{**SMALL, "n_layers": 1}, sliding_window=8, zero_init_query=False,
                            readout_zero_init=False)
    x = tokens()
    y = x.clone()
    y[:, 0] = (y[:, 0] + 1) % 256  # change the first token only
    model = fam.build(64)
    with torch.no_grad():
        a, b = model(x), model(y)
    torch.testing.assert_close(a[:, 8:], b[:, 8:])  # beyond the window: untouched
    assert not torch.allclose(a[:, :8], b[:, :8])
    wide, plain = (fam.replace(sliding_window=w).build(64) for w in (32, None))
    with torch.no_grad():
        torch.testing.assert_close(wide(x), plain(x))


def test_emitted_provenance_lists_what_the_proxies_did_not_see(tmp_path, transformers):
    """A window wider than the proxies' context, Gemma 3's global layers and SmolLM3's NoPE
    layers beyond the stage proxies' depth: provenance.not_transferred; Gemma 3's normaliser and
    query_pre_attn_scalar: mup.family_changes, as Gemma 2's."""
    def names(t):
        return {x["name"] for x in t["provenance"]["not_transferred"]}

    g = emitted(write_config(tmp_path, "gemma3"))
    assert {"sliding_window", "sliding_window_pattern", "rope_scaling"} <= names(g)
    assert [c["name"] for c in g["mup"]["family_changes"]] == ["embedding_normalizer",
                                                               "query_pre_attn_scalar"]
    assert "no_rope_interval" in names(emitted(write_config(tmp_path, "smollm3")))
    assert "sliding_window" in names(emitted(write_config(tmp_path, "mistral")))
    short = emitted([*write_config(tmp_path, "mistral", sliding_window=64), "proxy.size=cpu"])
    assert "sliding_window" not in names(short)  # 64 < 128 tokens: the proxies keep it
    assert short["provenance"]["proxy"]["sliding_window"] == 64
    assert "family_changes" not in emitted(write_config(tmp_path, "qwen3"))["mup"]
