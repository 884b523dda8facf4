"""What target.yaml says about a target family's own features: where the proxies kept μP against
the family's rule (`mup.family_changes`), and which features the proxies did not see
(`provenance.not_transferred` entries: a sliding window as long as their context, a layer
pattern their depth does not reach). `transfer.outputs.emit` writes both.
"""

from __future__ import annotations

from collections.abc import Mapping

# The one sentence for Gemma's normaliser. The rule decides it, not the coordinate check: over
# seeds the check does not separate embeddings × √width from a constant at the proxies' sizes
# (tests/test_targets.py, benchmarks/RESULTS.md); a single seed's rejection was noise.
SQRT_WIDTH_NOT_MUP = ("√d_model grows with width, so embeddings × √d_model grow with width: not "
                      "μP (Tensor Programs V, Table 3: the input layer's multiplier is constant "
                      "in width)")


def family_changes(m: Mapping, mup: Mapping, base_width: int) -> list[dict]:
    """Where the target family's own rule breaks μP, what the proxies (and this file) use
    instead, with the family's value at the target."""
    out = []
    if m.get("embedding_normalizer"):
        d = int(m["d_model"])
        out.append({"name": "embedding_normalizer", "family": f"× √d_model = {d ** 0.5:.6g}",
                    "mup": f"× {mup['embedding_multiplier']:.6g} at every width (input_mult "
                           f"{mup['input_mult']:g} × √base_width = √{base_width}), tuned at "
                           "the base (mup.embedding_multiplier)",
                    "reason": SQRT_WIDTH_NOT_MUP})
    if m.get("query_pre_attn_scalar"):
        q = float(m["query_pre_attn_scalar"])
        out.append({"name": "query_pre_attn_scalar", "family": f"q·k × {q:g}^-½ = {q ** -0.5:.6g}",
                    "mup": f"q·k × attn_mult / d_head = {mup['attn_scale']:.6g} "
                           "(mup.attn_scale; hf/config.json's query_pre_attn_scalar holds it)",
                    "reason": "μP scales attention logits by 1/d_head (Tensor Programs V), as "
                              "for every family's 1/√d_head"})
    return out


def family_not_transferred(m: Mapping, proxy: Mapping) -> list[dict]:
    """The family's features the proxies did not train with, each with its value and why."""
    p_seq, layers = proxy.get("seq_len"), proxy.get("n_layers")
    items = []
    if m.get("sliding_window") and not proxy.get("sliding_window"):
        w = int(m["sliding_window"])
        why = (f"local attention over {w} tokens is as wide as the proxies' whole context "
               f"({p_seq}) or wider: on them it is global attention, and a window does not bear "
               "on the lr" if p_seq is None or w >= int(p_seq) else
               f"the proxies attend over their whole context ({p_seq}) on every layer: which of "
               f"{m.get('family')}'s layers are local (max_window_layers) is not kept")
        items.append({"name": "sliding_window", "value": w, "reason": why})
    k = m.get("sliding_window_pattern")
    if k and layers is not None and int(layers) < int(k):
        items.append({"name": "sliding_window_pattern", "value": int(k),
                      "reason": f"every {k}th layer is global at the target (rotary base "
                                "rope_theta), the others local (rope_local_theta); the stage "
                                f"proxies' {layers} layers are all local, and only the depth "
                                "check's deeper proxies have global layers"})
    k = m.get("no_rope_interval")
    if k and layers is not None and int(layers) < int(k):
        items.append({"name": "no_rope_interval", "value": int(k),
                      "reason": f"every {k}th layer has no rotary positions at the target (NoPE); "
                                f"the stage proxies' {layers} layers all rotate, and only the "
                                "depth check's deeper proxies have NoPE layers"})
    return items
