"""A target is checked before anything runs: every size from the command line (`model.*`) or a
config.json is positive and in range, heads divide the width and kv heads the heads. A bad value
is exit 2 with one line naming the field, and nothing is written."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers_sweep import TINY, compose_cfg

from transfer.cli.sweep import sweep
from transfer.core.hf_config import transformers_or_none

# model.<field>=<value> on the command line → what the one line must name
CLI_BAD = [
    ("model.d_model=0", "model.d_model=0"),
    ("model.n_layers=0", "model.n_layers=0"),
    ("model.n_heads=0", "model.n_heads=0"),
    ("model.n_kv_heads=0", "model.n_kv_heads=0"),
    ("model.n_kv_heads=3", "not divisible by model.n_kv_heads=3"),
    ("model.n_kv_heads=16", "not divisible by model.n_kv_heads=16"),
    ("model.d_model=250", "model.d_model=250 is not divisible by model.n_heads=8"),
    ("model.d_ff=-4", "model.d_ff=-4"),
    ("model.vocab_size=1", "model.vocab_size=1"),
    ("model.vocab_size=100000000", "model.vocab_size=100000000"),
    ("model.seq_len=0", "model.seq_len=0"),
    ("model.d_head=0", "model.d_head=0"),
    ("model.norm_eps=0", "model.norm_eps=0"),
    ("model.rope_theta=-1", "model.rope_theta=-1"),
    ("model.sliding_window=0", "model.sliding_window=0"),
    ("model.train_tokens=0", "model.train_tokens"),
    ("model.no_rope_interval=0", "model.no_rope_interval=0"),
    ("model.sliding_window_pattern=0", "model.sliding_window_pattern=0"),
    ("model.rope_local_theta=-5", "model.rope_local_theta=-5"),
    ("model.train_tokens=inf", "model.train_tokens must be a finite number"),  # trained, exit 1
    ("model.qk_norm=bogus", "model.qk_norm='bogus'; use one of null, head, proj"),
    ("model.norm=batchnorm", "model.norm='batchnorm'; use one of rmsnorm, layernorm"),
    ("model.positions=alibi", "model.positions='alibi'; use one of rope, learned"),
]


@pytest.mark.parametrize(("override", "says"), CLI_BAD)
def test_a_bad_size_on_the_command_line_is_exit_2_one_line_nothing_written(
        override, says, tmp_path, capsys):
    archive = tmp_path / "sweeps"
    code = sweep(compose_cfg([*TINY, override, f"archive_dir={archive}"]))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, err
    assert len(err) == 1 and says in err[0], err
    assert not archive.exists()


def good_config() -> dict:
    """A small Llama config.json as a team would hand it over."""
    return {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 256,
            "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 4,
            "intermediate_size": 1024, "vocab_size": 256, "max_position_embeddings": 128,
            "hidden_act": "silu", "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
            "tie_word_embeddings": False}


# config.json field=value → what the one line must name
JSON_BAD = [
    ({"hidden_size": 0}, "hidden_size=0"),
    ({"num_attention_heads": 0}, "num_attention_heads=0"),
    ({"num_hidden_layers": -2}, "num_hidden_layers=-2"),
    ({"intermediate_size": 0}, "intermediate_size=0"),
    ({"vocab_size": 0}, "vocab_size=0"),
    ({"vocab_size": 1}, "vocab_size=1 must be a whole number >= 2"),
    ({"max_position_embeddings": 0}, "max_position_embeddings=0"),
    ({"num_key_value_heads": 3}, "num_key_value_heads=3"),
    ({"hidden_size": 250}, "hidden_size=250 is not divisible"),
    ({"hidden_size": "256"}, "hidden_size='256'"),
    ({"head_dim": 0}, "head_dim=0"),
    # fields transformers 5's AutoConfig refuses by type (huggingface_hub's StrictDataclassError,
    # a traceback and exit 1 before), or that the mapping cannot convert
    ({"rms_norm_eps": None}, "Validation error for field 'rms_norm_eps'"),
    ({"tie_word_embeddings": "yes"}, "Validation error for field 'tie_word_embeddings'"),
    ({"rope_scaling": "linear"}, "could not be read by AutoConfig"),
    ({"rope_theta": "abc"}, "a field could not be read (ValueError"),
]


@pytest.mark.parametrize(("change", "says"), JSON_BAD)
def test_a_bad_size_in_a_config_json_is_exit_2_one_line_nothing_written(
        change, says, tmp_path, capsys):
    if transformers_or_none() is None:
        pytest.skip("pip install -e '.[hf]'")
    path = tmp_path / "in" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps({**good_config(), **change}))
    archive = tmp_path / "sweeps"
    code = sweep(compose_cfg([*TINY[1:], "model=hf", f"model.config={path}",
                              "model.train_tokens=1e9", f"archive_dir={archive}"]))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, err
    assert len(err) == 1 and says in err[0], err
    assert not archive.exists()


def test_the_good_config_json_passes_the_checks(tmp_path):
    """The base of the bad ones is itself accepted: each failure above is its one change."""
    if transformers_or_none() is None:
        pytest.skip("pip install -e '.[hf]'")
    from transfer.core.compose import as_config, compose
    from transfer.core.config import check_config

    path = tmp_path / "config.json"
    path.write_text(json.dumps(good_config()))
    cfg = as_config(compose(["model=hf", f"model.config={path}", "model.train_tokens=1e9"]))
    check_config(cfg)
    assert (cfg.model.d_model, cfg.model.n_kv_heads) == (256, 4)


def test_the_command_line_says_it_as_the_process_does(tmp_path):
    """`python -m transfer.sweep model=tiny model.d_model=0`: exit 2, one line, no traceback
    (it ended in a ZeroDivisionError, exit 1), and no archive."""
    done = subprocess.run([sys.executable, "-m", "transfer.sweep", "model=tiny",
                           "model.n_heads=0", "budget=smoke", f"archive_dir={tmp_path / 's'}"],
                          capture_output=True, text=True, cwd=tmp_path, check=False)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "error: model.n_heads=0 must be a whole number in [1, 4096]; fix the target "
        "(model.* or its config.json)"]
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize(("override", "says"), [
    ("model.d_model=64.5", "Error merging override model.d_model=64.5: Value '64.5' of type "
     "'float' could not be converted to Integer; fix it on the command line"),
    ("model.widht=64", "Could not override 'model.widht': Key 'widht' not in 'ModelConf'"),
])
def test_an_override_hydra_cannot_merge_is_one_line_and_exit_2(override, says, tmp_path):
    """A value of the wrong type or a key the schema lacks: Hydra's own report was several
    lines and exit 1; the CLI composes first and says it in one line."""
    done = subprocess.run([sys.executable, "-m", "transfer.sweep", "model=tiny", override,
                           "budget=smoke", f"archive_dir={tmp_path / 's'}"],
                          capture_output=True, text=True, cwd=tmp_path, check=False)
    assert done.returncode == 2, done.stderr
    err = done.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and says in err[0], err
    assert not (tmp_path / "s").exists()


def test_the_schemas_choices_are_the_proxies():
    """check_config's lists of norms, positions and q/k norms are what the built-in proxies
    build (kept in both places: the proxies' files are in the trial-deciding code's hash)."""
    from proxies import layers, transformer
    from transfer.core import config

    assert config.NORMS == transformer.NORMS and config.POSITIONS == transformer.POSITIONS
    assert config.QK_NORMS == layers.QK_NORMS and config.MLPS == transformer.MLPS
