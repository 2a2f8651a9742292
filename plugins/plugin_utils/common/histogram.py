# -*- coding: utf-8 -*-
"""Python twin of iobench's latency histogram (roles/iobench/files/src/hist.c).

Pure module (no Ansible imports): the fleet report uses it to merge the histograms of
several runs or hosts exactly and to compute percentiles from the merged buckets.

Index scheme, for ``bits`` sub-bucket bits (iobench JSON ``sub_bucket_bits``, 6 = 64
sub-buckets per power of two), ``B = 2**bits``:

* a value ``v < B`` (nanoseconds) has index ``v`` (exact);
* otherwise, with ``e = floor(log2(v))`` and ``shift = e - bits``,
  ``index = (shift + 1) * B + (v >> shift) - B``.

Bucket ``index`` covers the integer values ``[lo, hi)`` returned by ``bucket_range``.
Its representative value is the midpoint ``lo + (hi - lo - 1) / 2``, so the relative
error of a percentile is at most ``1 / 2**(bits + 1)`` (0.78 % for 6 bits).
Percentiles use the nearest-rank definition: the value of rank ``ceil(p/100 * n)``.
"""

from __future__ import annotations

import math

DEFAULT_BITS = 6
MAX_EXP = 43  # iobench clamps values at 2**44 - 1 ns


def value_to_index(value, bits=DEFAULT_BITS, max_exp=MAX_EXP):
    """Index of the bucket holding ``value`` (integer nanoseconds)."""
    value = int(value)
    if value < 0:
        raise ValueError("latency must be >= 0")
    base = 1 << bits
    if value < base:
        return value
    top = (1 << (max_exp + 1)) - 1
    if value > top:
        value = top
    e = value.bit_length() - 1
    shift = e - bits
    return ((shift + 1) << bits) + (value >> shift) - base


def bucket_range(index, bits=DEFAULT_BITS):
    """``(lo, hi)``: the bucket covers integer values lo <= v < hi (ns)."""
    index = int(index)
    if index < 0:
        raise ValueError("index must be >= 0")
    base = 1 << bits
    if index < base:
        return index, index + 1
    shift = (index >> bits) - 1
    sub = index & (base - 1)
    return (base + sub) << shift, (base + sub + 1) << shift


def bucket_value(index, bits=DEFAULT_BITS):
    """Representative value (midpoint) of a bucket, in ns, as iobench reports it."""
    lo, hi = bucket_range(index, bits)
    return lo + (hi - lo - 1) / 2.0


def _pairs(buckets):
    if isinstance(buckets, dict):
        items = buckets.items()
    else:
        items = buckets
    for idx, count in items:
        yield int(idx), int(count)


def merge(*bucket_lists):
    """Merge several bucket lists ([[index, count], ...] or {index: count}) exactly.

    Returns a sorted list of [index, count] pairs without empty buckets."""
    acc = {}
    for buckets in bucket_lists:
        if not buckets:
            continue
        for idx, count in _pairs(buckets):
            if count:
                acc[idx] = acc.get(idx, 0) + count
    return [[i, acc[i]] for i in sorted(acc)]


def merge_histograms(*histograms):
    """Merge iobench ``histogram`` objects ({unit, sub_bucket_bits, buckets}).

    All must share ``sub_bucket_bits``; raises ValueError otherwise."""
    hs = [h for h in histograms if h]
    bits = {int(h.get("sub_bucket_bits", DEFAULT_BITS)) for h in hs}
    if len(bits) > 1:
        raise ValueError("cannot merge histograms with different sub_bucket_bits: %s" % sorted(bits))
    return {
        "unit": "ns",
        "sub_bucket_bits": bits.pop() if bits else DEFAULT_BITS,
        "buckets": merge(*[h.get("buckets") for h in hs]),
    }


def count(buckets):
    return sum(c for _idx, c in _pairs(buckets or []))


def percentile(buckets, p, bits=DEFAULT_BITS, lo_clamp=None, hi_clamp=None):
    """Nearest-rank percentile ``p`` (0-100] in ns from buckets; None when empty.

    ``lo_clamp``/``hi_clamp`` (e.g. the exact min/max) bound the result as iobench does."""
    pairs = sorted(_pairs(buckets or []))
    total = sum(c for _idx, c in pairs)
    if total == 0:
        return None
    rank = int(math.ceil(p / 100.0 * total - 1e-9))
    rank = min(max(rank, 1), total)
    cum = 0
    value = bucket_value(pairs[-1][0], bits)
    for idx, c in pairs:
        cum += c
        if cum >= rank:
            value = bucket_value(idx, bits)
            break
    if lo_clamp is not None and value < lo_clamp:
        value = lo_clamp
    if hi_clamp is not None and value > hi_clamp:
        value = hi_clamp
    return value


def percentiles(buckets, ps=(50, 90, 95, 99, 99.9, 99.99), bits=DEFAULT_BITS):
    """Dict of percentiles in ns, keyed like iobench's JSON (``p50`` ... ``p99.99``)."""
    out = {}
    for p in ps:
        key = "p%s" % (("%g" % p))
        out[key] = percentile(buckets, p, bits)
    return out


def bucket_mean(buckets, bits=DEFAULT_BITS):
    """Approximate mean (ns) of a histogram from its bucket midpoints; None when empty
    (stats.mean is the mean of plain numbers)."""
    pairs = list(_pairs(buckets or []))
    total = sum(c for _idx, c in pairs)
    if not total:
        return None
    return sum(bucket_value(i, bits) * c for i, c in pairs) / float(total)


def workload_histogram(record, op):
    """The latency histogram of ``op`` of a workload record, or None.

    The one place that knows where a record keeps it (docs/contracts.md: ``histograms``
    stay only in the module result, ``result.bench.ops.<op>.histogram``)."""
    try:
        h = record["result"]["bench"]["ops"][op]["histogram"]
    except (KeyError, TypeError):
        return None
    return h if isinstance(h, dict) and h.get("buckets") else None
