"""A throwaway runner in well under 40 lines: whole episodes per collect, then the update
schedule's updates for them (the serial runner's ``learn``, unchanged). Registered by the
conformance suite, which it must pass."""

from shoal.run.runner import Collected
from shoal.runners.serial import SerialRunner


class EpisodeRunner(SerialRunner):
    """Play one whole episode; the serial runner's learn then takes what it owes."""

    def collect(self, step):
        steps, episodes = 0, ()
        while not episodes:
            got = super().collect(step + steps)
            steps, episodes = steps + got.steps, got.episodes
        return Collected(steps, episodes)
