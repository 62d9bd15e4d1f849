"""Uniform and proportional prioritized sampling: distribution, weights, beta, priorities."""

from __future__ import annotations

import numpy as np
import pytest

from shoal.replay import PrioritizedSampler, UniformSampler


def filled_sampler(priorities, *, capacity=None, **kwargs) -> PrioritizedSampler:
    priorities = np.asarray(priorities, dtype=np.float64)
    sampler = PrioritizedSampler(capacity or len(priorities), **kwargs)
    indices = np.arange(len(priorities))
    sampler.on_add(indices)
    sampler.update_priorities(indices, priorities)
    return sampler


def stored_values(sampler: PrioritizedSampler) -> np.ndarray:
    return sampler.state_dict()["tree"]["values"]


def test_uniform_sampler_returns_int64_indices_in_range_and_unit_weights():
    sampler = UniformSampler()
    indices, weights = sampler.sample(7, 5000, np.random.default_rng(0))
    assert indices.dtype == np.int64 and weights.dtype == np.float32
    assert indices.shape == weights.shape == (5000,)
    assert indices.min() == 0 and indices.max() == 6
    np.testing.assert_array_equal(weights, 1.0)


@pytest.mark.parametrize(("size", "batch_size"), [(0, 4), (5, 0), (5, -1)])
def test_samplers_reject_empty_or_bad_batch(size, batch_size):
    rng = np.random.default_rng(0)
    for sampler in (UniformSampler(), filled_sampler([1.0] * 5)):
        with pytest.raises(ValueError):
            sampler.sample(size, batch_size, rng)


def test_prioritized_frequencies_are_proportional_to_priority_to_the_alpha():
    alpha, eps = 0.6, 1e-6
    td = np.array([0.0, 0.5, 1.0, 2.0, 3.0, 5.0, 8.0, 13.0])
    sampler = filled_sampler(td, alpha=alpha, eps=eps)
    rng = np.random.default_rng(123)
    draws = np.concatenate([sampler.sample(len(td), 1000, rng)[0] for _ in range(200)])
    counts = np.bincount(draws, minlength=len(td))
    expected_p = (td + eps) ** alpha / ((td + eps) ** alpha).sum()
    expected = expected_p * draws.size
    chi2 = ((counts - expected) ** 2 / expected).sum()
    # 24.32 is the 0.999 quantile of chi-square with 7 degrees of freedom. Stratified draws
    # vary less than independent ones, so this bound is conservative.
    assert chi2 < 24.32, (chi2, counts, expected)
    np.testing.assert_allclose(counts / draws.size, expected_p, atol=3e-3)
    # Sanity check that the test can tell alpha apart: priorities without the exponent would
    # give a very different distribution.
    linear_p = (td + eps) / (td + eps).sum()
    assert np.abs(counts / draws.size - linear_p).max() > 0.05


def test_stratified_sampling_hits_each_equal_priority_item_once():
    # One draw per equal segment: with N equal priorities and batch N, every item appears
    # exactly once. Independent draws would almost surely repeat some.
    sampler = filled_sampler(np.full(64, 0.3))
    indices, _ = sampler.sample(64, 64, np.random.default_rng(5))
    np.testing.assert_array_equal(np.sort(indices), np.arange(64))


def test_importance_weights_match_formula():
    alpha, beta = 0.7, 0.5
    td = np.array([0.1, 2.0, 0.4, 7.0, 0.0, 1.5])
    # capacity > size, so the sampler's unused slots must not take part.
    sampler = filled_sampler(td, capacity=16, alpha=alpha, beta=beta, beta_final=beta)
    size = len(td)
    indices, weights = sampler.sample(size, 500, np.random.default_rng(0))
    assert weights.dtype == np.float32
    p = (td + 1e-6) ** alpha
    probs = p / p.sum()
    max_weight = (size * probs.min()) ** -beta
    expected = (size * probs[indices]) ** -beta / max_weight
    np.testing.assert_allclose(weights, expected, rtol=1e-6)
    assert np.all((weights > 0) & (weights <= 1))
    assert weights[indices == 4].size == 0 or np.allclose(weights[indices == 4], 1.0)


def test_smallest_priority_item_gets_weight_one():
    sampler = filled_sampler([1.0, 1.0, 1.0, 1.0], alpha=1.0, beta=1.0)
    _, weights = sampler.sample(4, 8, np.random.default_rng(0))
    np.testing.assert_allclose(weights, 1.0)


def test_beta_anneals_linearly_and_is_used_by_sample():
    td = np.array([1.0, 4.0])
    sampler = filled_sampler(td, alpha=1.0, beta=0.4, beta_final=1.0, beta_steps=10)
    rng = np.random.default_rng(0)
    ratio = (td[1] + 1e-6) / (td[0] + 1e-6)  # weight of item 1 is ratio ** -beta
    for call in range(15):
        expected_beta = min(1.0, 0.4 + 0.06 * call)
        assert sampler.beta == pytest.approx(expected_beta)
        indices, weights = sampler.sample(2, 10, rng)
        assert 1 in indices
        np.testing.assert_allclose(weights[indices == 1], ratio**-expected_beta, rtol=1e-6)
    assert sampler.beta == 1.0


def test_beta_can_anneal_downwards_and_state_keeps_the_schedule():
    sampler = filled_sampler([1.0], beta=1.0, beta_final=0.0, beta_steps=4)
    for _ in range(2):
        sampler.sample(1, 1, np.random.default_rng(0))
    assert sampler.beta == pytest.approx(0.5)
    restored = PrioritizedSampler(1, beta=1.0, beta_final=0.0, beta_steps=4)
    restored.load_state_dict(sampler.state_dict())
    assert restored.beta == pytest.approx(0.5)


def test_new_items_get_max_priority_seen_so_far():
    alpha, eps = 0.5, 1e-6
    sampler = PrioritizedSampler(8, alpha=alpha, eps=eps)
    sampler.on_add(np.array([0, 1]))
    np.testing.assert_allclose(stored_values(sampler)[:2], 1.0)  # initial max priority
    sampler.update_priorities(np.array([0, 1]), np.array([9.0, 0.25]))
    sampler.on_add(np.array([2]))
    assert stored_values(sampler)[2] == pytest.approx((9.0 + eps) ** alpha)
    # Lowering every priority does not lower the running max.
    sampler.update_priorities(np.array([0, 1, 2]), np.array([0.1, 0.1, 0.1]))
    sampler.on_add(np.array([3]))
    assert stored_values(sampler)[3] == pytest.approx((9.0 + eps) ** alpha)
    assert sampler.max_priority == pytest.approx(9.0 + eps)


def test_update_priorities_stores_shifted_power():
    alpha, eps = 0.6, 0.01
    td = np.array([0.0, 1.0, 3.0])
    sampler = filled_sampler(td, alpha=alpha, eps=eps)
    np.testing.assert_allclose(stored_values(sampler), (td + eps) ** alpha)


@pytest.mark.parametrize(
    ("priorities", "match"),
    [
        ([1.0, np.nan], "NaN"),
        ([np.inf, 1.0], "inf"),
        ([-0.5, 1.0], "non-negative"),
    ],
)
def test_bad_priorities_are_rejected(priorities, match):
    sampler = filled_sampler([1.0, 1.0])
    before = stored_values(sampler).copy()
    with pytest.raises(ValueError, match=match):
        sampler.update_priorities(np.array([0, 1]), np.array(priorities))
    np.testing.assert_array_equal(stored_values(sampler), before)


def test_mismatched_priority_shape_is_rejected():
    sampler = filled_sampler([1.0, 1.0])
    with pytest.raises(ValueError, match="same shape"):
        sampler.update_priorities(np.array([0, 1]), np.array([1.0]))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"alpha": -0.1}, "alpha must be >= 0, got -0.1"),
        ({"beta": 1.5}, r"beta must lie in \[0, 1\], got 1.5"),
        ({"beta": -0.1}, r"beta must lie in \[0, 1\], got -0.1"),
        ({"beta_final": 2.0}, r"beta_final must lie in \[0, 1\], got 2.0"),
        ({"beta_steps": 0}, "beta_steps must be a positive integer .* got 0"),
        ({"eps": 0.0}, "eps must be > 0, got 0.0"),
        ({"alpha": float("nan")}, "alpha"),
    ],
)
def test_constructor_validates_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        PrioritizedSampler(4, **kwargs)


def test_prioritized_state_round_trip_resumes_identical_samples():
    sampler = filled_sampler([0.5, 2.0, 1.0, 0.0, 3.0], capacity=8, beta_steps=5)
    rng = np.random.default_rng(9)
    sampler.sample(5, 4, rng)
    restored = PrioritizedSampler(8, beta_steps=5)
    restored.load_state_dict(sampler.state_dict())
    rng_copy = np.random.default_rng(9)
    rng_copy.bit_generator.state = rng.bit_generator.state
    for _ in range(6):
        a, wa = sampler.sample(5, 16, rng)
        b, wb = restored.sample(5, 16, rng_copy)
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(wa, wb)


def test_sampler_states_are_not_interchangeable():
    with pytest.raises(ValueError, match="'prioritized'.*UniformSampler"):
        UniformSampler().load_state_dict(PrioritizedSampler(4).state_dict())
    with pytest.raises(ValueError, match="'uniform'.*PrioritizedSampler"):
        PrioritizedSampler(4).load_state_dict(UniformSampler().state_dict())
    with pytest.raises(ValueError, match="alpha"):
        PrioritizedSampler(4, alpha=0.5).load_state_dict(PrioritizedSampler(4).state_dict())
