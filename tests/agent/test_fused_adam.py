"""FusedAdam is torch's fused Adam without torch.optim's machinery: bit-identical updates,
interchangeable state dicts, non-contiguous gradients handled, and no torch._dynamo import."""

import copy
import subprocess
import sys

import pytest
import torch

from shoal.agent.fused_adam import FusedAdam


def nets(seed=0):
    torch.manual_seed(seed)
    a = torch.nn.Sequential(torch.nn.Linear(4, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2))
    b = torch.nn.Sequential(torch.nn.Linear(4, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2))
    b.load_state_dict(a.state_dict())
    return a, b


def train(net, opt, steps, seed=1):
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        x = torch.randn(16, 4, generator=g)
        opt.zero_grad()
        net(x).pow(2).mean().backward()
        opt.step()


def assert_same(a, b):
    for p, q in zip(a.parameters(), b.parameters()):
        assert torch.equal(p, q)


def test_updates_are_bit_identical_to_torch_fused_adam():
    a, b = nets()
    train(a, torch.optim.Adam(a.parameters(), lr=1e-2, eps=1e-6, fused=True), 50)
    train(b, FusedAdam(list(b.parameters()), lr=1e-2, eps=1e-6), 50)
    assert_same(a, b)


@pytest.mark.parametrize("direction", ["torch->shoal", "shoal->torch"])
def test_state_dicts_load_either_way_and_continue_identically(direction):
    a, b = nets()
    ta = torch.optim.Adam(a.parameters(), lr=1e-2, fused=True)
    fb = FusedAdam(list(b.parameters()), lr=1e-2)
    train(a, ta, 10)
    train(b, fb, 10)
    if direction == "torch->shoal":
        fresh = FusedAdam(list(b.parameters()), lr=1e-2)
        fresh.load_state_dict(ta.state_dict())
        fb = fresh
    else:
        fresh = torch.optim.Adam(a.parameters(), lr=1e-2, fused=True)
        # torch keeps the tensors it is given (a known trap): copy, as Learner does
        fresh.load_state_dict(copy.deepcopy(fb.state_dict()))
        ta = fresh
    train(a, ta, 10, seed=2)
    train(b, fb, 10, seed=2)
    assert_same(a, b)
    assert ta.state_dict()["param_groups"] == fb.state_dict()["param_groups"]


def test_non_contiguous_gradients_update_the_right_entries():
    torch.manual_seed(0)
    w1 = torch.randn(3, 5, requires_grad=True)
    w2 = w1.detach().clone().requires_grad_(True)
    grad = torch.randn(5, 3).t()  # a transposed (non-contiguous) gradient
    w1.grad, w2.grad = grad, grad.contiguous()
    FusedAdam([w1], lr=0.1).step()
    torch.optim.Adam([w2], lr=0.1).step()
    torch.testing.assert_close(w1, w2)


def test_an_empty_state_before_the_first_step():
    a, _ = nets()
    assert FusedAdam(list(a.parameters()), lr=1e-3).state_dict()["state"] == {}


@pytest.mark.timeout(120)
def test_does_not_import_torch_dynamo():
    code = (
        "import sys, torch\n"
        "from shoal.agent.fused_adam import FusedAdam\n"
        "w = torch.zeros(3, requires_grad=True); opt = FusedAdam([w], lr=0.1)\n"
        "w.sum().backward(); opt.step(); opt.state_dict(); opt.zero_grad()\n"
        "print('torch._dynamo' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
