"""Why learner threads do not overlap with acting on a CPU: GIL hand-offs, measured.

`learner_threads.py` finds that a learner thread next to the acting thread makes the run
no faster on CPU. This benchmark measures the cause, side by side in one run, and checks
whether the obvious remedy (fewer, longer GIL-free calls per update) removes it.

1. **Cost of one learner update** (CartPole preset network, batch 128) alone, then while a
   second thread runs pure Python (holds the GIL), then while a second thread acts in
   CartPole with the torch greedy policy (the threads runner's acting thread). With the
   switch interval at 5 ms, each time the learner has to win the GIL back it waits up to
   5 ms, so (time per update with a Python thread) / 5 ms counts its GIL hand-offs.
2. The same for a **compiled learner** (``torch.compile`` with the C++ wrapper: the loss and
   its gradient in one compiled call, clipping and Adam in another), when a C++ compiler
   is present. It is an experiment kept here, not a shoal feature.
3. **End to end**, serial runner vs threads runner (1 learner), 20,000 env steps, for the
   eager and the compiled learner, with the overlap bound as in `learner_threads.py`.
4. **The cores are not the limit**: ``torch.mm`` calls per second in one process alone,
   then in two processes side by side.

Usage:
    python benchmarks/gil_overlap.py [--steps 20000] [--no-compiled]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor

import gymnasium as gym
import numpy as np
import torch
from torch.func import grad

from shoal.agent.actor import Actor
from shoal.agent.learner import DQN, LossInfo
from shoal.agent.losses import Batch
from shoal.config import load_config
from shoal.envs import probe_env
from shoal.runners.dqn import DQNRunner
from shoal.sync.workers import SPAWN

sys.path.insert(0, os.path.dirname(__file__))
from learner_threads import end_to_end, filled_replay  # noqa: E402


class CompiledDQN(DQN):
    """DQN whose gradients() and apply() are two compiled calls (experiment)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        names = list(self.params)
        # Detached views: the compiled apply updates the real parameters in place.
        self._p = [p.detach() for p in self.params.values()]
        self._t = [t.detach() for t in self.target_params.values()]
        self._m = [torch.zeros_like(p) for p in self._p]
        self._v = [torch.zeros_like(p) for p in self._p]
        self._step = torch.zeros(())
        c = self.cfg
        loss = self.loss  # the learner's own pure loss over explicit parameters

        def loss_of(params, target_params, *fields: torch.Tensor):
            value, td = loss(
                dict(zip(names, params)), dict(zip(names, target_params)), Batch(*fields)
            )
            return value, (value.detach(), td)

        def grads_fn(params, target_params, *fields):
            g, (value, td) = grad(loss_of, has_aux=True)(params, target_params, *fields)
            return g, value, td

        def apply_fn(params, grads, m, v, step):  # Adam (torch.optim.Adam's math)
            norms = torch.stack([torch.linalg.vector_norm(g) for g in grads])
            norm = torch.linalg.vector_norm(norms)
            coef = torch.clamp(c.max_grad_norm / (norm + 1e-6), max=1.0)
            step.add_(1)
            bc1, bc2 = 1 - 0.9**step, 1 - 0.999**step
            for p, g, mi, vi in zip(params, grads, m, v):
                g = g * coef
                mi.lerp_(g, 0.1)
                vi.mul_(0.999).addcmul_(g, g, value=0.001)
                p.sub_(c.lr * mi / bc1 / ((vi.sqrt() / bc2.sqrt()).add_(c.adam_eps)))
            return norm

        opts = {"cpp_wrapper": True}
        self._grads = torch.compile(grads_fn, fullgraph=True, dynamic=False, options=opts)
        self._apply = torch.compile(apply_fn, fullgraph=True, dynamic=False, options=opts)
        b, d = c.batch_size, self._p[0].shape[1]
        zeros = (torch.zeros(b, d), torch.zeros(b, dtype=torch.int64), torch.zeros(b))
        fields = (zeros[0], zeros[1], zeros[2], zeros[0], zeros[2], torch.ones(b))
        g, _, _ = self._grads(self._p, self._t, *fields)  # compile now, outside any timing
        clone = lambda xs: [x.clone() for x in xs]  # noqa: E731
        self._apply(clone(self._p), g, clone(self._m), clone(self._v), self._step.clone())

    def gradients(self, batch: Batch) -> tuple[list[torch.Tensor], LossInfo]:
        fields = (batch.obs, batch.action, batch.reward, batch.next_obs, batch.discount)
        g, loss, td = self._grads(self._p, self._t, *fields, batch.weights)
        return list(g), LossInfo(float(loss), td.numpy())

    def apply(self, grads: Sequence[torch.Tensor]) -> float:
        norm = self._apply(self._p, list(grads), self._m, self._v, self._step)
        self.updates += 1
        if self.updates % self.cfg.target_period == 0:
            self.sync_target()
        return float(norm)


def _python_thread(stop: threading.Event) -> None:
    while not stop.is_set():
        x = 0
        for _ in range(100):
            x += 1


def _acting_thread(dqn: DQN) -> Callable[[threading.Event], None]:
    # Greedy actions on the learner's live weights, as the serial runner's actor acts.
    actor = Actor(
        dqn.online, params=dqn.params, n_actions=dqn.n_actions, rng=np.random.default_rng(0)
    )

    def act(stop: threading.Event) -> None:
        torch.set_num_threads(1)
        env = gym.make("CartPole-v1")
        obs, _ = env.reset(seed=0)
        while not stop.is_set():
            obs, _, term, trunc, _ = env.step(int(actor.greedy(obs[None])[0]))
            if term or trunc:
                obs, _ = env.reset()

    return act


def update_cost(dqn: DQN, replay, seconds: float, neighbour: Callable | None) -> float:
    """Mean microseconds per learner update, with ``neighbour`` running in another thread."""
    cfg = dqn.cfg
    stop = threading.Event()
    th = threading.Thread(target=neighbour, args=(stop,)) if neighbour else None
    for _ in range(20):  # warm-up (a compiled learner may specialise on the first batch)
        dqn.step(Batch.from_numpy(replay.sample(cfg.batch_size), "cpu"))
    if th:
        th.start()
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        dqn.step(Batch.from_numpy(replay.sample(cfg.batch_size), "cpu"))
        n += 1
    elapsed = time.perf_counter() - t0
    stop.set()
    if th:
        th.join()
    return 1e6 * elapsed / n


def _mm_rate(seconds: float = 2.0) -> float:
    torch.set_num_threads(1)
    a, w = torch.randn(256, 128), torch.randn(128, 128)
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(100):
            torch.mm(a, w)
        n += 100
    return n / (time.perf_counter() - t0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--no-compiled", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(
        f"machine: {os.cpu_count()} CPUs, torch {torch.__version__} (1 intra-op thread), "
        f"Python {platform.python_version()}"
    )
    cfg = load_config("cartpole")
    spec = probe_env(cfg.env)
    learners: dict[str, type[DQN]] = {"eager": DQN}
    if not args.no_compiled and shutil.which(os.environ.get("CXX", "g++")):
        learners["compiled"] = CompiledDQN

    print("\n1-2. microseconds per learner update (switch interval 5 ms)")
    replay = filled_replay(cfg, spec)
    sys.setswitchinterval(0.005)
    for name, cls in learners.items():
        torch.manual_seed(0)
        t0 = time.perf_counter()
        dqn = cls(spec.obs_dim, spec.n_actions, cfg.dqn, device="cpu")
        setup = time.perf_counter() - t0
        alone = update_cost(dqn, replay, 2.0, None)
        python = update_cost(dqn, replay, 3.0, _python_thread)
        acting = update_cost(dqn, replay, 2.0, _acting_thread(dqn))
        print(
            f"{name:>9} learner (set-up {setup:.1f} s): alone {alone:,.0f} us; next to a "
            f"Python thread {python:,.0f} us (~{python / 5000:.1f} GIL hand-offs per "
            f"update); next to CartPole acting {acting:,.0f} us ({acting / alone:.2f}x)"
        )

    print(f"\n3. end to end: {args.steps} env steps, CartPole as is, 1 learner thread")
    end_to_end("serial", 2_000, "none")  # one-time imports (plotting, TensorBoard) first
    original = DQNRunner.__dict__["make_learner"]
    for name, cls in learners.items():

        def build(runner, cfg, spec, cls=cls):
            torch.manual_seed(cfg.run.seed)
            return cls(spec.obs_dim, spec.n_actions, cfg.dqn, device="cpu")

        # every DQN runner builds its learner through this hook
        DQNRunner.make_learner = classmethod(build)  # type: ignore[method-assign]
        wall_s, learn_s, _ = end_to_end("serial", args.steps, "none")
        act_s = wall_s - learn_s
        bound = wall_s / max(act_s, learn_s)
        wall_t, _, _ = end_to_end("threads", args.steps, "none", 1)
        speedup = wall_s / wall_t
        print(
            f"{name:>9} learner: serial {wall_s:.2f} s (t_act {act_s:.2f}, t_learn "
            f"{learn_s:.2f}, bound {bound:.2f}x); threads {wall_t:.2f} s: {speedup:.2f}x "
            f"= {speedup / bound:.2f} of the bound"
        )
    DQNRunner.make_learner = original  # type: ignore[method-assign]

    print("\n4. torch.mm (256x128 @ 128x128) calls/s: one process, then two side by side")
    alone = _mm_rate()
    with ProcessPoolExecutor(2, mp_context=SPAWN) as pool:
        pool.submit(_mm_rate, 0.1).result()  # start-up outside the measurement
        pair = [f.result() for f in [pool.submit(_mm_rate) for _ in range(2)]]
    print(
        f"one process {alone:,.0f}/s; two processes {pair[0]:,.0f} and {pair[1]:,.0f}/s "
        f"({min(pair) / alone:.2f}x of alone)"
    )


if __name__ == "__main__":
    main()
