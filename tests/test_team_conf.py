"""A team's own presets in the top-level conf/ (hydra_plugins/transfer_conf): `model=<name>` finds
conf/model/<name>.yaml in the folder the command runs from, the packaged configs stay the
defaults and win a clash, and a folder without conf/ composes as before, silently."""

from __future__ import annotations

import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from transfer.cli.clihelp import bad_group_option, groups
from transfer.core.compose import as_config, compose
from transfer.core.config import check_config

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "conf" / "model" / "ours.yaml"


def test_the_shipped_example_is_found_from_the_checkout(monkeypatch):
    monkeypatch.chdir(ROOT)
    cfg = as_config(compose(["model=ours"]))
    check_config(cfg)
    assert (cfg.model.name, cfg.model.d_model, cfg.model.n_layers) == ("ours", 2048, 24)
    assert "conf/model/ours.yaml" in cfg.model.source
    assert "ours" in groups()["model"] and bad_group_option(["model=ours"]) is None


def test_a_preset_written_to_conf_model_is_found_in_any_folder(tmp_path, monkeypatch):
    (tmp_path / "conf" / "model").mkdir(parents=True)
    text = EXAMPLE.read_text().replace("name: ours", "name: ours2").replace(
        "n_layers: 24", "n_layers: 12")
    (tmp_path / "conf" / "model" / "ours2.yaml").write_text(text)
    monkeypatch.chdir(tmp_path)
    cfg = as_config(compose(["model=ours2"]))
    assert (cfg.model.name, cfg.model.n_layers) == ("ours2", 12)
    assert as_config(compose([])).model.name == "3b"  # the packaged default is still it


def test_a_preset_that_names_a_config_json_maps_it_as_model_hf(tmp_path, monkeypatch,
                                                              transformers):
    """`config:` and `train_tokens:` in a team preset: the target read from that config.json
    (as model=hf reads it), under the preset's own name, so compare can take it."""
    (tmp_path / "conf" / "model").mkdir(parents=True)
    (tmp_path / "configs").mkdir()
    shutil.copy(ROOT / "tests" / "configs" / "olmo3-7b.json", tmp_path / "configs")
    (tmp_path / "conf" / "model" / "olmo3.yaml").write_text(
        "name: olmo3\nconfig: configs/olmo3-7b.json\ntrain_tokens: 5.9e+12\n")
    monkeypatch.chdir(tmp_path)
    got = as_config(compose(["model=olmo3"])).model
    want = as_config(compose(["model=hf", "model.config=configs/olmo3-7b.json",
                              "model.train_tokens=5.9e12"])).model
    assert (got.name, got.family, got.train_tokens) == ("olmo3", "olmo3", 5.9e12)
    assert {k: v for k, v in vars(got).items() if k != "name"} == {
        k: v for k, v in vars(want).items() if k != "name"}


def test_the_packaged_preset_wins_a_clash(tmp_path, monkeypatch):
    (tmp_path / "conf" / "model").mkdir(parents=True)
    shutil.copy(EXAMPLE, tmp_path / "conf" / "model" / "3b.yaml")
    monkeypatch.chdir(tmp_path)
    assert as_config(compose(["model=3b"])).model.d_model == 3072


def test_without_conf_nothing_changes_and_nothing_warns(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cfg = as_config(compose(["model=tiny"]))
    assert cfg.model.name == "tiny"
    assert "ours" not in groups()["model"]
    assert bad_group_option(["model=ours"]).startswith("unknown model 'ours'")


def test_the_command_line_finds_it(tmp_path):
    """`python -m transfer.sweep --cfg job model=ours` in a folder with conf/model/ours.yaml."""
    (tmp_path / "conf" / "model").mkdir(parents=True)
    shutil.copy(EXAMPLE, tmp_path / "conf" / "model")
    done = subprocess.run([sys.executable, "-m", "transfer.sweep", "--cfg", "job", "model=ours"],
                          capture_output=True, text=True, cwd=tmp_path, check=False)
    assert done.returncode == 0, done.stderr
    assert "\n  name: ours\n" in done.stdout and "d_model: 2048" in done.stdout


@pytest.mark.parametrize("bad", ["d_model: 0", "n_kv_heads: 3"])
def test_a_bad_team_preset_is_exit_2_one_line(bad, tmp_path):
    (tmp_path / "conf" / "model").mkdir(parents=True)
    key = bad.split(":")[0]
    text = "\n".join(bad if ln.startswith(key + ":") else ln
                     for ln in EXAMPLE.read_text().splitlines())
    (tmp_path / "conf" / "model" / "ours.yaml").write_text(text)
    done = subprocess.run([sys.executable, "-m", "transfer.sweep", "model=ours", "budget=smoke",
                           "archive_dir=sweeps"], capture_output=True, text=True, cwd=tmp_path,
                          check=False)
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and f"model.{key}" in done.stderr
    assert not (tmp_path / "sweeps").exists()
