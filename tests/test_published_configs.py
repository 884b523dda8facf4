"""Published config.json files as a team's copy holds them (every field the hub's file carries:
token ids, dtype, cache, the config class's defaults left out where the file leaves them out),
beyond the one per family in test_hf_families: each supported one maps, emits a target.yaml
whose parameter count is the model card's, an hf/config.json transformers loads, and an HF model
whose every parameter `transfer.apply` groups; an unsupported family is one line, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers_sweep import TINY, compose_cfg
from helpers_target import emitted

from transfer.archive import Archive
from transfer.cli.sweep import sweep
from transfer.core.compose import as_config, compose
from transfer.core.errors import UserError
from transfer.outputs import apply, hf

CONFIGS = Path(__file__).parent / "configs"
# the model cards' parameter counts (billions; Gemma 3 12B's text model only, the card's 12B
# holds its vision tower); None: a variant written for a field, not a published model
CARD = {"llama3.1-8b": 8.03, "llama2-7b": 6.74, "smollm2-1.7b": 1.71, "llama-dynamic": None,
        "qwen2.5-7b": 7.62, "qwen2.5-0.5b": 0.494, "qwen2.5-1m-yarn": 7.62, "qwen3-0.6b": 0.596,
        "qwen3-8b-layer-types": 8.19, "gemma3-1b": 1.00, "gemma3-270m-layer-types": 0.268,
        "gemma3-12b-mm": None, "mistral-7b-v0.3": 7.25, "mistral-nemo": 12.25,
        "olmo2-1b": 1.48, "olmo2-13b": 13.72, "smollm3-3b-full": 3.08, "gemma-2b": 2.51,
        "gemma-1.1-7b": 8.54, "granite-3.3-8b": None,  # Granite's card: "8B"
        "olmo3-7b": 7.30, "ministral3-3b-mm": 3.43}  # Ministral 3 3B: "3.4B language model"
REFUSED = {"phi3-mini": "phi3", "mixtral": "mixtral", "qwen3-30b-a3b-moe": "qwen3_moe"}
SMALL_HF = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, head_dim=16)


def test_every_file_is_named_here():
    assert sorted(p.stem for p in CONFIGS.glob("*.json")) == sorted([*CARD, *REFUSED])


def overrides(name: str) -> list[str]:
    return ["model=hf", f"model.config={CONFIGS / f'{name}.json'}", "model.train_tokens=1e12"]


@pytest.mark.parametrize("name", sorted(CARD))
def test_a_published_config_gives_a_target_an_hf_config_and_grouped_parameters(
        name, tmp_path, transformers):
    t = emitted(overrides(name))
    raw = json.loads((CONFIGS / f"{name}.json").read_text(encoding="utf-8"))
    text = raw.get("text_config", raw)
    assert t["model"]["d_model"] == text["hidden_size"]
    assert t["model"]["n_layers"] == text["num_hidden_layers"]
    if CARD[name] is not None:
        assert t["model"]["n_params"] / 1e9 == pytest.approx(CARD[name], rel=0.01)
    a = Archive(tmp_path / "sweeps")
    a.create_run("r", fingerprint="f00d")
    assert hf.write_config(a, "r", t) is None
    cfg = transformers.AutoConfig.from_pretrained(tmp_path / "sweeps" / "r" / "hf")
    assert cfg.hidden_size == t["model"]["d_model"]
    model = transformers.AutoModelForCausalLM.from_config(hf.hf_config(t, **SMALL_HF))
    assigned = apply.assign(model, t, strict=False)
    assert len(assigned) == len(list(model.parameters()))
    ids = [id(p) for g in apply.param_groups(model, t, strict=False) for p in g["params"]]
    assert sorted(ids) == sorted(id(p) for p in model.parameters())  # each exactly once


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_an_unsupported_family_is_one_line_and_exit_2(name, tmp_path, capsys, transformers):
    with pytest.raises(UserError, match=f"model_type '{REFUSED[name]}'"):
        as_config(compose(overrides(name)))
    code = sweep(compose_cfg([*TINY[1:], *overrides(name), f"archive_dir={tmp_path / 's'}"]))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and REFUSED[name] in err[0]
    assert not (tmp_path / "s").exists()


def test_a_granite_config_json_maps_as_llama_and_says_which_multipliers_it_held(transformers):
    t = emitted(overrides("granite-3.3-8b"))
    m = t["model"]
    assert (m["family"], m["mlp"], m["d_model"], m["n_kv_heads"]) == ("granite", "swiglu", 4096, 8)
    source = as_config(compose(overrides("granite-3.3-8b"))).model.source
    assert "embedding_multiplier 12, attention_multiplier 0.0078125" in source
    assert "residual_multiplier 0.22, logits_scaling 16" in source
    assert t["model"]["n_params"] / 1e9 == pytest.approx(8.17, rel=0.01)  # counted from its shapes


def test_a_granite_config_json_gets_llamas_rope_scaling_check(tmp_path, transformers):
    raw = json.loads((CONFIGS / "granite-3.3-8b.json").read_text(encoding="utf-8"))
    raw["rope_scaling"] = {"rope_type": "longrope", "factor": 4.0, "short_factor": [1.0] * 64,
                           "long_factor": [1.0] * 64, "original_max_position_embeddings": 4096}
    (tmp_path / "config.json").write_text(json.dumps(raw), encoding="utf-8")
    with pytest.raises(UserError, match="rope_scaling=.*of a type the proxies do not know"):
        as_config(compose(["model=hf", f"model.config={tmp_path}", "model.train_tokens=1e12"]))


def test_the_hf_config_json_a_run_writes_is_read_back_as_its_target(tmp_path, transformers):
    """This tool's own hf/config.json (a GraniteConfig) as a model=hf target: the same shapes
    and features, and the μP multipliers it holds named in `source`, not carried over."""
    t = emitted(["model=3b"])
    a = Archive(tmp_path / "sweeps")
    a.create_run("r", fingerprint="f00d")
    assert hf.write_config(a, "r", t) is None
    read_back = ["model=hf", f"model.config={tmp_path / 'sweeps' / 'r' / 'hf'}",
                 f"model.train_tokens={as_config(compose(['model=3b'])).model.train_tokens}"]
    back = emitted(read_back)["model"]
    for key in ("d_model", "n_layers", "n_heads", "n_kv_heads", "d_ff", "vocab_size",
                "tied_embeddings", "rope_theta", "n_params"):
        assert back[key] == t["model"][key], key
    assert back["family"] == "granite"
    assert "not carried over" in as_config(compose(read_back)).model.source
