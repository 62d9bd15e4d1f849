"""A user's own recurrent network on the R2D2 recipe (``dqn.network``: ``forward(obs,
state) -> (q, state)`` and ``initial_state(batch)``): it learns what only a memory can
(a cue recalled after a delay) on the serial and processes runners, its runs checkpoint,
``shoal eval`` rebuilds it in a fresh process, ``load_policy`` carries its memory until
``reset()``, and a network without a memory as R2D2 needs is one line, exit 2."""

import re
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import shoal
from shoal.run.checkpoint import load_checkpoint
from shoal.run.directory import RunDir

pytestmark = pytest.mark.timeout(300)

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))  # user_code/ is the user's code, beside shoal, not in it
from fresh_process import CLI, assert_one_line_exit_2, run_fresh  # noqa: E402

RECALL = [
    "env.id='UserCode/Recall-v0'",
    "env.imports=['user_code.envs']",
    "run.recipe='r2d2'",
    "dqn.network='user_code.qnets:gru_q'",
    "r2d2.length=8",
    "r2d2.burn_in=0",
    "r2d2.period=4",
    "dqn.batch_size=16",
    "dqn.lr=1e-3",
    "dqn.target_period=50",
    "explore.eps_decay_steps=1500",
    "run.total_steps=3000",
    "run.learning_starts=200",
    "run.eval_every=500",
    "run.eval_episodes=20",
    "run.stop_return=none",
    "run.progress=false",
    "run.torch_threads=1",
    "processes.workers=1",
]
"""The cue is shown once and asked for 4 steps later: a coin toss without memory (a
feed-forward DQN's greedy policy scored 0.75 on these 20 evaluation episodes, the share
of its one answer), 1.0 with it."""


@pytest.mark.slow
@pytest.mark.parametrize("runner", ["serial", "processes"])
def test_a_users_gru_learns_to_recall_and_its_run_evaluates_and_loads(runner, tmp_path):
    run = tmp_path / "r"
    result = shoal.train(None, overrides=[*RECALL, f"run.runner='{runner}'"], run_dir=run)
    assert result.best_eval_return == 1.0, result
    online = load_checkpoint(RunDir(run).best, best=True)["learner"]["online"]
    assert {"encode.0.weight", "gru.weight_hh", "q.bias"} <= set(online)  # the user's GRUQ
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = run_fresh([CLI, "eval", str(run), "--episodes", "20", "--trust-code"], elsewhere)
    assert out.returncode == 0, out.stderr
    assert re.search(r"mean 1\.0", out.stdout), out.stdout
    policy = shoal.load_policy(run, trust_code=True)
    recalls_after_each_reset(policy)


def recalls_after_each_reset(policy):
    """The loaded policy answers the cue it saw first, for each row of a batch, after
    each reset: its memory is carried from act to act and forgotten at reset."""
    assert policy.recurrent and type(policy.network).__name__ == "GRUQ"
    cues = np.array([0, 1, 1, 0])
    for _ in range(2):
        policy.reset()
        first = np.zeros((4, 3), np.float32)
        first[np.arange(4), cues] = 1.0
        policy.act(first)
        for t in range(1, 5):
            blank = np.zeros((4, 3), np.float32)
            blank[:, 2] = float(t == 4)
            answer = policy.act(blank)
        assert (answer == cues).all(), answer
    with torch.no_grad():  # the network is the user's module, weights loaded
        q, state = policy.network(torch.zeros(2, 3), policy.network.initial_state(2))
    assert q.shape == (2, 2) and state.shape == (2, 32)


@pytest.mark.parametrize(
    ("factory", "message"),
    [
        ("gru_without_state", "has no initial_state\\(batch\\)"),
        ("gru_q_only", "returned a Tensor, not \\(q, next_state\\)"),
        ("gru_forward_obs_only", "and a state of shape \\(2, 32\\).*takes 2 positional"),
        ("lstm_tuple_state", "returned a tuple; it must be one float tensor"),
    ],
)
def test_a_network_without_a_memory_as_r2d2_needs_is_one_line_exit_2(factory, message, tmp_path):
    args = ["train", "r2d2", "--network", f"user_code.qnets:{factory}", "--out", str(tmp_path)]
    out = run_fresh([CLI, *args], TESTS)
    assert_one_line_exit_2(out, "config key 'dqn.network'")
    assert re.search(message, out.stderr), out.stderr
    assert list(tmp_path.iterdir()) == []


def test_shoal_tune_leaves_the_users_network_as_it_is():
    """A user's network has its own shape: tune searches neither dqn.hidden nor the
    [r2d2] network keys for it (shoal's own recurrent network: both)."""
    from shoal.config import load_config
    from shoal.registry import recipe_for

    own = load_config("r2d2")
    users = load_config("r2d2", ["dqn.network='user_code.qnets:gru_q'"])
    network_keys = {"dqn.hidden", "r2d2.state_dim", "r2d2.cell"}
    assert network_keys <= set(recipe_for(own).search_space(own))
    assert not network_keys & set(recipe_for(users).search_space(users))
    assert recipe_for(users).user_factories(users) == {"dqn.network": "user_code.qnets:gru_q"}


class _Wrapped(torch.nn.Module):
    """shoal's recurrent network seen as a user's module: no apply_params, no unroll, its
    parameters under another name; the loss reaches it through functional_call."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def initial_state(self, batch):
        return self.inner.initial_state(batch)

    def forward(self, obs, state):
        return self.inner(obs, state)


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_the_sequence_loss_of_a_users_module_is_shoals_values_and_gradients(cell):
    """A user's module takes the generic path (stepped on explicit weights through
    functional_call): the same loss, priorities and gradients as shoal's network's own
    fused unroll, over sequences with an episode start in the burn-in and an end inside."""
    from shoal.agent.networks import RecurrentQNetwork
    from shoal.agent.sequence_loss import SequenceBatch, SequenceDQNLoss

    torch.manual_seed(0)
    net = RecurrentQNetwork(3, 2, hidden=[16], state_dim=8, cell=cell)
    b, slots = 5, 4 + 6
    mask = torch.ones(b, slots, dtype=torch.bool)
    mask[0, :2], mask[1, 7:] = False, False
    batch = SequenceBatch(
        obs=torch.randn(b, slots + 1, 3),
        action=torch.randint(2, (b, slots)),
        reward=torch.randn(b, slots),
        discount=torch.ones(b, slots),
        mask=mask,
        state=torch.randn(b, net.state_size),
        weights=torch.rand(b),
    )
    got = []
    for network, prefix in ((net, ""), (_Wrapped(net), "inner.")):
        loss_fn = SequenceDQNLoss(network, burn_in=4, n_step=3, gamma=0.99)
        params = {
            prefix + k: v.detach().clone().requires_grad_() for k, v in net.named_parameters()
        }
        target = {k: v.detach() + 0.01 for k, v in params.items()}
        loss, priority = loss_fn(params, target, batch)
        grads = torch.autograd.grad(loss, list(params.values()))
        got.append((loss, priority, grads))
    (l1, p1, g1), (l2, p2, g2) = got
    assert torch.allclose(l1, l2, atol=1e-5) and torch.allclose(p1, p2, atol=1e-5)
    assert all(torch.allclose(a, c, atol=1e-5) for a, c in zip(g1, g2, strict=True))
