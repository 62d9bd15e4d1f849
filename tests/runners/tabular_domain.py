"""A runner for a new domain with a learner of its own, in a few lines: tabular Q-learning
on a gymnasium env with discrete observations. It uses the runner contract alone (no DQN
part) and is registered by one line (``register_runner``); the run loop, checkpoints,
resume and the update schedule come with the contract."""

import gymnasium as gym
import numpy as np

from shoal.run.runner import Collected, Runner


class TabularRunner(Runner):
    """Tabular Q-learning on a discrete-observation env (a test domain)."""

    def __init__(self, cfg):
        super().__init__(cfg)
        self.env = gym.make(cfg.env.id)
        self.q = np.zeros((self.env.observation_space.n, self.env.action_space.n))
        self.rng = np.random.default_rng(cfg.run.seed)
        self.seen, self.taken, self.episodes = [], 0, 0
        self.obs, self.ret, self.len = None, 0.0, 0

    @property
    def updates(self):
        return self.taken

    def epsilon(self, step):
        return max(0.1, 1.0 - step / 2000)

    def act(self, obs, epsilon):
        if self.rng.random() < epsilon:
            return int(self.rng.integers(self.q.shape[1]))
        return int(self.q[obs].argmax())

    def collect(self, step):
        if self.obs is None:
            self.obs, _ = self.env.reset(seed=self.cfg.run.seed + self.episodes)
        a = self.act(self.obs, self.epsilon(step))
        nxt, r, term, trunc, _ = self.env.step(a)
        self.seen.append((self.obs, a, float(r), nxt, term))
        self.obs, self.ret, self.len = nxt, self.ret + float(r), self.len + 1
        if not (term or trunc):
            return Collected(1)
        episode, self.episodes = (self.ret, self.len), self.episodes + 1
        self.obs, self.ret, self.len = None, 0.0, 0
        return Collected(1, (episode,))

    def learn(self, step, new_steps):
        for _ in range(self.schedule.owe(step)):  # one Q-learning update on a seen step
            s, a, r, s2, term = self.seen[self.rng.integers(len(self.seen))]
            target = r + (0.0 if term else 0.99 * self.q[s2].max())
            self.q[s, a] += 0.1 * (target - self.q[s, a])
            self.taken += 1

    def evaluate(self, seed=None):
        env, returns = gym.make(self.cfg.env.id), []
        for k in range(self.cfg.run.eval_episodes):
            obs, done, ret = env.reset(seed=10_000 + k)[0], False, 0.0
            while not done:
                obs, r, term, trunc, _ = env.step(self.act(obs, 0.0))
                ret, done = ret + float(r), term or trunc
            returns.append(ret)
        return np.array(returns), {}

    def state_dict(self):
        state = {"q": self.q.copy(), "seen": list(self.seen), "taken": self.taken}
        return {**super().state_dict(), **state, "episodes": self.episodes}

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self.q, self.seen, self.taken = state["q"], state["seen"], state["taken"]
        self.episodes = state["episodes"]
