"""run.compile: the same learning whichever way an update runs.

Every recipe's learner, fed the same 50 replay samples from the same start, ends with the
same weights, targets and optimizer state (float tolerance) whether its updates run eagerly,
with the loss through torch.compile, or through :class:`~shoal.agent.capture.GraphedUpdate`
with a stand-in for CUDA's recording (CI has no GPU: the stand-in runs the body on the static
inputs at each replay, so everything but the recording itself is checked here). A capture
that fails, or replays differently from eager, falls back to eager with one line and never
changes a result.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from shoal.agent.capture import resolve_compile
from shoal.agent.learner import DQN
from shoal.agent.losses import Batch
from shoal.agent.stacked import StackedLearner, stack_batches
from shoal.config import DQNConfig, load_config
from shoal.errors import ConfigError
from shoal.runners import runner_for

pytestmark = pytest.mark.timeout(300)
UPDATES = 50
SOFT = ["dqn.target_update='soft'", "dqn.hidden=[32]"]

RECIPES = {
    "dqn": ("cartpole", ["dqn.hidden=[32,32]"]),
    "dqn (noisy, soft target)": (
        "cartpole",
        ["explore.noisy=true", "explore.eps_start=0", "explore.eps_end=0"] + SOFT,
    ),
    "iqn (noisy)": ("iqn", ["dqn.hidden=[32]"]),
    "r2d2": (
        "cartpole",
        ["run.recipe='r2d2'", "r2d2.length=8", "r2d2.burn_in=4", "r2d2.period=4"],
    ),
    "hybrid": ("hybrid", []),
    "c51": (
        "cartpole",
        ["run.recipe='c51'", "c51.n_atoms=11", "c51.v_min=0", "c51.v_max=100", "dqn.hidden=[32]"],
    ),
    "user network": (
        "cartpole",
        ["dqn.network='tests.user_code.qnets:layernorm_mlp'", "replay.prioritized=true"],
    ),
}


def learner_and_samples(name: str):
    """A maker of a recipe's learner (each the same, as a serial runner on a CPU builds it)
    and 50 samples of the replay that runner filled."""
    preset, extra = RECIPES[name]
    cfg = load_config(
        preset,
        [
            *extra,
            "run.device='cpu'",
            "run.learning_starts=200",
            "run.progress=false",
            "dqn.batch_size=16",
        ],
    )
    runner = runner_for(cfg)(cfg)
    try:
        step = 0
        while not (step >= 300 and runner.replay_ready()):
            step += runner.collect(step).steps
        samples = [runner.replay.sample(16) for _ in range(UPDATES)]
        return runner.make_learner, samples
    finally:
        runner.stop()
        runner.close()


def run_updates(learner, samples):
    for s in samples:
        learner.step(learner.make_batch(s))
    return [t.detach().clone() for t in learner.state_tensors()]


def assert_same_state(got, want, atol=1e-5, rtol=1e-4):
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert torch.allclose(g, w, atol=atol, rtol=rtol), (
            f"tensor {i}: off by {float((g - w).abs().max()):.3g}"
        )


class StandInGraph:
    """CUDA's recording, as a CPU can do it: each replay runs the recorded function again
    and writes its outputs into the tensors the recording returned (as a graph's static
    outputs are written)."""

    def __init__(self) -> None:
        self.recorded = 0
        self.replays = 0

    def __call__(self, fn):
        self.recorded += 1
        out = tuple(t.clone() for t in fn())

        def replay() -> None:
            self.replays += 1
            for o, t in zip(out, fn()):
                o.copy_(t)

        return replay, out


# torch.compile's first compile of R2D2's sequence loss (a cold inductor cache, as on a
# fresh CI machine) took 71 s alone on 2 cores and over 300 s beside a second test suite:
# the limit is for a hang, not for a loaded machine.
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("name", list(RECIPES))
def test_every_recipe_learns_the_same_compiled_and_graphed_as_eager(name):
    make, samples = learner_and_samples(name)
    eager = run_updates(make(), samples)

    graphed = make()
    stand_in = StandInGraph()
    graphed.capture_with(stand_in)
    assert_same_state(run_updates(graphed, samples), eager, atol=1e-6, rtol=1e-5)
    assert stand_in.recorded == 1 and stand_in.replays == UPDATES - 3  # 3 eager warm-ups
    assert graphed.notes == []

    compiled = make()
    line = compiled.set_compile("compile")
    assert line == "update compiled loss"
    assert_same_state(run_updates(compiled, samples), eager)
    assert compiled.notes == []


def test_the_stacked_agents_update_graphed_and_compiled_is_the_eager_one():
    rng = np.random.default_rng(0)
    torch.manual_seed(0)
    cfg = DQNConfig(hidden=[16], target_period=7)
    stacked = StackedLearner([DQN(4, 3, cfg, device="cpu") for _ in range(4)])
    batches = []
    for _ in range(UPDATES):
        batches.append(stack_batches([random_batch(rng, 3) for _ in range(4)]))

    def run(learner):
        for b in batches:
            info = learner.step(b)
        assert info.loss.shape == (4,) and info.td_errors.shape == (4, 8)
        return [t.detach().clone() for t in learner.state_tensors()]

    eager = run(copy.deepcopy(stacked))
    graphed = copy.deepcopy(stacked)
    graphed.capture_with(StandInGraph())
    assert_same_state(run(graphed), eager, atol=1e-6, rtol=1e-5)
    compiled = copy.deepcopy(stacked)
    compiled.set_compile("compile")
    assert_same_state(run(compiled), eager)


def dqn_and_batches(n=10, seed=0):
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    learner = DQN(4, 2, DQNConfig(hidden=[16], target_period=3), device="cpu")
    return learner, [random_batch(rng, 2) for _ in range(n)]


def random_batch(rng: np.random.Generator, n_actions: int, size: int = 8) -> Batch:
    """A batch of ``size`` random transitions of a 4-float observation."""
    return Batch.from_numpy(
        {
            "obs": rng.normal(size=(size, 4)).astype(np.float32),
            "action": rng.integers(n_actions, size=size),
            "reward": rng.normal(size=size).astype(np.float32),
            "next_obs": rng.normal(size=(size, 4)).astype(np.float32),
            "discount": np.full(size, 0.9, np.float32),
        },
        "cpu",
    )


def test_a_stale_capture_falls_back_to_eager_with_a_line_and_the_same_result():
    """A recording whose replay does not do what eager does (a constant baked in, say) is
    caught at the first replay; every update's result is eager's."""

    def stale(fn):
        out = tuple(t.clone() for t in fn())
        return (lambda: None), out  # replays nothing

    learner, batches = dqn_and_batches()
    eager = copy.deepcopy(learner)
    want = [eager.step(b).td_errors for b in batches]
    learner.capture_with(stale)
    got = [learner.step(b).td_errors for b in batches]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6)
    assert_same_state(learner.state_tensors(), eager.state_tensors(), atol=0, rtol=0)
    assert len(learner.notes) == 1 and "the replay differs from eager" in learner.notes[0]


def test_a_capture_that_raises_falls_back_to_eager_with_a_line():
    def refuses(fn):
        fn()
        raise RuntimeError("operation not permitted when stream is capturing\nmore")

    learner, batches = dqn_and_batches()
    eager = copy.deepcopy(learner)
    for b in batches:
        eager.step(b)
    learner.capture_with(refuses)
    for b in batches:
        learner.step(b)
    assert_same_state(learner.state_tensors(), eager.state_tensors(), atol=0, rtol=0)
    assert learner.notes == [
        "update: eager, not captured (capture failed: RuntimeError: operation not permitted"
        " when stream is capturing)"
    ]


def test_a_batch_of_another_shape_runs_eagerly_beside_the_capture():
    learner, batches = dqn_and_batches(6)
    eager = copy.deepcopy(learner)
    short = Batch(**{k: v[:5] for k, v in vars(batches[-1]).items()})  # a last short batch
    for b in [*batches, short]:
        eager.step(b)
    stand_in = StandInGraph()
    learner.capture_with(stand_in)
    for b in [*batches, short]:
        learner.step(b)
    assert stand_in.replays == 6 - 3 and learner.notes == []
    assert_same_state(learner.state_tensors(), eager.state_tensors(), atol=1e-6, rtol=1e-5)


def test_auto_is_eager_on_a_cpu_and_graph_on_cuda_and_graph_needs_cuda():
    assert resolve_compile("auto", torch.device("cpu")) == ("off", "auto")
    assert resolve_compile("auto", torch.device("cuda"))[0] == "graph"
    assert resolve_compile("compile", torch.device("cpu"))[0] == "compile"
    with pytest.raises(ConfigError, match="config key 'run.compile': 'graph' captures"):
        resolve_compile("graph", torch.device("cpu"))


def test_graph_on_a_cpu_is_a_one_line_config_error_before_anything_runs():
    with pytest.raises(ConfigError, match="run.device is 'cpu'; use 'auto', 'off' or 'compile'"):
        load_config("cartpole", ["run.compile='graph'", "run.device='cpu'"])
    with pytest.raises(ConfigError, match="'run.compile': 'fast' is not one of"):
        load_config("cartpole", ["run.compile='fast'"])


def test_the_threads_runner_stays_eager_and_refuses_a_captured_update():
    cfg = load_config("cartpole", ["run.runner='threads'", "run.compile='compile'"])
    with pytest.raises(ConfigError, match="the threads runner's learner threads compute"):
        runner_for(cfg)(cfg)
    cfg = load_config("cartpole", ["run.runner='threads'"])
    runner = runner_for(cfg)(cfg)
    try:
        assert runner.learner.compile_mode == "off"
    finally:
        runner.stop()
        runner.close()


def test_auto_keeps_the_graph_only_where_its_replay_measured_faster():
    """'auto' times the eager warm-ups (the first aside) and the first three replays: a
    replay slower than eager goes back to eager with a line; a faster one stays. A clock
    that says what each took stands in for CUDA's."""
    from shoal.agent.capture import GraphedUpdate

    for replay_s, kept in ((0.020, False), (0.001, True)):
        learner, batches = dqn_and_batches(12)
        eager = copy.deepcopy(learner)
        for b in batches:
            eager.step(b)
        times = iter(sum(([0.0, d] for d in [0.010] * 3 + [replay_s] * 3), []))
        graphed = GraphedUpdate(learner, capture=StandInGraph(), measure=True, clock=times.__next__)
        learner._run_update, learner.notes = graphed, graphed.notes
        for b in batches:
            learner.step(b)
        assert graphed.captured is kept
        assert_same_state(learner.state_tensors(), eager.state_tensors(), atol=1e-6, rtol=1e-5)
        if kept:
            assert learner.notes == []
        else:
            assert learner.notes == [
                "update: eager, not captured (eager measured faster: 10.000 ms an update "
                "against 20.000 ms a replay)"
            ]


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_a_recurrent_burn_in_while_capturing_is_the_one_that_selects_rows(cell, monkeypatch):
    """While a CUDA graph records, R2D2's burn-in steps every row and keeps the stepped
    result where the burn-in has padding (no ``nonzero``, no host sync): the same Q-values
    as selecting those rows, on a batch where some have it and some do not."""
    import shoal.agent.networks as networks
    from shoal.agent.networks import RecurrentQNetwork

    torch.manual_seed(0)
    net = RecurrentQNetwork(4, 3, hidden=[16], state_dim=8, cell=cell)
    params = dict(net.named_parameters())
    obs, state = torch.randn(5, 9, 4), torch.randn(5, net.state_size)
    mask = torch.ones(5, 9, dtype=torch.bool)
    mask[0, :2] = False  # episodes that begin inside the burn-in
    mask[3, :1] = False
    want = net.unroll(params, obs, state, mask, burn_in=4)
    monkeypatch.setattr(networks, "capturing", lambda: True)
    got = net.unroll(params, obs, state, mask, burn_in=4)
    assert torch.allclose(got, want, atol=1e-6)


def test_a_recipe_whose_learner_is_not_a_shoal_learner_is_one_line_before_any_work():
    cfg = load_config("cartpole", ["run.recipe='tests.user_code.recipes:NotALearner'"])
    with pytest.raises(ConfigError, match="makes a learner of type Stepper, not a shoal"):
        runner_for(cfg)(cfg)


def test_a_changed_learning_rate_is_captured_again_not_replayed_stale():
    """A recording holds the learning rate as a constant: set a new one (a schedule
    would) and the next update records again, and learns as eager does with it."""
    learner, batches = dqn_and_batches(10)
    eager = copy.deepcopy(learner)
    stand_in = StandInGraph()
    learner.capture_with(stand_in)
    for i, b in enumerate(batches):
        if i == 6:
            for opt in (learner.optimizer, eager.optimizer):
                for group in opt.param_groups:
                    group["lr"] = 0.5
                opt.lr = 0.5  # shoal's fused Adam keeps it as an attribute
        eager.step(b)
        learner.step(b)
    assert stand_in.recorded == 2
    assert learner.notes == ["update: captured again (a learning rate, eps, clip or tau changed)"]
    assert_same_state(learner.state_tensors(), eager.state_tensors(), atol=1e-6, rtol=1e-5)
