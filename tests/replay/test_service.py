"""The replay service: priority updates for slots rewritten since the draw are dropped,
everything else reaches the buffer as if it were used directly."""

import numpy as np
import pytest

from shoal.replay import ReplayBuffer, ReplayService

CAP = 8


def items(n: int, start: float = 0.0) -> dict[str, np.ndarray]:
    obs = (start + np.arange(n, dtype=np.float32))[:, None]
    return {
        "obs": obs,
        "action": np.zeros(n, np.int64),
        "reward": np.zeros(n, np.float32),
        "next_obs": obs + 1,
        "discount": np.full(n, 0.9, np.float32),
    }


def make() -> ReplayService:
    return ReplayService(ReplayBuffer(CAP, (1,), prioritized=True, alpha=1.0, seed=0))


def test_updates_for_rewritten_slots_are_dropped_and_the_rest_applied():
    service = make()
    service.add_batch(items(CAP), priorities=np.ones(CAP))
    batch = service.sample(64)
    assert set(batch["generations"].tolist()) == {1}
    service.add_batch(items(3, start=100.0), priorities=np.full(3, 5.0))  # slots 0-2 again
    applied = service.update_priorities(batch["indices"], batch["generations"], np.full(64, 7.0))
    rewritten = np.isin(batch["indices"], [0, 1, 2])
    assert rewritten.any() and (~rewritten).any()
    assert applied == int((~rewritten).sum()) and service.stale_updates == int(rewritten.sum())
    # The same buffer used directly, updating only the slots that were not rewritten: the
    # rewritten slots keep their new items' priorities (5), the others got 7.
    probe = make()
    probe.add_batch(items(CAP), priorities=np.ones(CAP))
    probe.add_batch(items(3, start=100.0), priorities=np.full(3, 5.0))
    kept = batch["indices"][~rewritten]
    probe.buffer.update_priorities(kept, np.full(len(kept), 7.0))
    np.testing.assert_array_equal(
        service.buffer.sampler.state_dict()["tree"]["values"],
        probe.buffer.sampler.state_dict()["tree"]["values"],
    )


def test_state_round_trips_and_a_wrong_capacity_is_named():
    service = ReplayService(ReplayBuffer(CAP, (1,), prioritized=True, seed=1))
    service.add_batch(items(CAP + 3))  # wraps: slots 0-2 written twice
    other = ReplayService(ReplayBuffer(CAP, (1,), prioritized=True, seed=2))
    other.load_state_dict(service.state_dict())
    a, b = service.sample(16), other.sample(16)
    for name in ("indices", "generations", "obs"):
        np.testing.assert_array_equal(a[name], b[name])
    assert sorted(set(a["generations"].tolist())) <= [1, 2]
    with pytest.raises(ValueError, match="capacity"):
        ReplayService(ReplayBuffer(4, (1,), prioritized=True)).load_state_dict(service.state_dict())


def test_update_and_sample_applies_the_updates_before_drawing():
    service = make()
    service.add_batch(items(CAP), priorities=np.ones(CAP))
    slots = np.arange(CAP)
    # every slot but 3 to (almost) zero: the next draw is all slot 3
    nxt = service.update_and_sample(slots, np.ones(CAP), np.where(slots == 3, 1.0, 0.0), 16)
    assert (nxt["indices"] == 3).all() and (nxt["generations"] == 1).all()
