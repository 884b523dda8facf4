"""transfer.outputs.summary: what a finished sweep prints."""

from __future__ import annotations

from transfer.outputs.emit import interval_spans
from transfer.outputs.summary import lr_line, not_transferred_line, saved_text


def test_not_transferred_line_names_target_yaml_items_in_order_once():
    target = {"provenance": {"not_transferred": [
        {"name": "weight_decay", "reason": "rule"}, {"name": "batch_size", "reason": "rule"},
        {"name": "proxy_shape", "reason": "a"}, {"name": "proxy_shape", "reason": "b"},
        {"name": "seq_len", "reason": "differs"}]}}
    line = not_transferred_line(target)
    assert "weight_decay, batch_size, proxy_shape, seq_len (" in line
    assert "provenance.not_transferred" in line and "train.provenance" in line
    assert "empirically" not in line  # batch and warmup are set by named rules (issue 11)


def test_not_transferred_line_of_an_sp_run_does_not_say_mup_transferred_the_rest():
    items = {"not_transferred": [{"name": "weight_decay", "reason": "rule"}]}
    mup = not_transferred_line({"mup": {"parametrization": "mup"}, "provenance": items})
    sp = not_transferred_line({"mup": {"parametrization": "sp"}, "provenance": items})
    assert "not transferred by μP: weight_decay" in mup
    assert "by μP:" not in sp and "SP proxies: no value is μP-transferred" in sp


def test_not_transferred_line_without_items_says_so():
    assert "nothing listed" in not_transferred_line({"provenance": {"not_transferred": []}})


def test_a_saving_is_claimed_only_when_validated_and_a_negative_one_says_what_it_means():
    assert saved_text({"saved_gpu_hours": None}) == "nothing claimed (not validated)"
    assert saved_text({"saved_gpu_hours": 120.0}) == "120 GPU-h vs fitting own laws"
    assert "the tuning cost more than that baseline" in saved_text({"saved_gpu_hours": -0.02})


def test_the_lr_interval_says_it_spans_width_only_where_depth_changed_unchecked():
    assert interval_spans(2, 2, None).startswith("width (the target has the proxies' 2 layers)")
    unchecked = interval_spans(2, 28, None)
    assert unchecked.startswith("width only") and "depth check did not run" in unchecked
    rejected = interval_spans(2, 28, {"outcome": "rejected", "depths": [2, 4]})
    assert rejected.startswith("width only") and "was rejected" in rejected
    passed = interval_spans(2, 28, {"outcome": "passed", "depths": [2, 4]})
    assert passed.startswith("width; depth 2 → 28") and "not added" in passed
    lr = {"value": 0.01, "interval": [0.008, 0.012], "target_width": 3072, "confidence": 0.9,
          "model": "converging", "widths": [64, 128, 256],
          "other_model": {"model": "log_linear", "estimate": -6.3}}
    target = {"train": {"lr": 0.01, "lr_interval": [0.008, 0.012]}}
    shown = lr_line({**target, "provenance": {"lr": {**lr, "interval_spans": unchecked}}})
    assert "spans width only" in shown
    shown = lr_line({**target, "provenance": {"lr": {**lr, "interval_spans": rejected}}})
    assert "spans width only (the target's depth is not in it" in shown  # the check ran
    same_depth = {**lr, "interval_spans": interval_spans(2, 2, None)}
    assert "spans width only" not in lr_line({**target, "provenance": {"lr": same_depth}})
