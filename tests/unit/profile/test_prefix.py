"""The radix replay is exact: it agrees with a brute-force cache on random logs."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from service.profile import longest_earlier_matches, radix_reuse_rate, sharing_rate


def _ids(values: list[int]) -> np.ndarray:
    return np.asarray(values, dtype=np.uint32)


def _lcp(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _brute_force(prompts: list[list[int]], outputs: list[list[int]] | None) -> list[int]:
    cached: list[list[int]] = []
    best = []
    for i, prompt in enumerate(prompts):
        best.append(max((_lcp(prompt, entry) for entry in cached), default=0))
        cached.append(prompt + (outputs[i] if outputs is not None else []))
    return best


sequences = st.lists(st.lists(st.integers(0, 3), max_size=8), min_size=1, max_size=25)


@settings(max_examples=60, deadline=None)
@given(prompts=sequences, data=st.data())
def test_matches_equal_a_brute_force_cache(prompts, data):
    outputs = data.draw(st.lists(st.lists(st.integers(0, 3), max_size=4), min_size=len(prompts),
                                 max_size=len(prompts)))
    arrays = [_ids(p) for p in prompts]
    assert longest_earlier_matches(arrays) == _brute_force(prompts, None)
    assert longest_earlier_matches(arrays, [_ids(o) for o in outputs]) == _brute_force(prompts, outputs)


@settings(max_examples=50, deadline=None)
@given(prompts=sequences)
def test_sharing_rate_is_the_casebook_sorted_adjacent_sum(prompts):
    total = sum(len(p) for p in prompts)
    ordered = sorted(prompts)
    expected = sum(_lcp(a, b) for a, b in zip(ordered, ordered[1:], strict=False)) / total if total else 0.0
    assert abs(sharing_rate([_ids(p) for p in prompts]) - expected) < 1e-12


def test_identical_prompts_still_compute_their_last_token():
    same = [_ids([7] * 25)] * 3
    assert sharing_rate(same) == 50 / 75
    assert radix_reuse_rate(same) == 48 / 75


def test_page_size_counts_whole_pages_only():
    prompts = [_ids(list(range(100))), _ids(list(range(90)) + [999] * 10)]
    assert radix_reuse_rate(prompts, page_size=1) == 90 / 200
    assert radix_reuse_rate(prompts, page_size=64) == 64 / 200
