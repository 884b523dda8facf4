"""transfer.core.protocol: both proxy families provide every member of `ProxyFamily`, with working
values at a tiny size, and anything lacking a member is refused."""

from __future__ import annotations

import types
import typing

import models_for_validate as models
import pytest
import torch
from helpers_sweep import compose_cfg

from proxies import TransformerFamily
from proxies.custom import CustomFamily
from transfer.core.errors import UserError
from transfer.core.protocol import MEMBERS, ProxyFamily, missing_members
from transfer.search.family import instantiate_family, plan_proxies

WIDTH = 32


def builtin() -> TransformerFamily:
    return TransformerFamily(n_layers=1, d_head=16, seq_len=16, base_width=WIDTH)


def custom() -> CustomFamily:
    return CustomFamily(build_fn=models.mlp_mup, seq_len=16, vocab_size=models.VOCAB,
                        base_width=WIDTH)


FAMILIES = {"builtin": builtin, "custom": custom}
PROPERTIES = sorted(n for n in MEMBERS if isinstance(vars(ProxyFamily)[n], property))
METHODS = sorted(set(MEMBERS) - set(PROPERTIES))


def test_members_are_read_off_the_protocol():
    assert {"build", "replace", "flops_per_token", "source_hash"} <= set(METHODS)
    assert {"seq_len", "parametrization", "zero_init_query", "delta"} <= set(PROPERTIES)


@pytest.mark.parametrize("make", FAMILIES.values(), ids=FAMILIES)
def test_family_is_a_proxy_family(make):
    fam = make()
    assert isinstance(fam, ProxyFamily)
    assert missing_members(fam) == []
    for name in METHODS:
        assert callable(getattr(fam, name)), name
    for name in PROPERTIES:  # each value has its declared type
        want = typing.get_type_hints(vars(ProxyFamily)[name].fget)["return"]
        if not isinstance(want, types.UnionType):  # frozenset[str] -> frozenset
            want = typing.get_origin(want) or want
        assert isinstance(getattr(fam, name), want), name


@pytest.mark.parametrize("make", FAMILIES.values(), ids=FAMILIES)
def test_family_members_work_at_a_tiny_width(make):
    fam = make()
    fam.check_width(WIDTH)
    with pytest.raises(ValueError, match="width"):
        fam.check_width(-1)  # no family builds a negative width
    model = fam.build(WIDTH, seed=0)
    assert fam.n_params(WIDTH) == sum(p.numel() for p in model.parameters())
    assert 0 < fam.flops_per_token(WIDTH) < fam.flops_per_token(2 * WIDTH)
    assert set(fam.base_shapes()) == {n for n, _ in model.named_parameters()}
    assert fam.delta != WIDTH and fam.parametrization == "mup"
    assert isinstance(fam.replace(), ProxyFamily)
    digest = fam.source_hash()
    assert len(digest) == 64 and digest == make().source_hash()
    x = torch.zeros(1, fam.seq_len, dtype=torch.long)  # (B, T)
    assert model(x).shape[-1] == models.VOCAB


def test_zero_init_flags_say_what_each_family_does():
    assert (builtin().zero_init_query, builtin().readout_zero_init) == (True, True)
    assert (custom().zero_init_query, custom().readout_zero_init) == (False, True)
    plain = CustomFamily(build_fn=models.mlp_plain_readout, seq_len=16, vocab_size=models.VOCAB,
                         base_width=WIDTH)  # an nn.Linear readout: its own init, not zero
    assert plain.readout_zero_init is False


@pytest.mark.parametrize("dropped", MEMBERS)
def test_anything_lacking_a_member_is_not_a_proxy_family(dropped):
    fam = builtin()
    partial = types.SimpleNamespace(**{n: getattr(fam, n) for n in MEMBERS if n != dropped})
    assert not isinstance(partial, ProxyFamily)
    assert missing_members(partial) == [dropped]


def test_a_builder_that_is_not_a_family_is_a_user_error():
    cfg = compose_cfg(["model=tiny", "proxy.builder._target_=types.SimpleNamespace"])
    with pytest.raises(UserError, match="lacks .*build.*transfer.core.protocol.ProxyFamily"):
        instantiate_family(cfg, plan_proxies(cfg), vocab_size=256)
