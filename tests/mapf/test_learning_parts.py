"""MAPF learning parts: the packed joint observation, the shared network (its unroll equals
stepping it, padding rows change nothing), sequences through replay keep the memory stored
at their first burn-in step, n-step targets over sequences, the sequence loss's masks and
priorities, the curriculum."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from shoal.agent.sequence_loss import SequenceBatch, SequenceDQNLoss, nstep_targets, unroll
from shoal.config import load_config
from shoal.envs.mapf import REWARD_COLLISION, MapfEnv
from shoal.mapf.config import MapfConfig
from shoal.mapf.curriculum import Curriculum, draw_stage
from shoal.mapf.network import CommQNetwork, JointLayout
from shoal.mapf.player import (
    MapfPlayer,
    build_network,
    make_world,
    play_greedy,
    sequence_specs,
)
from shoal.replay import ReplayBuffer

pytestmark = pytest.mark.timeout(120)

SMALL = [
    'env.id="shoal/Mapf-v0"',
    "mapf.envs=3",
    "mapf.agents=3",
    "mapf.max_agents=4",
    "mapf.size=6",
    "mapf.channels=4",
    "mapf.hidden=8",
    "mapf.heads=2",
    "r2d2.length=4",
    "r2d2.burn_in=3",
    "r2d2.period=2",
    "mapf.max_steps=12",
]


def small_cfg(*extra: str):
    return load_config(None, [*SMALL, *extra])


def random_params(net: torch.nn.Module, seed: int = 0) -> dict[str, torch.Tensor]:
    torch.manual_seed(seed)
    return {k: torch.randn_like(v) * 0.3 for k, v in net.state_dict().items()}


def test_packed_joint_observations_round_trip():
    layout = JointLayout(max_agents=5, fov=3)
    rng = np.random.default_rng(0)
    view = (rng.random((3, 6, 3, 3)) < 0.5).astype(np.float32)
    comm = rng.random((3, 3)) < 0.5
    joint = layout.unpack(torch.as_tensor(np.stack([layout.pack(view, comm)] * 2)))
    assert joint.valid.tolist() == [[True] * 3 + [False] * 2] * 2
    np.testing.assert_array_equal(joint.view[1, :3].numpy(), view)
    assert not joint.view[:, 3:].any() and not joint.comm[:, 3:].any()
    np.testing.assert_array_equal(joint.comm[0, :3, :3].numpy(), comm)
    with pytest.raises(ValueError, match="6 agents do not fit"):
        layout.pack(np.zeros((6, 6, 3, 3)), np.eye(6, dtype=bool))


def world_obs(layout: JointLayout, steps: int, seed: int = 0) -> np.ndarray:
    """Packed joint observations of a 3-agent world played at random (comm included)."""
    env = MapfEnv(3, size=6, density=0.1, k_comm=3)
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(steps):
        out.append(layout.pack(env.last_obs, env.comm_mask()))
        if not env.agents:
            env.reset()
        env.step({a: int(rng.integers(5)) for a in env.possible_agents})
    return np.stack(out)


def test_unroll_equals_stepping_the_network_and_masked_slots_keep_the_state():
    net = CommQNetwork(JointLayout(4), channels=4, blocks=1, hidden=8, heads=2)
    params = random_params(net)
    obs = torch.as_tensor(np.stack([world_obs(net.layout, 7, seed) for seed in (1, 2)]))
    state = torch.randn(2, 4, 8)
    mask = torch.tensor([[False, False, True, True, True, True, True]] * 2)
    mask[1, 6] = False
    q = unroll(net, params, obs, state, mask, burn_in=3)
    h = state.clone()
    for t in range(7):
        q_t, nxt = net.apply_params(params, obs[:, t], h)
        torch.testing.assert_close(q[:, t], q_t)
        h = torch.where(mask[:, t, None, None], nxt, h)
    # leading padding left the stored state as it was: slot 2 acts from ``state`` itself
    torch.testing.assert_close(q[:, 2], net.apply_params(params, obs[:, 2], state)[0])
    # gradients reach the training slots only
    params = {k: v.requires_grad_() for k, v in params.items()}
    q = unroll(net, params, obs, state, mask, burn_in=3)
    names = list(params)
    for slots, reached in ((slice(0, 3), False), (slice(3, 7), True)):
        grads = torch.autograd.grad(
            q[:, slots].sum(), [params[k] for k in names], allow_unused=True, retain_graph=True
        )
        assert any(g is not None and g.abs().sum() > 0 for g in grads) == reached


def test_padding_rows_and_the_layout_size_change_no_real_agent_q():
    small = CommQNetwork(JointLayout(3), channels=4, hidden=8, heads=2)
    params = random_params(small)
    wide = small.for_agents(6)
    obs3 = torch.as_tensor(world_obs(small.layout, 5))
    obs6 = torch.as_tensor(world_obs(wide.layout, 5))
    h3, h6 = small.initial_state(1), wide.initial_state(1)
    for t in range(5):
        q3, h3 = small.apply_params(params, obs3[t : t + 1], h3)
        q6, h6 = wide.apply_params(params, obs6[t : t + 1], h6)
        torch.testing.assert_close(q3[0], q6[0, :3])
        torch.testing.assert_close(h3[0], h6[0, :3])


def test_communication_changes_q_only_when_agents_talk():
    net = CommQNetwork(JointLayout(3), channels=4, hidden=8, heads=2)
    blind = CommQNetwork(JointLayout(3), channels=4, hidden=8, heads=2, comm=False)
    params = random_params(net)
    layout = net.layout
    view = (np.random.default_rng(0).random((3, 6, 9, 9)) < 0.3).astype(np.float32)
    apart = torch.as_tensor(layout.pack(view, np.eye(3, dtype=bool)))[None]
    talking = np.ones((3, 3), bool)
    talking[2, :2] = talking[:2, 2] = False  # agents 0 and 1 talk, 2 is alone
    near = torch.as_tensor(layout.pack(view, talking))[None]
    h = torch.randn(1, 3, 8)
    q_blind = blind.apply_params(params, near, h)[0]
    torch.testing.assert_close(net.apply_params(params, apart, h)[0], q_blind)
    q_near = net.apply_params(params, near, h)[0]
    assert not torch.allclose(q_near[0, :2], q_blind[0, :2])
    torch.testing.assert_close(q_near[0, 2], q_blind[0, 2])


class RecordingPlayer(MapfPlayer):
    """Records, per world, each step's packed observation and the memory held before it."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.log: list[list[tuple[np.ndarray, np.ndarray]]] = [[] for _ in self.worlds]

    def _step(self, w, world, obs, actions, state, out) -> None:
        self.log[w].append((obs.copy(), state.copy()))
        super()._step(w, world, obs, actions, state, out)


def test_sampled_sequences_carry_the_memory_held_at_their_first_burn_in_step():
    cfg = small_cfg()
    m = cfg.extra["mapf"]
    net = build_network(m)
    params = random_params(net)
    player = RecordingPlayer(cfg, net, seeds=(0, 1), rng=np.random.default_rng(0))
    items = []
    for _ in range(10):
        got = player.play(4, params, epsilon=0.5, stages=[(3, 6), (2, 6)])
        items += got.items
        assert len(got.priorities) == len(got.items) and (got.priorities >= 0).all()
    assert items
    buffer = ReplayBuffer.from_specs(len(items), sequence_specs(cfg), prioritized=True, seed=0)
    buffer.add_many(items, priorities=np.ones(len(items)))
    steps = [entry for world in player.log for entry in world]
    nonzero = 0
    for item in _rows(buffer.sample(64)):
        lo = cfg.r2d2.burn_in - int(item["burn_in"])
        valid = int(item["mask"].sum())
        # the step whose observations the item's valid slots repeat, in order
        starts = [
            k
            for k in range(len(steps) - valid + 1)
            if all(np.array_equal(steps[k + j][0], item["obs"][lo + j]) for j in range(valid))
        ]
        assert starts, "no recorded steps match the item"
        # (agents that stand still can repeat a stretch of observations: any match will do)
        assert any(np.array_equal(item["state"], steps[k][1]) for k in starts)
        nonzero += bool(np.any(item["state"]))
    assert nonzero > 0  # items that start mid-episode carry a memory, not zeros


def _rows(batch: dict[str, np.ndarray]):
    for i in range(len(batch["indices"])):
        yield {k: v[i] for k, v in batch.items()}


def test_the_acting_memory_equals_the_unroll_of_the_stored_sequence():
    """What the player acted on (Q and memories, one step at a time) is what the learner's
    unroll of the stored item computes from its stored state."""
    cfg = small_cfg("r2d2.burn_in=0", "r2d2.length=5", "r2d2.period=5")
    m = cfg.extra["mapf"]
    net = build_network(m)
    params = random_params(net, seed=3)
    player = RecordingPlayer(cfg, net, seeds=(0, 2), rng=np.random.default_rng(1))
    got = player.play(11, params, epsilon=0.3, stages=[(3, 6)])
    first = [k for k, item in enumerate(got.items) if int(item["mask"].sum()) == 5][0]
    item = got.items[first]
    obs = torch.as_tensor(item["obs"])[None]
    mask = torch.as_tensor(np.append(item["mask"], True))[None]
    q = unroll(net, params, obs, torch.as_tensor(item["state"])[None], mask, 0)
    h = torch.as_tensor(item["state"])[None]
    for t in range(5):
        q_t, h = net.apply_params(params, obs[:, t], h)
        torch.testing.assert_close(q[:, t], q_t)
    world = next(w for w in player.log if any(np.array_equal(o, item["obs"][0]) for o, _ in w))
    k = next(i for i, (o, _) in enumerate(world) if np.array_equal(o, item["obs"][0]))
    np.testing.assert_array_equal(world[k][1], item["state"])
    h = torch.as_tensor(item["state"])[None]
    for t in range(1, 5):  # the memories the player carried on are the unroll's
        _, h = net.apply_params(params, obs[:, t - 1], h)
        np.testing.assert_allclose(world[k + t][1], h[0].numpy(), rtol=1e-5, atol=1e-6)


def test_the_recurrent_actor_equals_a_step_by_step_unroll_and_explores_per_agent():
    from shoal.agent.actor import Actor

    net = CommQNetwork(JointLayout(3), channels=4, hidden=8, heads=2)
    params = random_params(net, seed=4)
    obs = world_obs(net.layout, 6, seed=5)
    actor = Actor(net, params=params, n_actions=5, rng=np.random.default_rng(0))
    actor.epsilon = 0.0
    state = None
    q_all = unroll(
        net,
        params,
        torch.as_tensor(obs)[None],
        net.initial_state(1),
        torch.ones(1, 6, dtype=torch.bool),
        0,
    )
    for t in range(6):
        actions, state = actor.select_action(obs[t], state)
        np.testing.assert_array_equal(actions, q_all[0, t].argmax(-1).numpy())
    actor.epsilon = 1.0
    drawn = np.stack([actor.select_action(obs[0], None)[0] for _ in range(200)])
    assert drawn.shape == (200, 3) and len({tuple(row) for row in drawn}) > 50


def test_nstep_targets_stop_at_termination_and_bootstrap_after_the_last_valid_step():
    # one agent, 5 slots: valid 0..3, a termination at slot 1 in item 0; item 1 truncated
    reward = torch.tensor([[1.0, 2.0, 4.0, 8.0, 0.0], [1.0, 2.0, 4.0, 8.0, 0.0]])
    discount = torch.tensor([[1.0, 0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0, 0.0]])
    mask = torch.tensor([[True, True, False, False, False], [True, True, True, True, False]])
    value = torch.arange(6, dtype=torch.float32).expand(2, 6) * 10  # V(obs_i) = 10 i
    g = 0.5
    got = nstep_targets(reward, discount, mask, value, start=0, n_step=2, gamma=g)
    # item 0: slot 0 = r0 + g d0 r1, then d0 d1 = 0 stops the bootstrap; slot 1 = r1
    assert got[0, :2].tolist() == [1 + g * 2, 2.0]
    # item 1: slot i = r_i + g r_{i+1} + g^2 V(i+2); slot 3 has one step left: r3 + g V(4)
    expected = [1 + g * 2 + g * g * 20, 2 + g * 4 + g * g * 30, 4 + g * 8 + g * g * 40]
    assert got[1, :3].tolist() == pytest.approx(expected)
    assert got[1, 3].item() == pytest.approx(8 + g * 40)
    # agent dimensions broadcast: two agents with their own rewards and values
    two = nstep_targets(
        torch.stack([reward, 2 * reward], -1),
        discount,
        mask,
        torch.stack([value, value], -1),
        start=1,
        n_step=2,
        gamma=g,
    )
    torch.testing.assert_close(two[..., 0], got[:, 1:])


def test_the_sequence_loss_ignores_padding_agents_and_mixes_priorities():
    cfg = small_cfg()
    m = cfg.extra["mapf"]
    net = build_network(m)
    params = random_params(net)
    player = MapfPlayer(cfg, net, seeds=(0, 3), rng=np.random.default_rng(0))
    items = player.play(12, params, epsilon=1.0, stages=[(2, 6)]).items
    batch = {k: np.stack([it[k] for it in items]) for k in items[0]}
    loss = SequenceDQNLoss(net, burn_in=cfg.r2d2.burn_in, n_step=2, gamma=0.9, eta=0.9)
    target = random_params(net, seed=1)
    base, prio = loss(params, target, SequenceBatch.from_numpy(batch, "cpu"))
    changed = {**batch, "reward": batch["reward"].copy(), "action": batch["action"].copy()}
    changed["reward"][..., 2:] = 100.0  # agents 2-3 are padding in a 2-agent stage
    changed["action"][..., 2:] = 4
    again, prio2 = loss(params, target, SequenceBatch.from_numpy(changed, "cpu"))
    torch.testing.assert_close(base, again)
    torch.testing.assert_close(prio, prio2)
    delta, valid = loss.td_errors(params, target, SequenceBatch.from_numpy(batch, "cpu"))
    size = delta.abs() * valid
    dims = (1, 2)
    expected = 0.9 * size.amax(dims) + 0.1 * size.sum(dims) / valid.sum(dims)
    torch.testing.assert_close(prio, expected)
    assert valid[..., 2:].sum() == 0 and valid[..., :2].sum() > 0


def test_training_worlds_follow_the_sections_rules():
    cfg = MapfConfig(fov=5, k_comm=2, max_steps=50, stay_off_goal=-0.2, density=0.1)
    env = make_world(cfg, (3, 15))
    assert (env.max_num_agents, env.fov, env.k_comm, env.max_steps) == (3, 5, 2, 50)
    assert (env.stay_off_goal, env.density) == (-0.2, 0.1)
    env.reset(seed=0)
    assert env.grid.shape == (15, 15)


def test_curriculum_opens_stages_after_enough_successes_and_keeps_them():
    cfg = MapfConfig(agents=1, size=10, max_agents=2, max_size=15, promote_episodes=4)
    cur = Curriculum(cfg)
    for ok in (True, True, False, True):
        assert cur.record((1, 10), success=ok) == []  # 3 of 4 < 0.9
    assert cur.record((1, 10), success=True) == []  # the last 4: T F T T
    opened = [cur.record((1, 10), success=True) for _ in range(3)]
    assert opened == [[], [(2, 10), (1, 15)], []]  # T T T T, then promoted once only
    assert cur.stages == [(1, 10), (2, 10), (1, 15)]
    for _ in range(4):
        cur.record((2, 10), success=True)
    assert cur.stages == [(1, 10), (2, 10), (1, 15), (2, 15)]  # 3 agents > max_agents
    restored = Curriculum(cfg)
    restored.load_state_dict(cur.state_dict())
    assert restored.stages == cur.stages and restored.promoted == cur.promoted
    assert restored.success((1, 10)) == cur.success((1, 10)) == 1.0
    rng = np.random.default_rng(0)
    assert {draw_stage(cur.stages, cur.weights(), rng) for _ in range(200)} == set(cur.stages)


def test_curriculum_draws_the_stages_still_to_master_more_often():
    cfg = MapfConfig(agents=1, size=10, max_agents=2, max_size=15, promote_episodes=2, frontier=0.5)
    cur = Curriculum(cfg)
    assert cur.weights() == [1.0]
    for _ in range(2):
        cur.record((1, 10), success=True)
    # (1, 10) promoted; (2, 10) and (1, 15) open: half the draws uniform, half on those two
    np.testing.assert_allclose(cur.weights(), [1 / 6, 1 / 6 + 1 / 4, 1 / 6 + 1 / 4])
    rng = np.random.default_rng(0)
    drawn = [draw_stage(cur.stages, cur.weights(), rng) for _ in range(3000)]
    assert abs(drawn.count((1, 10)) / 3000 - 1 / 6) < 0.03
    uniform = Curriculum(
        MapfConfig(agents=1, size=10, max_agents=2, max_size=15, promote_episodes=2)
    )
    for _ in range(2):
        uniform.record((1, 10), success=True)
    np.testing.assert_allclose(uniform.weights(), [1 / 3] * 3)
    for stage in [(2, 10), (1, 15), (2, 15)]:  # everything promoted: uniform again
        for _ in range(2):
            cur.record(stage, success=True)
    np.testing.assert_allclose(cur.weights(), [1 / 4] * 4)


def test_greedy_play_reports_success_steps_and_stage():
    net = CommQNetwork(JointLayout(2), channels=4, hidden=8, heads=2)
    params = random_params(net)
    worlds = [MapfEnv(1, size=5, density=0.0, max_steps=30) for _ in range(3)]
    played = play_greedy(net.for_agents(3), params, worlds, seeds=[1, 2, 3])
    assert [e.stage for e in played] == [(1, 5)] * 3
    for env, ep in zip(worlds, played):
        assert ep.steps == env.steps and ep.success == bool(env.on_goal().all())


@pytest.mark.parametrize("shield, collides", [("none", True), ("pibt", False)])
def test_players_act_through_the_shield_when_asked(shield, collides):
    """Random moves (epsilon 1) on crowded maps collide; through the shield the exploring
    agents' random rankings become conflict-free joint moves (stored as taken)."""
    cfg = small_cfg(f"mapf.shield={shield}", "mapf.density=0.2")
    net = build_network(cfg.extra["mapf"])
    player = MapfPlayer(cfg, net, seeds=(0, 3), rng=np.random.default_rng(0))
    items = player.play(40, random_params(net), epsilon=1.0, stages=[(2, 6)]).items
    rewards = np.concatenate([item["reward"][:, :2].ravel() for item in items])
    assert (rewards == REWARD_COLLISION).any() == collides


def test_greedy_evaluation_through_the_shield_never_collides():
    net = CommQNetwork(JointLayout(4), channels=4, hidden=8, heads=2)
    params = random_params(net)
    worlds = [MapfEnv(4, size=5, density=0.2, max_steps=30) for _ in range(3)]
    counts = []
    for w in worlds:  # count the env's failed moves
        original = w.step

        def step(actions, env=w, original=original):
            out = original(actions)
            counts.append(sum(r == REWARD_COLLISION for r in out[1].values()))
            return out

        w.step = step
    play_greedy(net, params, worlds, seeds=[1, 2, 3], shield="pibt")
    assert counts and sum(counts) == 0


def test_a_heavy_shield_guide_makes_greedy_evaluation_pibt():
    """With the distance guiding the Q-values of an untrained network, the shielded greedy
    play solves what PIBT solves; without the guide the random Q-values do not."""
    net = CommQNetwork(JointLayout(3), channels=4, hidden=8, heads=2)
    params = random_params(net)

    def worlds():
        return [MapfEnv(3, size=6, density=0.1, max_steps=40) for _ in range(4)]

    guided = play_greedy(net, params, worlds(), seeds=[1, 2, 3, 4], shield="pibt", guide=100.0)
    assert all(ep.success for ep in guided)
    plain = play_greedy(net, params, worlds(), seeds=[1, 2, 3, 4], shield="pibt")
    assert sum(ep.steps for ep in plain) > sum(ep.steps for ep in guided)


def test_players_rank_by_the_guided_q_values():
    """At epsilon 0 and a heavy guide, a player's shielded moves are PIBT's (no random
    rankings, since no agent explores): every episode of open worlds ends on the goals."""
    cfg = small_cfg("mapf.shield=pibt", "mapf.shield_guide=100.0", "mapf.density=0.0")
    net = build_network(cfg.extra["mapf"])
    player = MapfPlayer(cfg, net, seeds=(0, 3), rng=np.random.default_rng(0))
    got = player.play(60, random_params(net), epsilon=0.0, stages=[(2, 6)])
    assert got.episodes and all(ep.success for ep in got.episodes)
