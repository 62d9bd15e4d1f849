"""The DQN learner, its pure loss, the shared TD target and the actor."""

import numpy as np
import pytest
import torch

import shoal.agent.losses as losses
import shoal.agent.qlearning as qlearning
import shoal.agent.targets as targets
from shoal.agent.actor import Actor, epsilon_greedy_action
from shoal.agent.builder import build_actor
from shoal.agent.learner import DQN, resolve_device
from shoal.agent.losses import Batch, DQNLoss, bootstrap_values
from shoal.agent.networks import QNetwork
from shoal.agent.schedules import LinearSchedule
from shoal.config import DQNConfig, load_config
from shoal.envs import probe_env
from shoal.sync.weights import LocalWeightStore

pytestmark = pytest.mark.timeout(60)


def make_batch(n=8, obs_dim=3, n_actions=2, seed=0, discount=0.9):
    rng = np.random.default_rng(seed)
    return Batch.from_numpy(
        {
            "obs": rng.normal(size=(n, obs_dim)).astype(np.float32),
            "action": rng.integers(n_actions, size=n),
            "reward": rng.normal(size=n).astype(np.float32),
            "next_obs": rng.normal(size=(n, obs_dim)).astype(np.float32),
            "discount": np.where(rng.random(n) < 0.3, 0.0, discount).astype(np.float32),
            "weights": rng.uniform(0.2, 1.0, size=n).astype(np.float32),
        },
        "cpu",
    )


def make_dqn(**kw):
    torch.manual_seed(0)
    return DQN(3, 2, DQNConfig(hidden=[8], **kw), device="cpu")


def params_of(learner):
    return list(learner.params.values())


def shifted(params, by):
    return {k: v.detach() + by for k, v in params.items()}


@pytest.mark.parametrize("dueling", [False, True])
@pytest.mark.parametrize("double", [False, True])
def test_loss_matches_hand_computed_target(dueling, double):
    dqn = make_dqn(dueling=dueling, double=double)
    with torch.no_grad():  # make target differ from online so double matters
        for p in dqn.target.parameters():
            p.add_(0.3)
    b = make_batch()
    loss, td = dqn.loss(dqn.params, dqn.target_params, b)
    with torch.no_grad():
        q = dqn.online(b.obs)[torch.arange(8), b.action]
        q_next_target = dqn.target(b.next_obs)
        if double:
            a_star = dqn.online(b.next_obs).argmax(1)
        else:
            a_star = q_next_target.argmax(1)
        y = b.reward + b.discount * q_next_target[torch.arange(8), a_star]
        err = y - q
        huber = torch.where(err.abs() <= 1, 0.5 * err**2, err.abs() - 0.5)
        expected = (b.weights * huber).mean()
    torch.testing.assert_close(td, err)
    torch.testing.assert_close(loss.detach(), expected)


# --- the pure loss ------------------------------------------------------------------------


@pytest.mark.parametrize("dueling", [False, True])
@pytest.mark.parametrize("double", [False, True])
def test_loss_is_pure_in_its_parameters(dueling, double):
    """DQNLoss reads only the parameters it is given: the module's own weights (here
    scrambled) do not matter, and other parameters give another loss."""
    torch.manual_seed(0)
    net = QNetwork(3, 2, hidden=[8], dueling=dueling)
    loss_fn = DQNLoss(net, double=double)
    params = {k: v.detach().clone() for k, v in net.named_parameters()}
    target = shifted(params, 0.3)
    b = make_batch()
    loss, td = loss_fn(params, target, b)
    with torch.no_grad():
        for p in net.parameters():
            p.normal_()  # the module's own weights change; the given ones do not
    again, td_again = loss_fn(params, target, b)
    assert torch.equal(loss, again) and torch.equal(td, td_again)
    other, other_td = loss_fn(shifted(params, 0.1), target, b)
    assert not torch.isclose(other, loss) and not torch.allclose(other_td, td)
    other_target, _ = loss_fn(params, shifted(target, 0.2), b)
    assert not torch.isclose(other_target, loss)
    # the loss is differentiable in the given parameters, not in the module's
    given = {k: v.clone().requires_grad_(True) for k, v in params.items()}
    grads = torch.autograd.grad(loss_fn(given, target, b)[0], list(given.values()))
    assert all(g is not None for g in grads) and all(p.grad is None for p in net.parameters())


def test_loss_equals_the_learners():
    """The learner's loss is DQNLoss over its own parameters: a loss built on another
    network of the same shape (other weights) gives the same value, TD errors and
    gradients."""
    dqn = make_dqn(double=True, huber_delta=0.5)
    with torch.no_grad():
        for p in dqn.target.parameters():
            p.add_(0.3)
    torch.manual_seed(123)
    standalone = DQNLoss(QNetwork(3, 2, hidden=[8], dueling=True), double=True, huber_delta=0.5)
    b = make_batch()
    loss, td = standalone(dqn.params, dqn.target_params, b)
    own_loss, own_td = dqn.loss(dqn.params, dqn.target_params, b)
    torch.testing.assert_close(loss, own_loss, rtol=0, atol=0)
    torch.testing.assert_close(td, own_td, rtol=0, atol=0)
    grads, info = dqn.gradients(b)
    expected = torch.autograd.grad(loss, params_of(dqn))
    assert info.loss == pytest.approx(float(loss.detach()))
    np.testing.assert_array_equal(info.td_errors, td.numpy())
    for g, e in zip(grads, expected):
        torch.testing.assert_close(g, e, rtol=0, atol=0)


@pytest.mark.parametrize("image", [False, True])
def test_merged_and_split_forwards_agree(image):
    """Double DQN's online forward over obs and next_obs as one batch (MLPs) or two
    (convolutions, where the merged backward does twice the work): the same loss, TD errors
    and gradients either way, and convolutions take the split path by default."""
    from shoal.agent.networks import ImageEncoder

    torch.manual_seed(0)
    obs_dim = 2 * 8 * 8 if image else 3
    enc = ImageEncoder((2, 8, 8), kind="minatar") if image else None
    net = QNetwork(obs_dim, 2, hidden=[8], dueling=True, image=enc)
    loss_fn = DQNLoss(net, double=True)
    assert loss_fn.merge_next is not image
    b = make_batch(obs_dim=obs_dim)
    params = dict(net.named_parameters())
    target = shifted(params, 0.1)
    out = {}
    for merge in (True, False):
        loss_fn.merge_next = merge
        loss, td = loss_fn(params, target, b)
        out[merge] = (loss, td, torch.autograd.grad(loss, list(params.values())))
    torch.testing.assert_close(out[True][0], out[False][0])
    torch.testing.assert_close(out[True][1], out[False][1])
    for g, e in zip(out[True][2], out[False][2]):
        torch.testing.assert_close(g, e)


# --- the one TD target --------------------------------------------------------------------


def test_td_target_formula():
    assert targets.td_target(1.0, 0.9, 2.0) == pytest.approx(2.8)
    assert targets.td_target(1.0, 0.0, 2.0) == 1.0
    r, d, v = np.array([1.0, 2.0]), np.array([0.5, 0.0]), np.array([4.0, 8.0])
    np.testing.assert_allclose(targets.td_target(r, d, v), [3.0, 2.0])
    t = targets.td_target(torch.tensor([1.0]), torch.tensor([0.5]), torch.tensor([4.0]))
    assert t.tolist() == [3.0]


def test_td_target_is_shared_by_qlearning_and_dqn(monkeypatch):
    """Tabular Q-learning and the DQN loss both compute their targets through
    ``shoal.agent.targets.td_target``."""
    calls = []

    def spy(reward, discount, next_value):
        calls.append(type(reward).__name__)
        return targets.td_target(reward, discount, next_value)

    # qlearning imports the shared function (under whatever name) and calls it
    names = [n for n, v in vars(qlearning).items() if v is targets.td_target]
    assert names, "shoal.agent.qlearning does not use shoal.agent.targets.td_target"
    for name in names:
        monkeypatch.setattr(qlearning, name, spy)
    assert losses.td_target is targets.td_target
    monkeypatch.setattr(losses, "td_target", spy)

    assert qlearning.td_target(1.0, 0.9, np.array([2.0, -1.0]), False) == pytest.approx(2.8)
    assert qlearning.td_target(1.0, 0.9, np.array([2.0]), True) == 1.0
    assert qlearning.td_target(1.0, 0.9, None, False) == 1.0
    assert len(calls) == 3

    dqn = make_dqn(double=True)
    b = make_batch()
    _, td = dqn.loss(dqn.params, dqn.target_params, b)
    assert calls[-1] == "Tensor" and len(calls) == 4
    with torch.no_grad():  # the DQN target is the same formula on the bootstrap value
        value = bootstrap_values(dqn.online(b.next_obs), dqn.target(b.next_obs), b.next_obs)
        q_a = dqn.online(b.obs).gather(1, b.action[:, None]).squeeze(1)
    torch.testing.assert_close(td, targets.td_target(b.reward, b.discount, value) - q_a)


# --- gradients, apply, step ---------------------------------------------------------------


def test_gradients_have_no_side_effects_and_step_equals_gradients_plus_apply():
    a, b_ = make_dqn(), make_dqn()
    batch = make_batch()
    before = [p.detach().clone() for p in params_of(a)]
    grads, info = a.gradients(batch)
    assert all(p.grad is None for p in params_of(a))
    assert all(torch.equal(p, q) for p, q in zip(params_of(a), before))
    assert info.td_errors.shape == (8,)
    a.apply(grads)
    b_.step(batch)
    for p, q in zip(params_of(a), params_of(b_)):
        torch.testing.assert_close(p, q, rtol=0, atol=0)
    assert a.updates == b_.updates == 1


def test_apply_clips_gradient_norm():
    dqn = make_dqn(max_grad_norm=0.5, lr=1.0)
    grads = [torch.full_like(p, 100.0) for p in params_of(dqn)]
    norm = dqn.apply(grads)
    assert norm > 0.5
    assert all(p.grad is None for p in params_of(dqn))
    # Adam normalises the step, so check clipping on the .grad the optimizer saw instead.
    dqn2 = make_dqn(max_grad_norm=0.5)
    for p, g in zip(params_of(dqn2), grads):
        p.grad = g.clone()
    torch.nn.utils.clip_grad_norm_(params_of(dqn2), 0.5)
    total = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in params_of(dqn2)]))
    assert total == pytest.approx(0.5, rel=1e-5)


def test_hard_target_update_every_period():
    dqn = make_dqn(target_update="hard", target_period=3)
    batch = make_batch()
    start = [p.clone() for p in dqn.target.parameters()]
    for i in range(1, 7):
        dqn.step(batch)
        same = all(torch.equal(t, s) for t, s in zip(dqn.target.parameters(), start))
        if i % 3 == 0:
            assert all(torch.equal(t, p) for t, p in zip(dqn.target.parameters(), params_of(dqn)))
            start = [p.clone() for p in dqn.target.parameters()]
        else:
            assert same


def test_soft_target_update_is_polyak():
    dqn = make_dqn(target_update="soft", tau=0.25)
    old_target = [p.clone() for p in dqn.target.parameters()]
    dqn.step(make_batch())
    for t, o, p in zip(dqn.target.parameters(), old_target, params_of(dqn)):
        torch.testing.assert_close(t, 0.75 * o + 0.25 * p.detach())


def test_target_params_are_the_target_networks():
    dqn = make_dqn(target_update="hard", target_period=1)
    dqn.step(make_batch())
    for (name, t), (tname, tp) in zip(dqn.target_params.items(), dqn.target.named_parameters()):
        assert name == tname and t is tp
    assert set(dqn.params) == set(dqn.weights()) == set(dqn.target_params)


def test_state_dict_round_trip():
    a, b_ = make_dqn(), make_dqn()
    a.step(make_batch())
    b_.load_state_dict(a.state_dict())
    assert b_.updates == 1
    batch = make_batch(seed=1)
    a.step(batch)
    b_.step(batch)
    for p, q in zip(params_of(a), params_of(b_)):
        assert torch.equal(p, q)


def test_make_batch_is_on_the_learners_device():
    dqn = make_dqn()
    rng = np.random.default_rng(0)
    b = dqn.make_batch(
        {
            "obs": rng.normal(size=(4, 3)),
            "action": np.zeros(4),
            "reward": np.zeros(4),
            "next_obs": rng.normal(size=(4, 3)),
            "discount": np.ones(4),
        }
    )
    assert b.obs.device == dqn.device and b.obs.dtype == torch.float32
    assert b.action.dtype == torch.int64 and torch.equal(b.weights, torch.ones(4))


# --- acting -------------------------------------------------------------------------------


def make_actor(dqn, seed=0, **kw):
    return Actor(dqn.online, params=dqn.params, n_actions=2, rng=np.random.default_rng(seed), **kw)


def test_act_epsilon_extremes():
    dqn = make_dqn()
    actor = make_actor(dqn)
    obs = np.zeros(3, np.float32)
    greedy = int(actor.greedy(obs[None])[0])
    actor.epsilon = 0.0
    assert all(actor.select_action(obs)[0] == greedy for _ in range(20))
    actor.epsilon = 1.0
    acts = {actor.select_action(obs)[0] for _ in range(200)}
    assert acts == {0, 1}


def test_actor_greedy_follows_the_learners_live_params():
    dqn = make_dqn()
    actor = make_actor(dqn)
    obs = np.random.default_rng(0).normal(size=(64, 3)).astype(np.float32)
    with torch.no_grad():
        expected = dqn.online(torch.as_tensor(obs)).argmax(1).numpy()
    np.testing.assert_array_equal(actor.greedy(obs), expected)
    for _ in range(20):
        dqn.step(make_batch(n=32))
    with torch.no_grad():
        expected = dqn.online(torch.as_tensor(obs)).argmax(1).numpy()
    np.testing.assert_array_equal(actor.greedy(obs), expected)


def test_select_action_carries_the_state():
    actor = make_actor(make_dqn())
    actor.epsilon = 0.0
    assert actor.initial_state() is None
    state = object()
    _, out = actor.select_action(np.zeros(3, np.float32), state)
    assert out is state


def test_epsilon_greedy_action_masked_random_picks_legal_only():
    rng = np.random.default_rng(0)
    obs = np.array([0.5, 0.0, 1.0, 0.0, 1.0], np.float32)  # 3 actions, 0 and 2 legal

    def never(batch):
        raise AssertionError("no forward pass on a random action")

    picks = {epsilon_greedy_action(never, obs, 1.0, rng, 3, masked=True) for _ in range(100)}
    assert picks == {0, 2}
    unmasked = {epsilon_greedy_action(never, obs, 1.0, rng, 3) for _ in range(100)}
    assert unmasked == {0, 1, 2}
    assert epsilon_greedy_action(lambda b: np.array([1]), obs, 0.0, rng, 3) == 1


def test_actor_update_pulls_only_newer_weights_and_reads_meta():
    torch.manual_seed(0)
    net = QNetwork(3, 2, hidden=[8], dueling=False).requires_grad_(False)
    store = LocalWeightStore()
    actor = Actor(net, source=store, n_actions=2, rng=np.random.default_rng(0))
    assert actor.version == -1 and not actor.update()  # nothing published yet
    obs = np.random.default_rng(1).normal(size=(64, 3)).astype(np.float32)

    def q_under(state):
        with torch.no_grad():
            return net.apply_params(state, torch.as_tensor(obs)).argmax(1).numpy()

    # A published state whose greedy actions differ from the template's own weights.
    a = {k: torch.randn_like(v) for k, v in net.state_dict().items()}
    while np.array_equal(q_under(a), q_under(net.state_dict())):
        a = {k: torch.randn_like(v) for k, v in net.state_dict().items()}
    assert store.publish(a, {"epsilon": 0.25}, version=5) == 5
    assert actor.update()
    assert actor.version == 5 and actor.meta == {"epsilon": 0.25}
    np.testing.assert_array_equal(actor.greedy(obs), q_under(a))
    assert not actor.update()  # nothing newer
    store.publish({k: v + 1 for k, v in a.items()}, {"epsilon": 0.9}, version=4)
    assert not actor.update() and actor.version == 5  # older: ignored
    np.testing.assert_array_equal(actor.greedy(obs), q_under(a))
    b = {k: -v for k, v in a.items()}
    assert store.publish(b, {"epsilon": 0.1}) == 6
    assert actor.update() and actor.version == 6 and actor.meta["epsilon"] == 0.1
    np.testing.assert_array_equal(actor.greedy(obs), q_under(b))
    # the actor acts with what the store handed out; the template stays untouched
    assert not torch.equal(net.state_dict()["head.weight"], b["head.weight"])


def test_actor_without_source_never_updates():
    actor = make_actor(make_dqn())
    assert not actor.update() and actor.version == -1


def test_build_actor_from_config():
    cfg = load_config("cartpole", ["dqn.hidden=[8]"])
    spec = probe_env(cfg.env)
    store = LocalWeightStore()
    learner = DQN(spec.obs_dim, spec.n_actions, cfg.dqn, device="cpu")
    actor = build_actor(cfg, spec, np.random.default_rng(0), source=store)
    assert actor.n_actions == spec.n_actions and not actor.action_mask
    assert not any(p.requires_grad for p in actor.network.parameters())
    store.publish(learner.weights(), {"epsilon": 0.5})
    assert actor.update()
    obs = np.random.default_rng(0).normal(size=(16, spec.obs_dim)).astype(np.float32)
    with torch.no_grad():
        expected = learner.online(torch.as_tensor(obs)).argmax(1).numpy()
    np.testing.assert_array_equal(actor.greedy(obs), expected)


# --- the rest -----------------------------------------------------------------------------


def test_linear_schedule():
    s = LinearSchedule(1.0, 0.1, 10)
    assert s(0) == 1.0 and s(10) == pytest.approx(0.1) and s(100) == pytest.approx(0.1)
    assert s(5) == pytest.approx(0.55)


def test_device_resolution():
    assert resolve_device("cpu").type == "cpu"
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == expected


def test_board_encoder_network_learns_through_the_same_interface():
    from shoal.agent.networks import BoardEncoder

    torch.manual_seed(0)
    cfg = DQNConfig(hidden=[16], board=[2, 2, 1], conv=[4])
    dqn = DQN(4 + 3, 2, cfg, device="cpu")
    assert isinstance(dqn.online.torso[0], BoardEncoder)
    rng = np.random.default_rng(0)
    batch = Batch.from_numpy(
        {
            "obs": rng.normal(size=(8, 7)).astype(np.float32),
            "action": rng.integers(2, size=8),
            "reward": np.ones(8, np.float32),
            "next_obs": rng.normal(size=(8, 7)).astype(np.float32),
            "discount": np.full(8, 0.9, np.float32),
        },
        "cpu",
    )
    before = {k: p.clone() for k, p in dqn.params.items()}
    dqn.step(batch)
    assert any(not torch.equal(before[k], dqn.params[k]) for k in before)
    assert not torch.equal(before["torso.0.conv.0.weight"], dqn.params["torso.0.conv.0.weight"])
    x = torch.as_tensor(rng.normal(size=(5, 7)), dtype=torch.float32)
    with torch.no_grad():
        torch.testing.assert_close(dqn.online(x), dqn.online.apply_params(dqn.params, x))


def test_board_network_step_equals_plain_adam():
    """The learner's (fused) Adam step equals torch's plain Adam on every parameter, the
    board encoder's convolutions included."""
    cfg = DQNConfig(hidden=[16], board=[2, 3, 2], conv=[4, 4], lr=0.01, action_mask=True)
    torch.manual_seed(0)
    learner = DQN(15, 3, cfg, device="cpu")
    torch.manual_seed(0)
    plain = DQN(15, 3, cfg, device="cpu")
    plain.optimizer = torch.optim.Adam(list(plain.params.values()), lr=cfg.lr, eps=cfg.adam_eps)
    rng = np.random.default_rng(0)
    for _ in range(3):
        obs = rng.normal(size=(8, 15)).astype(np.float32)
        obs[:, -3:] = 1.0
        batch = Batch.from_numpy(
            {
                "obs": obs,
                "action": rng.integers(3, size=8),
                "reward": rng.normal(size=8).astype(np.float32),
                "next_obs": obs[::-1].copy(),
                "discount": np.full(8, 0.9, np.float32),
            },
            "cpu",
        )
        learner.step(batch)
        plain.step(batch)
    for name, p in learner.params.items():
        torch.testing.assert_close(p, plain.params[name], rtol=0, atol=1e-6, msg=name)


def test_a_restored_learner_takes_the_configured_learning_rate():
    """A resumed run with ``--set dqn.lr=...`` means the new rate, though the optimizer's
    state dict carries the old one."""
    a, b_ = make_dqn(), make_dqn(lr=0.1)
    a.step(make_batch())
    b_.load_state_dict(a.state_dict())
    assert b_.optimizer.param_groups[0]["lr"] == 0.1
    assert a.optimizer.param_groups[0]["lr"] != 0.1
