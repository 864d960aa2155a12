"""rlcore's Adam and gradient clipping (``rlcore.algos.common``): the same numbers as torch's, bit for
bit, through everything that can change between steps, with the shortcut taken only where it may."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.optim.optimizer as torch_optimizer
from rlcore.algos.common import _FusedAdam, adam, clip_grad, gradient_step
from torch import nn


def _net(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(5, 16), nn.Tanh(), nn.Linear(16, 3))


def _loss(net: nn.Module, k: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(100 + k)
    x = torch.randn(32, 5, generator=g)
    return net(x).square().mean() + 0.1 * net(x).sum()


def _same(a: nn.Module, b: nn.Module) -> None:
    for (n, p), q in zip(a.named_parameters(), b.parameters(), strict=True):
        assert torch.equal(p, q), n


def _same_state(a: torch.optim.Optimizer, b: torch.optim.Optimizer) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    assert sa["param_groups"] == sb["param_groups"]
    assert sa["state"].keys() == sb["state"].keys()
    for k in sa["state"]:
        for name in ("step", "exp_avg", "exp_avg_sq"):
            assert torch.equal(sa["state"][k][name], sb["state"][k][name]), (k, name)


@pytest.mark.parametrize("weight_decay", [0.0, 0.01])
def test_adam_steps_equal_torchs_fused_adam_bit_for_bit_through_lr_changes_missing_grads_and_reloads(weight_decay):
    """rlcore's Adam calls the fused kernel itself after the first step; every parameter and moment
    must equal torch.optim.Adam(fused=True)'s after each step: learning rates annealed between
    steps, a step where one parameter has no gradient (torch skips it: the shortcut must not run),
    a second param group, a closure, and a state reloaded in the middle."""
    ours_net, ref_net = _net(), _net()
    ours = adam(ours_net.parameters(), lr=1e-2, eps=1e-5, weight_decay=weight_decay)
    assert isinstance(ours, _FusedAdam) and isinstance(ours, torch.optim.Adam)
    ref = torch.optim.Adam(ref_net.parameters(), lr=1e-2, eps=1e-5, weight_decay=weight_decay, fused=True)
    for k in range(30):
        for net, opt in ((ours_net, ours), (ref_net, ref)):
            for g in opt.param_groups:
                g["lr"] = 1e-2 * (1 - k / 40)
            opt.zero_grad()
            _loss(net, k).backward()
            if k == 7:  # a parameter without a gradient this step
                net[2].bias.grad = None
            if k == 12:

                def closure(net: nn.Module = net, opt: torch.optim.Optimizer = opt, k: int = k) -> float:
                    opt.zero_grad()
                    loss = _loss(net, k)
                    loss.backward()
                    return float(loss.detach())

                opt.step(closure)
            else:
                opt.step()
        _same(ours_net, ref_net)
        _same_state(ours, ref)
        if k == 4:
            assert ours._lean is not None  # the shortcut is in use from the second step on
        if k == 15:  # reload both from a copy of their state (as a checkpoint resume does)
            ours.load_state_dict(copy.deepcopy(ours.state_dict()))
            ref.load_state_dict(copy.deepcopy(ref.state_dict()))
            assert ours._lean is None
        if k == 20:  # a second group of parameters
            extra_o, extra_r = nn.Parameter(torch.ones(4)), nn.Parameter(torch.ones(4))
            ours_net.register_parameter("extra", extra_o)
            ref_net.register_parameter("extra", extra_r)
            ours.add_param_group({"params": [extra_o], "lr": 3e-3})
            ref.add_param_group({"params": [extra_r], "lr": 3e-3})
            assert ours._lean is None


def test_adam_runs_step_hooks_and_refuses_nothing_torch_accepts():
    """Registered step hooks (the optimizer's own and torch's global ones) still run around each
    step; a flag the shortcut does not handle, set after it is in use, takes torch's own path."""
    net = _net()
    opt = adam(net.parameters(), lr=1e-3)
    calls: list[str] = []
    pre = opt.register_step_pre_hook(lambda o, a, kw: calls.append("pre"))
    post = opt.register_step_post_hook(lambda o, a, kw: calls.append("post"))
    glob = torch_optimizer.register_optimizer_step_post_hook(lambda o, a, kw: calls.append("global"))
    try:
        for k in range(3):
            opt.zero_grad()
            _loss(net, k).backward()
            opt.step()
    finally:
        pre.remove()
        post.remove()
        glob.remove()
    assert calls == ["pre", "post", "global"] * 3
    # maximize switched on after the shortcut is in use (torch reads the flags at every step)
    ours_net, ref_net = _net(), _net()
    ours = adam(ours_net.parameters(), lr=1e-2)
    ref = torch.optim.Adam(ref_net.parameters(), lr=1e-2, fused=True)
    for k in range(6):
        if k == 3:
            for opt in (ours, ref):
                for g in opt.param_groups:
                    g["maximize"] = True
        for net, opt in ((ours_net, ours), (ref_net, ref)):
            opt.zero_grad()
            _loss(net, k).backward()
            opt.step()
        _same(ours_net, ref_net)


@pytest.mark.parametrize("max_norm", [1e-3, 0.5, 1e6])
def test_clip_grad_equals_torchs_clip_grad_norm_bit_for_bit(max_norm):
    """Clipping (or not, when the norm is below max_norm) scales exactly as
    nn.utils.clip_grad_norm_(foreach=True) and returns the same norm, a parameter without a
    gradient included."""
    a, b = _net(), _net()
    for net in (a, b):
        _loss(net, 0).backward()
        net[0].bias.grad = None
    got = clip_grad(a.parameters(), max_norm)
    want = float(nn.utils.clip_grad_norm_(list(b.parameters()), max_norm, foreach=True))
    assert got == want
    for p, q in zip(a.parameters(), b.parameters(), strict=True):
        assert (p.grad is None and q.grad is None) or torch.equal(p.grad, q.grad)
    assert clip_grad(a.parameters(), None) == 0.0


def test_gradient_step_is_zero_backward_clip_step():
    """gradient_step: fresh gradients (none kept from the last step), clipped, one Adam step."""
    a, b = _net(), _net()
    oa, ob = adam(a.parameters(), lr=1e-2), torch.optim.Adam(b.parameters(), lr=1e-2, fused=True)
    for k in range(4):
        norm = gradient_step(oa, _loss(a, k), list(a.parameters()), 0.5)
        ob.zero_grad()
        _loss(b, k).backward()
        assert norm == float(nn.utils.clip_grad_norm_(list(b.parameters()), 0.5, foreach=True))
        ob.step()
    _same(a, b)


def test_adam_copies_and_pickles_without_the_originals_tensors():
    """A deep copy (algorithms are deep-copied, e.g. for evaluation) steps its own parameters only."""
    import pickle

    net = _net()
    opt = adam(net.parameters(), lr=1e-2)
    for k in range(3):
        opt.zero_grad()
        _loss(net, k).backward()
        opt.step()
    before = [p.detach().clone() for p in net.parameters()]
    net2, opt2 = copy.deepcopy((net, opt))
    for k in range(3):
        opt2.zero_grad()
        _loss(net2, k).backward()
        opt2.step()
    for p, q in zip(net.parameters(), before, strict=True):
        assert torch.equal(p, q)  # the original is untouched
    assert not all(torch.equal(p, q) for p, q in zip(net2.parameters(), before, strict=True))
    assert pickle.loads(pickle.dumps(opt))._lean is None
