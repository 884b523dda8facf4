"""One classification of parameters: which μP / depth rule applies to each, decided once.

Every parameter gets a `ParamClass` (kind, role, fan-in, fan-out, width and depth multiplier),
decided from its name (a *role*, by `ROLE_PATTERNS`) and its shape against the base model's.
Everything else reads that one answer: the proxy family's init (`init_std`), the trainer's AdamW
groups (`optimizer_groups`), the emitter's `param_groups` at the target (`target_classes`, one
group per distinct (kind, block, fan-in)), and `transfer.outputs.apply` (the same roles and group names).

Kinds are μP's (Tensor Programs V, Table 3): *hidden* matrices (two width dimensions), the
*embedding*, the *readout*, and *vector*s (norm gains, biases). A parameter inside a residual
block (hidden matrices, the pre-branch norms, biases) also carries m_L, the depth multiplier of
CompleteP's rules (Dey et al. 2025, Table 1); the embedding, final norm and readout carry 1.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from transfer.core import rules

HIDDEN_ATTN = ("attn_q", "attn_k", "attn_v", "attn_o")
HIDDEN_MLP = ("mlp_gate", "mlp_up", "mlp_down")
HIDDEN = HIDDEN_ATTN + HIDDEN_MLP
MATRIX_ROLES = (*HIDDEN, "embedding", "position", "readout")
# inside a residual branch: depth rules apply
IN_BLOCK = frozenset((*HIDDEN, "norm", "qk_norm", "bias"))
KINDS = {**{r: "hidden" for r in HIDDEN}, "embedding": "embedding", "position": "embedding",
         "readout": "readout", "norm": "vector", "qk_norm": "vector", "final_norm": "vector",
         "bias": "vector"}

# Parameter name → role, for GraniteForCausalLM and the families' own *ForCausalLM (Qwen2,
# Qwen3, Mistral, SmolLM3: the Llama layout; Gemma 2 / 3's four block norms, OLMo 2's two after
# the branches; Qwen3's, OLMo 2's and Gemma 3's q/k norms) and proxies.TransformerFamily.
# Searched anywhere in the name, so wrappers ("module.", "_orig_mod.") do not matter.
ROLE_PATTERNS: tuple[tuple[str, str], ...] = (
    (r"(^|\.)embed_tokens\.weight$", "embedding"),  # Granite
    (r"(^|\.)lm_head\.weight$", "readout"),
    (r"self_attn\.q_proj\.weight$", "attn_q"),
    (r"self_attn\.k_proj\.weight$", "attn_k"),
    (r"self_attn\.v_proj\.weight$", "attn_v"),
    (r"self_attn\.o_proj\.weight$", "attn_o"),
    (r"mlp\.gate_proj\.weight$", "mlp_gate"),
    (r"mlp\.up_proj\.weight$", "mlp_up"),
    (r"mlp\.down_proj\.weight$", "mlp_down"),
    (r"attn\.(q|k)_norm\.weight$", "qk_norm"),  # either: self_attn.q_norm, attn.q_norm
    (r"(^|\.)(input_layernorm|post_attention_layernorm)\.weight$", "norm"),  # in a block
    (r"(^|\.)(pre_feedforward_layernorm|post_feedforward_layernorm)\.weight$", "norm"),  # Gemma 2
    (r"(^|\.)tok_emb\.weight$", "embedding"),  # proxies.TransformerFamily
    (r"(^|\.)pos_emb\.weight$", "position"),
    (r"(^|\.)readout\.weight$", "readout"),
    (r"attn\.q\.weight$", "attn_q"),
    (r"attn\.k\.weight$", "attn_k"),
    (r"attn\.v\.weight$", "attn_v"),
    (r"attn\.o\.weight$", "attn_o"),
    (r"mlp\.gate\.weight$", "mlp_gate"),
    (r"mlp\.up\.weight$", "mlp_up"),
    (r"mlp\.down\.weight$", "mlp_down"),
    (r"(^|\.)(post_)?(norm1|norm2)\.weight$", "norm"),
    (r"(^|\.)norm\.weight$", "final_norm"),  # either family: after the last block
    (r"\.bias$", "bias"),  # any family: vector-like (μP), in a block, initialised to zero
)

# target.yaml group name → the roles it may hold. When several groups hold a role (`hidden`
# and a split-off `hidden_mlp_down`), the group with the fewest roles, the most specific, wins.
GROUP_ROLES: dict[str, frozenset[str]] = {
    "hidden": frozenset(HIDDEN),
    "hidden_attn": frozenset(HIDDEN_ATTN),
    "hidden_attn_qkv": frozenset(("attn_q", "attn_k", "attn_v")),  # o apart: heads × d_head ≠ d
    "hidden_mlp": frozenset(HIDDEN_MLP),
    "hidden_mlp_in": frozenset(("mlp_gate", "mlp_up")),
    **{f"hidden_{r}": frozenset((r,)) for r in HIDDEN},  # hidden_attn_q, ..., hidden_mlp_down
    "embedding": frozenset(("embedding", "position")),
    "readout": frozenset(("readout",)),
    "vector": frozenset(("norm", "qk_norm", "final_norm", "bias")),
    "vector_block": frozenset(("norm", "qk_norm", "bias")),  # block norms, biases: depth rules
    "vector_final": frozenset(("final_norm",)),  # outside every block
}

APPLIES_TO = {
    "attn_q": "attention q", "attn_k": "attention k", "attn_v": "attention v",
    "attn_o": "attention o", "mlp_gate": "MLP gate", "mlp_up": "MLP up", "mlp_down": "MLP down",
    "embedding": "input token embedding table", "position": "learned positions",
    "readout": "output projection to the vocabulary", "norm": "norm gains in the blocks",
    "qk_norm": "q/k norm gains", "bias": "biases", "final_norm": "the final norm's gain",
}


def role_of(name: str) -> str:
    """The role of parameter `name`; ValueError naming it when no pattern knows it."""
    for pattern, role in ROLE_PATTERNS:
        if re.search(pattern, name):
            return role
    raise ValueError(f"parameter {name!r} has no μP role: transfer.core.params knows "
                     "GraniteForCausalLM and proxies.TransformerFamily names; add a pattern to "
                     "transfer.core.params.ROLE_PATTERNS for your model")


@dataclass(frozen=True)
class ParamClass:
    """One parameter's decided μP treatment."""

    role: str  # attn_q … mlp_down, embedding, position, readout, norm, qk_norm, final_norm, bias
    kind: str  # hidden | embedding | readout | vector: which μP rule family
    fan_in: int  # the input dimension (last dim; a vector's only one)
    fan_out: int
    width_mult: float  # fan_in / the base model's fan_in (hidden: μP's per-matrix multiplier)
    depth_mult: float  # m_L = n_layers / base_depth inside a residual block, else 1

    @property
    def in_block(self) -> bool:
        return self.role in IN_BLOCK

    @property
    def block(self) -> str:
        return "attn" if self.role in HIDDEN_ATTN else "mlp" if self.role in HIDDEN_MLP else ""

    @property
    def key(self) -> tuple:
        """Parameters with one key share every rule's value: one optimizer / target.yaml group."""
        if self.kind == "hidden":
            return (self.kind, self.block, self.fan_in)
        return (self.kind, self.in_block)


def classify(role: str, shape: Iterable[int], base_shape: Iterable[int], *, depth_mult: float
             ) -> ParamClass:
    """The class of a parameter of `role` and `shape`, whose base-width model has `base_shape`.
    `depth_mult` is the model's m_L; it applies only inside residual blocks."""
    shape, base_shape = tuple(int(s) for s in shape), tuple(int(s) for s in base_shape)
    if role not in KINDS:
        raise ValueError(f"unknown role {role!r}; known: {', '.join(KINDS)}")
    if len(shape) != len(base_shape):
        raise ValueError(f"{role}: shape {shape} and base shape {base_shape} differ in rank")
    return ParamClass(role=role, kind=KINDS[role], fan_in=shape[-1], fan_out=shape[0],
                      width_mult=shape[-1] / base_shape[-1],
                      depth_mult=depth_mult if role in IN_BLOCK else 1.0)


def classify_named(shapes: Mapping[str, Iterable[int]], base_shapes: Mapping[str, Iterable[int]],
                   *, depth_mult: float) -> dict[str, ParamClass]:
    """{name: ParamClass} for a model's named parameter shapes against its base model's."""
    return {n: classify(role_of(n), s, base_shapes[n], depth_mult=depth_mult)
            for n, s in shapes.items()}


def role_shapes(*, d_model: int, n_heads: int, n_kv_heads: int, d_head: int, d_ff: int,
                vocab_size: int, mlp: str = "swiglu", positions: str = "rope",
                seq_len: int = 1, bias: bool = False, qk_norm: int | None = None
                ) -> dict[str, tuple[int, ...]]:
    """One layer's parameter shapes by role (every layer is the same), plus the embedding,
    readout and final norm: what the emitter classifies at the target and at the base.
    `qk_norm`: the q norm gain's length (head_dim, or the whole q projection's), None: none."""
    out = {"embedding": (vocab_size, d_model), "attn_q": (n_heads * d_head, d_model),
           "attn_k": (n_kv_heads * d_head, d_model), "attn_v": (n_kv_heads * d_head, d_model),
           "attn_o": (d_model, n_heads * d_head)}
    if mlp in ("swiglu", "geglu"):
        out["mlp_gate"] = (d_ff, d_model)
    out.update({"mlp_up": (d_ff, d_model), "mlp_down": (d_model, d_ff), "norm": (d_model,),
                "final_norm": (d_model,), "readout": (vocab_size, d_model)})
    if positions == "learned":
        out["position"] = (seq_len, d_model)
    if qk_norm:
        out["qk_norm"] = (qk_norm,)
    if bias:  # any bias in a block (q/k/v, o, MLP): one vector class, its fan-in irrelevant
        out["bias"] = (d_model,)
    return out


@dataclass(frozen=True)
class BaseValues:
    """The tuned values at base width and base depth, and what decides how they scale."""

    lr: float
    init_std: float = 0.02
    weight_decay: float = 0.0
    eps: float = 1e-8
    depth_alpha: float = rules.NO_DEPTH_ALPHA  # 0: width-only μP
    parametrization: str = "mup"
    readout_zero_init: bool = True
    zero_init_query: bool = True

    @property
    def alpha(self) -> float:
        """SP has no depth rules either: α only applies under μP."""
        return self.depth_alpha if self.parametrization == "mup" else 0.0


def lr(pc: ParamClass, v: BaseValues) -> float:
    """Adam lr: hidden lr / width_mult × m_L^(α-1); block vectors × m_L^(α-1); others lr."""
    if v.parametrization != "mup":
        return rules.vector_lr(v.lr)
    if pc.kind == "hidden":
        return rules.hidden_lr(v.lr, pc.width_mult) * rules.hidden_depth_lr_factor(
            pc.depth_mult, v.alpha)
    if pc.kind == "vector" and pc.in_block:
        return rules.vector_lr(v.lr) * rules.block_vector_lr_factor(pc.depth_mult, v.alpha)
    return rules.vector_lr(v.lr)


def weight_decay(pc: ParamClass, v: BaseValues) -> float:
    """Decoupled weight decay: hidden × width_mult under μP (lr·wd constant in width; CompleteP
    adds no depth factor, Table 1 "Hidden WD"), matrices wd, vectors never decayed."""
    if pc.kind == "vector":
        return 0.0
    if pc.kind == "hidden" and v.parametrization == "mup":
        return rules.hidden_weight_decay(v.weight_decay, pc.width_mult)
    return rules.vector_weight_decay(v.weight_decay)


def eps(pc: ParamClass, v: BaseValues) -> float:
    """Adam ε: matrices ε / width_mult (× m_L^-α in a block), vectors ε (× m_L^-α in a block)."""
    if v.parametrization != "mup":
        return rules.vector_eps(v.eps)
    if pc.kind == "vector":
        return rules.vector_eps(v.eps, pc.depth_mult, v.alpha)
    return rules.matrix_eps(v.eps, pc.width_mult, pc.depth_mult, v.alpha)


def init_std(pc: ParamClass, v: BaseValues, *, tied: bool = False) -> float | None:
    """Init σ (None: a norm gain, initialised to gain 1; 0.0: zero-initialised, as biases are)."""
    if pc.role == "bias":
        return 0.0
    if pc.kind == "vector":
        return None
    if pc.kind == "embedding" or (pc.kind == "readout" and tied):
        return rules.embedding_init_std(v.init_std)  # a tied readout is the embedding table
    if pc.kind == "readout":
        return 0.0 if v.readout_zero_init else rules.readout_init_std(
            v.init_std, pc.width_mult, v.parametrization)
    if pc.role == "attn_q" and v.zero_init_query:
        return 0.0
    return rules.hidden_init_std(v.init_std, pc.width_mult)


def group_names(classes: Mapping[str, ParamClass]) -> dict[tuple, str]:
    """Group key → target.yaml group name: the `GROUP_ROLES` name whose roles are exactly those
    sharing the key (`hidden_attn`, `hidden_mlp_in`, `hidden_mlp_down`, ...); hidden roles that
    no name covers get one group each (`hidden_attn_o` when o's fan-in differs from q's)."""
    roles: dict[tuple, set[str]] = {}
    for pc in classes.values():
        roles.setdefault(pc.key, set()).add(pc.role)
    out: dict[tuple, str] = {}
    for key, rs in roles.items():
        if key[0] != "hidden":
            kind, in_block = key
            out[key] = (kind if kind != "vector" else
                        "vector_block" if in_block else "vector_final")
            continue
        exact = [n for n, g in GROUP_ROLES.items() if n.startswith("hidden") and g == rs]
        if not exact:
            raise ValueError(f"hidden roles {sorted(rs)} share fan-in {key[2]} but no group name "
                             "holds exactly them; add one to transfer.core.params.GROUP_ROLES")
        out[key] = exact[0]
    return out


def optimizer_groups(named: Iterable[tuple[str, object]], classes: Mapping[str, ParamClass],
                     v: BaseValues) -> list[dict]:
    """torch.optim.AdamW parameter groups from the classification: one per group key, each
    with its `name`, `lr`, `weight_decay` and `eps` (what MuAdamW does for width, plus the
    depth rules and per-group ε, which MuAdamW does not know)."""
    names = group_names(classes)
    groups: dict[tuple, dict] = {}
    for n, p in named:
        pc = classes[n]
        g = groups.setdefault(pc.key, {"name": names[pc.key], "params": [], "lr": lr(pc, v),
                                       "weight_decay": weight_decay(pc, v), "eps": eps(pc, v)})
        g["params"].append(p)
    return list(groups.values())
