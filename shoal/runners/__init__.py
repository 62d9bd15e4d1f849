"""Runners: each wires the same parts (actor, learner, replay, weights) with its own
transport. The serial runner is the oracle the others are tested against."""
