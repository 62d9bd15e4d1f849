"""K independent DQN (or IQN) agents: stacked (one program over stacked weights) vs one at
a time.

Each agent has its own network, target network, Adam state and replay buffer; nothing is
shared. The question is only how fast the arithmetic of K agents runs. Side by side in one
run, for each K in ``--ks`` (default 8, 32, 128), on one network shape (obs 75 = a 5x5x3
egocentric window, 5 actions, MLP ``--hidden`` 64 64, dueling, double DQN, batch 64):

1. Action selection for all K agents, one turn (each agent one observation, greedy,
   epsilon 0, the per-agent exploration draw included everywhere):
   - batched: ``StackedActor(batched=True)``, one batched-matmul forward;
   - per-agent loop: ``StackedActor(batched=False)``, one forward per agent;
   - plain: K separate ``DQN.online`` networks called one by one;
   - vmap: ``torch.func.vmap`` over ``apply_params`` on the same stacked weights (the
     path for networks that are not plain MLPs).
   All four must pick the same actions (checked and printed).
2. A training round: every agent one update on its own batch of ``--batch`` from its own
   ``ReplayBuffer`` (uniform; no priority updates). Reported twice: the update alone
   (batches already tensors, sampling excluded) and with sampling (drawing and the
   conversion to tensors included). Stacked: ``StackedLearner.step``, with sampling one
   ``StackedReplay.sample`` over the K buffers (and, for reference, K ``sample`` calls
   and ``stack_batches``); loop: K calls of ``DQN.step``. One more row: the K agents as
   K / ``--chunk`` StackedLearners of ``--chunk`` each (a smaller working set).
3. Stacking method: the loss and its gradients for all K agents through
   ``torch.func.vmap`` over the pure ``DQNLoss`` vs ``StackedLearner``'s own batched
   matmuls (``shoal.agent.networks.linear``). Max difference of losses and gradients is
   printed; the optimizer step (identical for both) is timed separately.
4. The note's own options for the same round of K updates, sampling included, against
   the plain loop: one Python thread per agent (a ``ThreadPoolExecutor`` of K threads,
   each task one agent's sample + ``DQN.step``), and a ``multiprocessing`` pool (spawn,
   2 processes = the cores) mapping ``train_step`` over the agents, each agent sent whole
   (learner + its replay buffer) every round as the note proposes. Time only: what comes
   back from a worker (weights through torch's shared memory, optimizer moments, update
   counter, the buffer's generator) is not checked here (docs/ARCHITECTURE.md: the Pool.map
   trap). The pool's start-up is reported separately and left out of the round time.
5. End to end, async vs sync learning at ``--e2e-k`` agents (default 32): the ``agents``
   runner (``AgentsRunner``) on the harvest preset, epochs of ``--e2e-turns`` turns, a
   budget of ``--e2e-steps`` turns, learning from the second epoch on, no evaluation or
   checkpoint inside the timed part (``run.eval_every``/``checkpoint_every`` past the
   budget), ``run.torch_threads=1`` (the learning thread applies the same). Driven as
   ``shoal.train`` drives it (``RunLoop(runner, RunDir.create(...)).run()``); the wall
   time runs from ``run()`` to the end of ``finish`` (every scheduled round taken), so the
   final evaluation, checkpoint and curve are left out. The sync run's time in ``collect``
   (t_collect) and in ``learn`` (t_learn, the training rounds) give the overlap bound
   (t_collect + t_learn) / max(t_collect, t_learn); the async run's speed-up is
   sync wall / async wall, also as a fraction of that bound (the goal: >= 0.8). Both runs
   take the same turns and the same number of training rounds (checked and printed).
   With ``--e2e-copy`` a third run uses ``agents.copy_on_train=true``. One run each,
   after a short warm-up run (imports, first allocations) that is not reported.

Fairness: every side uses the same torch intra-op thread count (``--threads``, default 1),
set in the main thread, in every thread the executor starts and in every pool worker
(``torch.set_num_threads`` is per OS thread). The sides of each comparison are timed
round-robin (A, B, C, A, B, C, ...) so that load from other work falls on all of them
alike; each figure is the median of ``--reps`` samples, after a warm-up. The agents in the
loop and in the stack start from the same weights (``StackedLearner`` copies them); both
sides train as they are timed. The machine, the thread settings and the load average
before and after are printed: timings on a shared machine move with its load.

With ``--recipe iqn`` the agents are IQN learners (quantile networks on the same MLP,
``--quantiles`` fractions for the loss and its target, 32 for acting; each agent draws its
own fractions, in the loop and in the stack alike); sections 1 and 2 only (the quantile
network goes through ``vmap``, so section 3 has nothing to compare, and sections 4-5
drive the DQN agents). ``--device cuda`` puts section 2's learners on the GPU (what the
stack is worth where a loop of small updates is bound by kernel launches).

Usage:
    python benchmarks/independent_agents.py [--ks 8 32 128] [--reps 15] [--quick]
        [--sections 1 2 3 4 5] [--e2e-k 32] [--e2e-steps 8000] [--e2e-copy]
        [--e2e-train-freq 4]
    python benchmarks/independent_agents.py --sections 5 --e2e-copy   # only section 5
    python benchmarks/independent_agents.py --recipe iqn --sections 1 2 --ks 8 32
    python benchmarks/independent_agents.py --recipe iqn --sections 2 --device cuda
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import fields

import numpy as np
import torch

from shoal.agent.learner import DQN, Learner
from shoal.agent.losses import Batch
from shoal.agent.quantile import IQNLearner, QuantileNetwork
from shoal.agent.stacked import StackedActor, StackedLearner, StackedLossInfo, stack_batches
from shoal.config import DQNConfig, load_config
from shoal.replay import ReplayBuffer, StackedReplay
from shoal.run.directory import RunDir
from shoal.run.loop import RunLoop
from shoal.run.runner import Collected
from shoal.runners.agents import AgentsRunner
from shoal.sync.workers import SPAWN

N_ACTIONS = 5
FIELDS = [f.name for f in fields(Batch)]
TARGETS = {  # (section, K): minimum speed-up the issue asks for
    ("actions", 32): 8.0,
    ("train", 32): 4.0,
    ("train", 128): 6.0,
}


# --- timing -------------------------------------------------------------------------------
def bench(fns: dict[str, Callable[[], object]], reps: int, sample_s: float = 0.02):
    """Median seconds per call of each function, timed round-robin.

    Each sample runs a function ``inner`` times in a row (enough calls for ~``sample_s``)
    so that sub-millisecond calls are not dominated by the clock."""
    inner = {}
    for name, fn in fns.items():
        fn()  # warm-up (first-call allocations, lazy thread / worker start)
        t0 = time.perf_counter()
        fn()
        sync()
        inner[name] = max(1, int(sample_s / max(time.perf_counter() - t0, 1e-9)))
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(reps):
        for name, fn in fns.items():
            n = inner[name]
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            sync()
            samples[name].append((time.perf_counter() - t0) / n)
    return {name: statistics.median(v) for name, v in samples.items()}


def sync() -> None:
    """Waits for queued GPU work, so that a sample times the work and not its launch."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def verdict(ratio: float, target: float) -> str:
    return f"{'MET' if ratio >= target else 'MISSED'} ({ratio:.2f}x vs >= {target:g}x)"


# --- agents and data ----------------------------------------------------------------------
def random_transitions(rng: np.random.Generator, n: int, obs_dim: int) -> dict[str, np.ndarray]:
    return {
        "obs": rng.normal(size=(n, obs_dim)).astype(np.float32),
        "action": rng.integers(N_ACTIONS, size=n),
        "reward": rng.normal(size=n).astype(np.float32),
        "next_obs": rng.normal(size=(n, obs_dim)).astype(np.float32),
        "discount": np.where(rng.random(n) < 0.1, 0.0, 0.99**3).astype(np.float32),
    }


def make_buffer(k: int, capacity: int, obs_dim: int) -> ReplayBuffer:
    """Agent k's own buffer, filled with random transitions."""
    buf = ReplayBuffer(capacity, (obs_dim,), seed=k)
    data = random_transitions(np.random.default_rng(1000 + k), capacity, obs_dim)
    buf.add_many([{name: v[i] for name, v in data.items()} for i in range(capacity)])
    return buf


def make_agent(
    recipe: str, cfg: DQNConfig, obs_dim: int, quantiles: int, seed: int, device: str = "cpu"
) -> Learner:
    """One agent: a DQN learner, or an IQN learner on the same MLP."""
    if recipe == "dqn":
        return DQN(obs_dim, N_ACTIONS, cfg, device=device)
    net = QuantileNetwork(obs_dim, N_ACTIONS, hidden=cfg.hidden, dueling=cfg.dueling)
    return IQNLearner(
        net, cfg, n_quantiles=quantiles, n_target_quantiles=quantiles, seed=seed, device=device
    )


class Setup:
    """K fresh agents, their buffers, the StackedLearner built from them, fixed batches."""

    def __init__(
        self,
        k: int,
        cfg: DQNConfig,
        obs_dim: int,
        capacity: int,
        chunk: int,
        recipe: str = "dqn",
        quantiles: int = 8,
        device: str = "cpu",
    ) -> None:
        self.k = k
        torch.manual_seed(k)
        self.dqns = [make_agent(recipe, cfg, obs_dim, quantiles, i, device) for i in range(k)]
        self.stacked = StackedLearner(self.dqns)  # copies: the DQNs stay independent
        self.buffers = [make_buffer(i, capacity, obs_dim) for i in range(k)]
        self.group = StackedReplay(self.buffers)  # the same buffers, items in one block
        self.batch_size = cfg.batch_size
        self.batches = [
            d.make_batch(b.sample(cfg.batch_size)) for d, b in zip(self.dqns, self.buffers)
        ]
        self.stacked_batch = stack_batches(self.batches)
        # The same K agents as K / chunk smaller stacks (a working set that fits in cache).
        self.chunks: list[tuple[StackedLearner, Batch]] = []
        if chunk < k and k % chunk == 0:
            for i in range(0, k, chunk):
                part = StackedLearner(self.dqns[i : i + chunk])
                self.chunks.append((part, stack_batches(self.batches[i : i + chunk])))


# --- the vmap path (section 3, and a row of section 1) ------------------------------------
def vmap_gradients(stacked: StackedLearner, batch: Batch):
    """What ``StackedLearner.gradients`` returns, through its ``torch.func.vmap`` path (the
    one it takes for networks that are not plain MLPs) instead of its batched matmuls."""
    values = [getattr(batch, f.name) for f in fields(Batch)]
    losses, td = stacked._vloss(stacked.params, stacked.target_params, *values)
    grads = torch.autograd.grad(losses.sum(), stacked._param_list)
    info = StackedLossInfo(losses.detach().cpu().numpy(), td.cpu().numpy())
    return list(grads), info


# --- 1. action selection ------------------------------------------------------------------
def section_actions(s: Setup, reps: int, results: dict) -> None:
    k, net = s.k, s.stacked.loss.network
    params = s.stacked.weights()
    obs = np.random.default_rng(7).normal(size=(k, net.torso[0].in_features))
    obs = obs.astype(np.float32)
    rngs = [[np.random.default_rng(i) for i in range(k)] for _ in range(4)]
    batched = StackedActor(net, params, n_actions=N_ACTIONS, rngs=rngs[0], batched=True)
    loop = StackedActor(net, params, n_actions=N_ACTIONS, rngs=rngs[1], batched=False)

    def plain() -> np.ndarray:
        actions = np.zeros(k, np.int64)
        with torch.inference_mode():
            for i, dqn in enumerate(s.dqns):
                if rngs[2][i].random() < 0.0:  # the exploration draw, as an Actor makes it
                    actions[i] = rngs[2][i].integers(N_ACTIONS)
                else:
                    q = dqn.online(torch.as_tensor(obs[i]).unsqueeze(0))
                    actions[i] = int(q.argmax())
        return actions

    def vmapped() -> np.ndarray:
        with torch.inference_mode():
            q = batched._vq(params, torch.as_tensor(obs).unsqueeze(1))
        return q[:, 0].argmax(dim=-1).numpy()

    fns = {
        "batched": lambda: batched.select_actions(obs, 0.0),
        "loop": lambda: loop.select_actions(obs, 0.0),
        "plain": plain,
        "vmap": vmapped,
    }
    labels = {
        "batched": "batched (StackedActor)",
        "loop": "per-agent loop (StackedActor)",
        "plain": "plain: K DQN.online one by one",
        "vmap": "vmap over apply_params",
    }
    same = all(np.array_equal(fn(), plain()) for fn in fns.values())
    t = bench(fns, reps)
    base = t["batched"]
    print(f"\n  K = {k}: one turn, all K agents (identical actions: {'yes' if same else 'NO'})")
    for name, sec in t.items():
        print(f"    {labels[name]:<34} {1e6 * sec:>10,.1f} us/turn  {sec / base:>6.2f}x batched")
    print(
        f"    per-agent loop / batched {t['loop'] / base:.2f}x, plain / batched "
        f"{t['plain'] / base:.2f}x, per-agent loop / vmap {t['loop'] / t['vmap']:.2f}x"
    )
    results[("actions", k)] = t["loop"] / base
    results[("actions-vmap", k)] = t["loop"] / t["vmap"]


# --- 2. a training round ------------------------------------------------------------------
def section_train(s: Setup, reps: int, results: dict) -> None:
    bs, st = s.batch_size, s.stacked

    def loop_update() -> None:
        for dqn, batch in zip(s.dqns, s.batches):
            dqn.step(batch)

    def loop_sampled() -> None:
        for dqn, buf in zip(s.dqns, s.buffers):
            dqn.step(dqn.make_batch(buf.sample(bs)))

    def stacked_sampled() -> None:
        st.step(st.make_batch(s.group.sample(bs)))

    def stacked_sampled_k() -> None:
        st.step(stack_batches([d.make_batch(b.sample(bs)) for d, b in zip(s.dqns, s.buffers)]))

    fns = {
        "loop": loop_update,
        "stacked": lambda: st.step(s.stacked_batch),
        "loop+s": loop_sampled,
        "stacked+s": stacked_sampled,
        "stacked+s K": stacked_sampled_k,
    }
    if s.chunks:
        fns["chunks"] = lambda: [part.step(batch) for part, batch in s.chunks]
    t = bench(fns, reps)
    up = t["loop"] / t["stacked"]
    sa = t["loop+s"] / t["stacked+s"]
    k = s.k
    print(f"\n  K = {k}: one round = {k} updates (ms per round, us per agent-update)")
    rows = [
        ("update alone: loop of K DQN.step", t["loop"]),
        ("update alone: StackedLearner.step", t["stacked"]),
        ("with sampling: loop", t["loop+s"]),
        ("with sampling: stacked, one StackedReplay draw", t["stacked+s"]),
        ("with sampling: stacked, K draws + stack_batches", t["stacked+s K"]),
    ]
    if s.chunks:
        n, size = len(s.chunks), s.chunks[0][0].k
        rows.insert(2, (f"update alone: {n} StackedLearners of {size} each", t["chunks"]))
    for name, sec in rows:
        print(f"    {name:<48} {1e3 * sec:>9.2f} ms  {1e6 * sec / k:>8.1f} us/agent")
    extra = f" (in chunks {t['loop'] / t['chunks']:.2f}x)" if s.chunks else ""
    print(
        f"    speed-up stacked vs loop: update alone {up:.2f}x{extra}; with sampling "
        f"{sa:.2f}x (K draws + stack {t['loop+s'] / t['stacked+s K']:.2f}x)"
    )
    results[("train", k)] = up
    results[("train-sampled", k)] = sa
    if s.chunks:
        results[("train-chunks", k)] = t["loop"] / t["chunks"]


# --- 3. vmap vs batched matmul ------------------------------------------------------------
def section_stacking(s: Setup, reps: int, results: dict) -> None:
    st, batch = s.stacked, s.stacked_batch
    g_v, info_v = vmap_gradients(st, batch)
    g_b, info_b = st.gradients(batch)
    loss_diff = float(np.abs(info_v.loss - info_b.loss).max())
    td_diff = float(np.abs(info_v.td_errors - info_b.td_errors).max())
    grad_diff = max(float((a - b).abs().max()) for a, b in zip(g_v, g_b))
    t = bench(
        {
            "vmap": lambda: vmap_gradients(st, batch),
            "bmm": lambda: st.gradients(batch),
            "apply": lambda: st.apply(g_v),
        },
        reps,
    )
    ratio = t["vmap"] / t["bmm"]
    k = s.k
    winner = "batched matmul" if ratio > 1 else "vmap"
    print(
        f"\n  K = {k}: loss + gradients  vmap {1e3 * t['vmap']:.2f} ms, "
        f"baddbmm {1e3 * t['bmm']:.2f} ms -> {winner} faster ({ratio:.2f}x vmap/bmm); "
        f"vmap - bmm = {1e3 * (t['vmap'] - t['bmm']):.2f} ms/call"
    )
    print(
        f"    optimizer side (StackedLearner.apply: clip + Adam + target) "
        f"{1e3 * t['apply']:.2f} ms, the same for both; full update vmap "
        f"{1e3 * (t['vmap'] + t['apply']):.2f} ms vs bmm {1e3 * (t['bmm'] + t['apply']):.2f} ms "
        f"({(t['vmap'] + t['apply']) / (t['bmm'] + t['apply']):.2f}x)"
    )
    print(
        f"    same result: max |loss diff| {loss_diff:.1e}, max |td diff| {td_diff:.1e}, "
        f"max |grad diff| {grad_diff:.1e}"
    )
    results[("stacking", k)] = (ratio, loss_diff, grad_diff)


# --- 4. the note's options: threads, a process pool ---------------------------------------
def train_step(agent: tuple[DQN, ReplayBuffer, int]) -> float:
    """The note's ``agent.model.train_step()``: sample from the agent's own buffer, one
    update. Runs in a pool worker on a copy of the agent sent with the task."""
    learner, buffer, batch_size = agent
    return learner.step(Batch.from_numpy(buffer.sample(batch_size), "cpu")).loss


def _noop(_: int) -> int:
    return 0


def make_pool(processes: int, threads: int):
    t0 = time.perf_counter()
    pool = SPAWN.Pool(processes, initializer=torch.set_num_threads, initargs=(threads,))
    pool.map(_noop, range(processes))  # workers up, torch and shoal imported
    return pool, time.perf_counter() - t0


def section_note(s: Setup, args, pool, results: dict, pool_state: dict) -> None:
    k, bs = s.k, s.batch_size
    agents = [(d, b, bs) for d, b in zip(s.dqns, s.buffers)]

    def loop_sampled() -> None:
        for agent in agents:
            train_step(agent)

    executor = ThreadPoolExecutor(
        max_workers=k, initializer=torch.set_num_threads, initargs=(args.threads,)
    )
    fns = {
        "loop": loop_sampled,
        "threads": lambda: list(executor.map(train_step, agents)),
    }
    try:
        t = bench(fns, args.reps)
    finally:
        executor.shutdown()
    labels = {
        "loop": "loop of K train_step (reference)",
        "threads": f"{k} threads, one task per agent",
        "pool": "pool, spawn, 2 processes, agents sent",
    }
    # A pool round costs about K x its per-agent time at the previous K: skip a K whose
    # rounds would run past --pool-budget seconds.
    per_agent = pool_state.get("per_agent_s")
    predicted = None if per_agent is None else per_agent * k * (args.pool_reps + 2) * 1.2
    pool_line = ""
    if pool is None:
        pool_line = "pool: not run (--no-pool)"
    elif predicted is not None and predicted > args.pool_budget:
        pool_line = (
            f"pool: SKIPPED at K = {k} (predicted {predicted:.0f} s for {args.pool_reps} "
            f"rounds > --pool-budget {args.pool_budget:g} s)"
        )
    else:
        try:
            tp = bench(
                {"loop": loop_sampled, "pool": lambda: pool.map(train_step, agents)},
                args.pool_reps,
            )
            t["pool"] = tp["pool"]
            pool_state["per_agent_s"] = tp["pool"] / k
            pool_line = (
                f"(pool timed over {args.pool_reps} rounds against its own loop runs: "
                f"{1e3 * tp['loop']:.2f} ms, {tp['loop'] / tp['pool']:.2f}x vs those; "
                f"{1e6 * tp['pool'] / k:.0f} us per agent-update)"
            )
        except Exception as err:  # a resource limit (open files, memory) is a result too
            pool_line = f"pool: FAILED at K = {k}: {type(err).__name__}: {err}"
    base = t["loop"]
    print(f"\n  K = {k}: one round of {k} updates, sampling included (ms per round)")
    for name, sec in t.items():
        print(f"    {labels[name]:<40} {1e3 * sec:>9.2f} ms  {base / sec:>6.2f}x the loop's speed")
    print(f"    {pool_line}")
    results[("note", k)] = {name: base / sec for name, sec in t.items() if name != "loop"}


# --- 5. end to end: async vs sync learning (the agents runner) ---------------------------
class TimedAgents(AgentsRunner):
    """The agents runner, timing its ``collect`` and ``learn`` calls and when ``finish``
    returns (every scheduled training round taken)."""

    def __init__(self, cfg) -> None:
        super().__init__(cfg)
        self.t_collect = self.t_learn = self.t_finish = self.t_start = 0.0
        self.finished_at = float("nan")

    def start(self) -> None:
        t0 = time.perf_counter()
        super().start()
        self.t_start = time.perf_counter() - t0

    def collect(self, step: int) -> Collected:
        t0 = time.perf_counter()
        try:
            return super().collect(step)
        finally:
            self.t_collect += time.perf_counter() - t0

    def learn(self, step: int, new_steps: int) -> None:
        t0 = time.perf_counter()
        try:
            super().learn(step, new_steps)
        finally:
            self.t_learn += time.perf_counter() - t0

    def finish(self) -> None:
        t0 = time.perf_counter()
        super().finish()
        self.finished_at = time.perf_counter()
        self.t_finish = self.finished_at - t0


def agents_run(args, k: int, steps: int, mode: str | None, copy: bool = False) -> dict:
    """One run of the agents runner on the harvest preset; its timings and counts."""
    turns = args.e2e_turns
    overrides = [
        f"agents.agents={k}",
        f"agents.max_turns={turns}",
        f"agents.async_learning={str(mode is not None).lower()}",
        f"agents.async_mode={mode or 'thread'!r}",
        "agents.train_interval=1",
        f"run.train_freq={args.e2e_train_freq}",
        f"agents.copy_on_train={str(copy).lower()}",
        f"run.total_steps={steps}",
        f"run.learning_starts={min(turns, steps)}",
        f"run.eval_every={10 * steps}",
        f"run.checkpoint_every={10 * steps}",
        f"run.log_every={steps}",
        "run.eval_episodes=1",
        "run.stop_return=none",
        "run.progress=false",
        f"run.torch_threads={args.threads}",
    ]
    cfg = load_config("harvest", overrides)
    out = tempfile.mkdtemp(prefix="shoal-bench-")
    r = TimedAgents(cfg)
    try:  # as shoal.train drives a runner
        loop = RunLoop(r, RunDir.create(out, "bench"))
        t0 = time.perf_counter()
        result = loop.run()
    finally:
        r.stop()
        r.close()
        shutil.rmtree(out, ignore_errors=True)
    return {
        "wall": r.finished_at - t0,
        "collect": r.t_collect,
        "learn": r.t_learn,
        "finish": r.t_finish,
        "start": r.t_start,
        "steps": result.env_steps,
        "rounds": result.updates,
        "epochs": r.epochs,
    }


def section_e2e(args, results: dict) -> None:
    k, steps = args.e2e_k, args.e2e_steps
    agents_run(args, k, 2 * args.e2e_turns, None)  # warm-up: imports, first allocations
    agents_run(args, k, 2 * args.e2e_turns, "thread")
    print(
        f"  K = {k}: harvest preset, epochs of {args.e2e_turns} turns, {steps} turns, "
        f"learning from turn {args.e2e_turns}, train_freq {args.e2e_train_freq} (one round "
        f"per {args.e2e_train_freq} turns), "
        f"train_interval 1; load average {os.getloadavg()[0]:.2f} (1 min) before"
    )
    sync = agents_run(args, k, steps, None)
    runs = {
        "async, process": agents_run(args, k, steps, "process"),
        "async, thread": agents_run(args, k, steps, "thread"),
    }
    if args.e2e_copy:
        runs["async, thread, copy"] = agents_run(args, k, steps, "thread", copy=True)
    t_c, t_l = sync["collect"], sync["learn"]
    bound = (t_c + t_l) / max(t_c, t_l)
    print(
        f"    {'sync':<24} {sync['wall']:>7.2f} s  ({sync['steps']} turns, {sync['epochs']} "
        f"epochs, {sync['rounds']} rounds); t_collect {t_c:.2f} s, t_learn {t_l:.2f} s "
        f"-> overlap bound {bound:.2f}x"
    )
    for name, a in runs.items():
        same = a["steps"] == sync["steps"] and a["rounds"] == sync["rounds"]
        speedup = sync["wall"] / a["wall"]
        frac = speedup / bound
        print(
            f"    {name:<24} {a['wall']:>7.2f} s  ({a['steps']} turns, {a['epochs']} epochs, "
            f"{a['rounds']} rounds: {'same as sync' if same else 'DIFFERENT from sync'}); "
            f"t_collect {a['collect']:.2f} s, t_learn {a['learn']:.2f} s, "
            f"waiting in finish {a['finish']:.2f} s, start-up {a['start']:.2f} s"
        )
        steady = sync["wall"] / (a["wall"] - a["start"])
        print(
            f"    {'':<24} speed-up {speedup:.2f}x = {frac:.2f} of the bound "
            f"(target >= 0.8: {'MET' if frac >= 0.8 else 'MISSED'}); without the start-up "
            f"{steady:.2f}x = {steady / bound:.2f}; collect (incl. waiting for the "
            f"collector) took {a['collect'] / t_c:.2f}x sync's"
        )
        results[("e2e", name)] = (speedup, frac, same)
    results[("e2e", "bound")] = bound


# --- main ---------------------------------------------------------------------------------
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ks", type=int, nargs="+", default=[8, 32, 128])
    parser.add_argument("--reps", type=int, default=15, help="timed samples per figure")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--hidden", type=int, nargs="+", default=[64, 64])
    parser.add_argument("--obs-dim", type=int, default=75, help="5x5x3 egocentric window")
    parser.add_argument("--capacity", type=int, default=1000, help="transitions per buffer")
    parser.add_argument("--chunk", type=int, default=32, help="agents per stack, chunked row")
    parser.add_argument("--threads", type=int, default=1, help="torch threads, every side")
    parser.add_argument("--pool-reps", type=int, default=4, help="timed rounds of the pool")
    parser.add_argument("--pool-budget", type=float, default=60.0, help="seconds per K")
    parser.add_argument("--no-pool", action="store_true", help="skip the process pool")
    parser.add_argument("--quick", action="store_true", help="a tiny smoke run")
    parser.add_argument("--recipe", default="dqn", choices=("dqn", "iqn"), help="the agents")
    parser.add_argument("--quantiles", type=int, default=8, help="IQN's N and N'")
    parser.add_argument(
        "--device", default="cpu", help="the learners' device, section 2 only (e.g. cuda)"
    )
    parser.add_argument(
        "--sections",
        type=int,
        nargs="+",
        default=[1, 2, 3, 4, 5],
        choices=range(1, 6),
        help="which sections to run (e.g. --sections 5: only the end-to-end run)",
    )
    parser.add_argument("--e2e-k", type=int, default=32, help="agents, section 5")
    parser.add_argument("--e2e-steps", type=int, default=8000, help="turns per run, section 5")
    parser.add_argument("--e2e-turns", type=int, default=200, help="turns per epoch, section 5")
    parser.add_argument(
        "--e2e-train-freq", type=int, default=4, help="turns per round, section 5 (preset: 4)"
    )
    parser.add_argument("--e2e-copy", action="store_true", help="section 5: + copy_on_train")
    args = parser.parse_args()
    if args.quick:
        args.ks, args.reps, args.pool_reps = [2, 4], 2, 1
        args.hidden, args.batch, args.capacity, args.chunk = [16], 8, 64, 2
        args.e2e_k, args.e2e_steps, args.e2e_turns = 4, 200, 50
    sections = set(args.sections)
    if args.recipe != "dqn" and sections - {1, 2}:
        parser.error("--recipe iqn: sections 1 and 2 only (--sections 1 2)")
    if args.device != "cpu" and sections != {2}:
        parser.error(f"--device {args.device}: section 2 only (--sections 2)")
    torch.set_num_threads(args.threads)
    cfg = DQNConfig(hidden=list(args.hidden), batch_size=args.batch)
    t_start = time.perf_counter()
    print(
        f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} (1 min) at "
        f"start; torch {torch.__version__}, {args.threads} intra-op thread(s) on every side; "
        f"Python {platform.python_version()}; learners on {args.device}"
        + (f" ({torch.cuda.get_device_name()})" if args.device.startswith("cuda") else "")
    )
    if sections & {1, 2, 3, 4}:
        kind = "DQN" if args.recipe == "dqn" else f"IQN ({args.quantiles} fractions, 32 acting)"
        print(
            f"agents: obs {args.obs_dim}, {N_ACTIONS} actions, MLP {args.hidden}, dueling, double "
            f"{kind}, batch {args.batch}, buffers of {args.capacity}; K = {args.ks}; "
            f"median of {args.reps} round-robin samples"
        )
    setups = {}
    if sections & {1, 2, 3, 4}:
        for k in args.ks:
            setups[k] = Setup(
                k,
                cfg,
                args.obs_dim,
                args.capacity,
                args.chunk,
                args.recipe,
                args.quantiles,
                args.device,
            )

    results: dict = {}
    if 1 in sections:
        print("\n1. action selection, one turn (greedy, epsilon 0)")
        for k in args.ks:
            section_actions(setups[k], args.reps, results)
    if 2 in sections:
        print("\n2. a training round: every agent one update on its own batch from its own buffer")
        for k in args.ks:
            section_train(setups[k], args.reps, results)
    if 3 in sections:
        print(
            "\n3. stacking method: torch.func.vmap over DQNLoss vs StackedLearner's batched matmuls"
        )
        for k in args.ks:
            section_stacking(setups[k], args.reps, results)
    if 4 in sections:
        section_note_all(args, setups, results)
    if 5 in sections:
        print("\n5. end to end: async vs sync learning (agents runner, same turns and rounds)")
        section_e2e(args, results)
    summary(args, results)
    print(
        f"\nload average {os.getloadavg()[0]:.2f} (1 min) at the end; "
        f"total {time.perf_counter() - t_start:.0f} s"
    )


def section_note_all(args, setups: dict, results: dict) -> None:
    print("\n4. the note's options, same round (sampling included)")
    pool, pool_state = None, {}
    if not args.no_pool:
        pool, start_s = make_pool(2, args.threads)
        print(f"  process pool: spawn, 2 processes, start-up {start_s:.2f} s (not in the rounds)")
        print("  (timing only: weights, Adam state and buffer draws coming back are not checked)")
    try:
        for k in args.ks:
            section_note(setups[k], args, pool, results, pool_state)
    finally:
        if pool is not None:
            pool.terminate()
            pool.join()


def summary(args, results: dict) -> None:
    print("\nsummary (speed-ups measured side by side above)")
    print(f"  {'what':<58} {'K':>4}  result")
    for (what, k), target in TARGETS.items():
        if (
            what == "actions"
            and 1 not in args.sections
            or what == "train"
            and 2 not in args.sections
        ):
            continue
        label = {
            "actions": "actions: batched vs per-agent loop",
            "train": "training round, update alone: stacked vs loop",
        }[what]
        got = results.get((what, k))
        shown = "not measured (K not in --ks)" if got is None else verdict(got, target)
        print(f"  {label:<58} {k:>4}  {shown}")
    for k in args.ks if 2 in args.sections else []:
        print(
            f"  {'training round with sampling: stacked vs loop':<58} {k:>4}  "
            f"{results[('train-sampled', k)]:.2f}x"
        )
    for k in args.ks:
        if ("train-chunks", k) in results:
            label = f"training round, update alone: stacks of {args.chunk} vs loop"
            print(f"  {label:<58} {k:>4}  {results[('train-chunks', k)]:.2f}x")
    for k in args.ks if 1 in args.sections else []:
        print(
            f"  {'actions: per-agent loop vs vmap':<58} {k:>4}  {results[('actions-vmap', k)]:.2f}x"
        )
    for k in args.ks if 3 in args.sections else []:
        ratio, loss_diff, grad_diff = results[("stacking", k)]
        win = "baddbmm" if ratio > 1 else "vmap"
        print(
            f"  {'stacking: vmap time / baddbmm time (loss + gradients)':<58} {k:>4}  "
            f"{ratio:.2f}x -> {win} faster (loss diff {loss_diff:.0e}, grad {grad_diff:.0e})"
        )
    for k in args.ks if 4 in args.sections else []:
        note = results[("note", k)]
        shown = ", ".join(f"{name} {v:.2f}x" for name, v in note.items())
        if "pool" not in note:
            shown += ", pool not measured"
        print(f"  {'note: speed vs the loop (sampling included)':<58} {k:>4}  {shown}")
    for (what, name), got in results.items():
        if what != "e2e" or name == "bound":
            continue
        speedup, frac, same = got
        label = f"end to end: {name} vs sync (bound {results[('e2e', 'bound')]:.2f}x)"
        shown = f"{speedup:.2f}x = {frac:.2f} of the bound ({'MET' if frac >= 0.8 else 'MISSED'}"
        shown += " vs >= 0.8)" if same else " vs >= 0.8; turns or rounds DIFFER)"
        print(f"  {label:<58} {args.e2e_k:>4}  {shown}")


if __name__ == "__main__":
    main()
