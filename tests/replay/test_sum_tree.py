"""SumTree against plain numpy references: cumsum + searchsorted, sum, and min."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.replay import SumTree

# Integer-valued leaves keep every partial sum exact in float64, so the tree and the numpy
# reference must agree bit for bit, even on a query sitting exactly on a boundary.
leaf_values = st.lists(st.integers(0, 50), min_size=1, max_size=70).filter(lambda v: sum(v) > 0)


def reference_find(values: np.ndarray, u: np.ndarray) -> np.ndarray:
    return np.searchsorted(np.cumsum(values), u, side="right")


@settings(max_examples=150, deadline=None)
@given(
    values=leaf_values,
    extra_capacity=st.integers(0, 9),
    fractions=st.lists(st.floats(0.0, 1.0, exclude_max=True), min_size=1, max_size=40),
    boundary_picks=st.lists(st.integers(0, 1000), max_size=10),
)
def test_find_matches_searchsorted(values, extra_capacity, fractions, boundary_picks):
    values = np.array(values, dtype=np.float64)
    tree = SumTree(len(values) + extra_capacity)
    tree.update(np.arange(len(values)), values)
    total = values.sum()
    cumsum = np.cumsum(values)
    # Random queries plus queries exactly on the cumulative-sum boundaries (the u == cumsum[i]
    # case, where an off-by-one in the descent's comparison would show).
    boundaries = cumsum[np.array(boundary_picks, dtype=np.int64) % len(values)]
    u = np.concatenate([np.array(fractions) * total, boundaries[boundaries < total], [0.0]])
    found = tree.find(u)
    np.testing.assert_array_equal(found, reference_find(values, u))
    assert found.dtype == np.int64
    assert np.all(values[found] > 0)


@settings(max_examples=100, deadline=None)
@given(
    capacity=st.integers(1, 40),
    data=st.data(),
)
def test_total_min_and_items_match_numpy_after_random_updates(capacity, data):
    tree = SumTree(capacity)
    reference = np.zeros(capacity)
    for _ in range(data.draw(st.integers(1, 6))):
        # Short index lists over a small capacity draw many duplicates on purpose.
        indices = data.draw(st.lists(st.integers(0, capacity - 1), min_size=1, max_size=12))
        values = data.draw(
            st.lists(
                st.one_of(st.just(0.0), st.floats(1e-3, 1e3)),
                min_size=len(indices),
                max_size=len(indices),
            )
        )
        tree.update(np.array(indices), np.array(values))
        for i, v in zip(indices, values, strict=True):  # sequential writes: the last value wins
            reference[i] = v
        np.testing.assert_allclose(tree.total, reference.sum(), rtol=1e-12, atol=1e-12)
        positive = reference[reference > 0]
        assert tree.min() == (positive.min() if positive.size else np.inf)
        np.testing.assert_array_equal(tree[np.arange(capacity)], reference)


def test_duplicate_indices_last_value_wins():
    tree = SumTree(4)
    tree.update(np.array([1, 1, 2, 1]), np.array([5.0, 6.0, 7.0, 2.0]))
    assert tree[1] == 2.0
    assert tree.total == 9.0
    assert tree.min() == 2.0


def test_min_ignores_unset_and_zeroed_leaves():
    tree = SumTree(5)
    assert tree.min() == np.inf
    tree.update(np.array([0, 3]), np.array([4.0, 0.5]))
    assert tree.min() == 0.5
    tree.update(np.array([3]), np.array([0.0]))
    assert tree.min() == 4.0


@pytest.mark.parametrize("capacity", [1, 2, 3, 5, 8, 13])
def test_queries_at_or_past_total_return_last_positive_leaf(capacity):
    tree = SumTree(capacity)
    values = np.linspace(0.1, 0.7, capacity)
    values[-1] = 0.0 if capacity > 1 else values[-1]
    tree.update(np.arange(capacity), values)
    last_positive = np.flatnonzero(values)[-1]
    u = np.array([tree.total, np.nextafter(tree.total, np.inf), tree.total * 2, 1e300])
    np.testing.assert_array_equal(tree.find(u), last_positive)
    np.testing.assert_array_equal(tree.find(np.array([-1.0, -1e-300])), np.flatnonzero(values)[0])


def test_find_never_returns_empty_leaf_under_rounding():
    # Non-representable float values make the tree's pairwise sums and the stratified
    # points disagree in the last bits; every hit must still be a filled leaf.
    rng = np.random.default_rng(0)
    tree = SumTree(1000)
    filled = 777
    tree.update(np.arange(filled), rng.random(filled) * 1e-3 + 1e-12)
    batch = 100_000
    u = (np.arange(batch) + np.nextafter(1.0, 0.0)) * (tree.total / batch)
    found = tree.find(u)
    assert found.max() < filled
    assert np.all(tree[found] > 0)


def test_find_keeps_query_shape_and_does_not_modify_input():
    tree = SumTree(4)
    tree.update(np.arange(4), np.ones(4))
    u = np.array([[0.5, 1.5], [2.5, 3.5]])
    np.testing.assert_array_equal(tree.find(u), [[0, 1], [2, 3]])
    np.testing.assert_array_equal(u, [[0.5, 1.5], [2.5, 3.5]])


def test_find_on_empty_tree_raises():
    with pytest.raises(ValueError, match="total is 0"):
        SumTree(4).find(np.array([0.0]))


@pytest.mark.parametrize(
    ("values", "match"),
    [([-1.0], "non-negative"), ([np.nan], "finite"), ([np.inf], "finite")],
)
def test_update_rejects_bad_values(values, match):
    tree = SumTree(4)
    with pytest.raises(ValueError, match=match):
        tree.update(np.array([0]), np.array(values))
    assert tree.total == 0.0


def test_out_of_range_indices_raise():
    tree = SumTree(3)
    with pytest.raises(IndexError, match=r"\[0, 3\)"):
        tree.update(np.array([3]), np.array([1.0]))
    with pytest.raises(IndexError):
        tree[np.array([-1])]


@pytest.mark.parametrize("capacity", [0, -3])
def test_bad_capacity_raises(capacity):
    with pytest.raises(ValueError, match=f"capacity .*{capacity}"):
        SumTree(capacity)


def test_state_dict_round_trip():
    rng = np.random.default_rng(1)
    tree = SumTree(11)
    tree.update(np.arange(9), rng.random(9))
    restored = SumTree(11)
    restored.load_state_dict(tree.state_dict())
    assert restored.total == tree.total
    assert restored.min() == tree.min()
    u = rng.random(100) * tree.total
    np.testing.assert_array_equal(restored.find(u), tree.find(u))
    np.testing.assert_array_equal(restored[np.arange(11)], tree[np.arange(11)])


def test_load_state_dict_rejects_other_capacity():
    with pytest.raises(ValueError, match="capacity 4 does not match .* 5"):
        SumTree(5).load_state_dict(SumTree(4).state_dict())
