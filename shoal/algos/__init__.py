"""Algorithms, written once, single-threaded and free of locks, queues and processes."""
