"""transfer.outputs.summary: what a finished sweep prints."""

from __future__ import annotations

from transfer.outputs.summary import not_transferred_line, saved_text


def test_not_transferred_line_names_target_yaml_items_in_order_once():
    target = {"provenance": {"not_transferred": [
        {"name": "weight_decay", "reason": "rule"}, {"name": "batch_size", "reason": "rule"},
        {"name": "proxy_shape", "reason": "a"}, {"name": "proxy_shape", "reason": "b"},
        {"name": "seq_len", "reason": "differs"}]}}
    line = not_transferred_line(target)
    assert "weight_decay, batch_size, proxy_shape, seq_len (" in line
    assert "provenance.not_transferred" in line and "train.provenance" in line
    assert "empirically" not in line  # batch and warmup are set by named rules (issue 11)


def test_not_transferred_line_without_items_says_so():
    assert "nothing listed" in not_transferred_line({"provenance": {"not_transferred": []}})


def test_a_saving_is_claimed_only_when_validated_and_a_negative_one_says_what_it_means():
    assert saved_text({"saved_gpu_hours": None}) == "nothing claimed (not validated)"
    assert saved_text({"saved_gpu_hours": 120.0}) == "120 GPU-h vs fitting own laws"
    assert "the tuning cost more than that baseline" in saved_text({"saved_gpu_hours": -0.02})
