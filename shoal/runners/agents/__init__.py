"""The agents runner (scheme 3): K independent learners in one multi-agent world.

:mod:`~shoal.runners.agents.runner` holds the runner, which wires the parts below;
:mod:`~shoal.runners.agents.layout` the K learners stacked or apart;
:mod:`~shoal.runners.agents.learning` how learning runs beside collection (inline, in a
thread, beside a collector process); :mod:`~shoal.runners.agents.epochs` one epoch of the
world played by K stacked agents (in the caller's process or a collector process);
:mod:`~shoal.runners.agents.collector` the collector process;
:mod:`~shoal.runners.agents.evaluation` the greedy evaluation during training.
"""

from shoal.runners.agents.runner import AgentsConfig, AgentsRunner, LearningThreadError

__all__ = ["AgentsConfig", "AgentsRunner", "LearningThreadError"]
