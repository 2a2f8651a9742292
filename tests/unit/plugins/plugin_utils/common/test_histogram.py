"""Python twin of iobench's histogram: index scheme, merge, percentiles (<= 1 % error)."""
import math
import random

import pytest

from ansible_collections.fleetqual.storage.plugins.plugin_utils.common import histogram as h


def exact_percentile(sorted_values, p):
    n = len(sorted_values)
    rank = min(max(int(math.ceil(p / 100.0 * n - 1e-9)), 1), n)
    return sorted_values[rank - 1]


def to_buckets(values, bits=6):
    acc = {}
    for v in values:
        i = h.value_to_index(v, bits)
        acc[i] = acc.get(i, 0) + 1
    return sorted([i, c] for i, c in acc.items())


@pytest.mark.parametrize("bits", [3, 6])
def test_index_range_roundtrip(bits):
    values = list(range(0, 3000)) + [int(1.37 ** k) for k in range(10, 110) if 1.37 ** k < 2 ** 44]
    for v in values:
        i = h.value_to_index(v, bits)
        lo, hi = h.bucket_range(i, bits)
        assert lo <= v < hi, (v, i, lo, hi)
    # monotonic and contiguous
    prev_hi = None
    for i in range(0, 40 << bits):
        lo, hi = h.bucket_range(i, bits)
        if prev_hi is not None:
            assert lo == prev_hi
        prev_hi = hi


def test_known_indexes_match_c_scheme():
    # values below 128 are exact with 6 bits; 128 starts buckets of width 2
    assert h.value_to_index(0) == 0
    assert h.value_to_index(63) == 63
    assert h.value_to_index(64) == 64
    assert h.value_to_index(127) == 127
    assert h.value_to_index(128) == 128 and h.value_to_index(129) == 128
    assert h.bucket_range(128) == (128, 130)
    assert h.value_to_index(1000) == 317
    assert h.bucket_range(317) == (1000, 1008)
    assert h.value_to_index(1007) == 317 and h.value_to_index(1008) == 318
    assert h.value_to_index(2 ** 60) == h.value_to_index(2 ** 44)  # clamped like the C code


@pytest.mark.parametrize("dist", ["uniform", "loguniform", "bimodal"])
def test_percentiles_within_one_percent(dist):
    rnd = random.Random(7)
    if dist == "uniform":
        values = [rnd.randint(1000, 10_000_000) for _n in range(50000)]
    elif dist == "loguniform":
        values = [int(math.exp(rnd.uniform(math.log(50), math.log(2e9)))) for _n in range(50000)]
    else:
        values = [rnd.randint(1500, 2500) if rnd.random() < 0.7 else rnd.randint(150000, 250000)
                  for _n in range(50000)]
    buckets = to_buckets(values)
    s = sorted(values)
    for p in (1, 50, 90, 95, 99, 99.9, 99.99, 100):
        est = h.percentile(buckets, p, lo_clamp=s[0], hi_clamp=s[-1])
        exact = exact_percentile(s, p)
        assert abs(est - exact) / exact <= 0.01, (p, est, exact)


def test_merge_is_exact():
    rnd = random.Random(3)
    a = [rnd.randint(100, 10 ** 7) for _n in range(5000)]
    b = [rnd.randint(100, 10 ** 9) for _n in range(7000)]
    merged = h.merge(to_buckets(a), to_buckets(b))
    assert merged == to_buckets(a + b)
    assert h.count(merged) == 12000
    m2 = h.merge_histograms({"unit": "ns", "sub_bucket_bits": 6, "buckets": to_buckets(a)},
                            {"unit": "ns", "sub_bucket_bits": 6, "buckets": to_buckets(b)})
    assert m2["buckets"] == merged
    with pytest.raises(ValueError):
        h.merge_histograms({"sub_bucket_bits": 6, "buckets": []}, {"sub_bucket_bits": 3, "buckets": []})


def test_empty_and_dict_input():
    assert h.percentile([], 99) is None
    assert h.bucket_mean([]) is None
    assert h.bucket_mean([[5, 2], [70, 2]]) == pytest.approx((h.bucket_value(5) + h.bucket_value(70)) / 2)
    assert h.bucket_mean({70: 3}) == h.bucket_value(70)
    assert h.percentile({5: 1}, 50) == 5
    p = h.percentiles([[5, 1]])
    assert set(p) == {"p50", "p90", "p95", "p99", "p99.9", "p99.99"}
