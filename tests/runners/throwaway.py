"""A throwaway runner in well under 40 lines: whole episodes per collect, then the serial
schedule's updates for them. Registered by the conformance suite, which it must pass."""

from shoal.run.loop import Collected
from shoal.runners.serial import SerialRunner


class EpisodeRunner(SerialRunner):
    """Play one whole episode, then take the updates the serial schedule owes for it."""

    def collect(self, step):
        steps, episodes = 0, ()
        while not episodes:
            got = super().collect(step + steps)
            steps, episodes = steps + got.steps, got.episodes
        return Collected(steps, episodes)

    def learn(self, step, new_steps):
        r = self.cfg.run
        due = step // r.train_freq - max(step - new_steps, r.learning_starts - 1) // r.train_freq
        if step >= r.learning_starts and due > 0:
            self.loss = self.learn_steps(due * r.gradient_steps)
