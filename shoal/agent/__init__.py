"""Agent parts, written once, single-threaded and free of locks, queues and processes: the
pure losses and TD targets, networks, the learner, the actor and the builder that makes
them from a config."""
