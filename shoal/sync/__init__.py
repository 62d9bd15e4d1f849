"""Sync primitives: the read/write lock, versioned weight stores (in-process and shared
memory), a thread-safe replay wrapper and the shared-memory segment lifecycle. Concurrency
lives here and in the runners, nowhere else."""
