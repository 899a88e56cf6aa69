"""The packed symmetric Gram of a pass (dkrr.linalg._packed; issue 16, item 1).

Inside a reduction each fold's Gram is the upper triangle in panels of 128 rows, summed
by grouped SYRK/GEMM products; the client unpacks it to full, exactly symmetric matrices.
The tests: the layout's length formula; the sums equal numpy's dense ``Z^T Z`` and the
full-storage accumulation that dkrr used before (``G += Z.T @ Z`` per sub-block) to
1e-12, for shapes that cut panels, groups and column chunks; float32 products summed in
float64; a pass over blocks, folds, chains and the tree equals the dense Grams; the
refusal of a wrongly shaped accumulator. The in-place DSYRK of a block task
(:class:`PackedGramSum` in direct mode): its sums equal the dense ones over folds and
sub-blocks, it leaves the strict lower triangle alone, it runs without the GIL, and the
rule that chooses it (float64, the budget, the rows, one BLAS thread).
"""

from __future__ import annotations

import sys
import threading

import dask
import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from dkrr.errors import InvalidParameterError
from dkrr.linalg import as_row_chunked, streamed_statistics
import dkrr.linalg._packed as packed_module
from dkrr.linalg._packed import (
    GROUP_COLS,
    GROUP_ROWS,
    PANEL_ROWS,
    PackedGramSum,
    add_packed_gram,
    direct_gram,
    gram_work_bytes,
    pack_gram,
    packed_length,
    panels,
    syrk_upper,
    unpack_gram,
    work_length,
)
from dkrr.linalg._stats import block_statistics, fold_feature_blocks, fold_ids, prepare_block


def _fmap(d, D, seed=0):
    from dkrr import RandomFeatures

    return RandomFeatures(method="rff", n_components=D, gamma=0.3, random_state=seed).fit(
        np.zeros((2, d))).feature_map_


@pytest.mark.parametrize(("p", "nb"), [(1, 128), (5, 2), (127, 128), (128, 128), (300, 128), (1000, 7), (64, 100)])
def test_packed_length_is_the_upper_triangle_and_the_diagonal_blocks(p, nb):
    rows = [b - a for a, b, _ in panels(p, nb)]
    L = packed_length(p, nb)
    assert L == p * (p + 1) // 2 + sum(r * (r - 1) // 2 for r in rows) <= p * (p + nb) // 2
    assert sum(rows) == p and all(r == nb for r in rows[:-1])
    offsets = [o for _, _, o in panels(p, nb)]
    assert offsets[0] == 0 and offsets == sorted(offsets)


@pytest.mark.parametrize("p", [1, 100, PANEL_ROWS + 3, GROUP_ROWS + 200, GROUP_ROWS + GROUP_COLS + 250])
def test_packed_sums_equal_dense_and_full_storage(p):
    """Three sub-blocks (of 40, 1 and 23 rows) added into one packed fold: the unpacked
    result is numpy's dense Gram and the full-storage sum to 1e-12, exactly symmetric."""
    rng = np.random.default_rng(p)
    Z = rng.standard_normal((64, p)) + 0.5
    parts = [Z[:40], Z[40:41], Z[41:]]
    G = np.zeros((2, packed_length(p)))
    work = np.empty(work_length(p))
    full = np.zeros((p, p))
    for part in parts:
        add_packed_gram(G[1], part, work)
        full += part.T @ part  # the accumulation before the packed Gram
    out = unpack_gram(G, p)
    dense = Z.T @ Z
    assert out.shape == (2, p, p) and not out[0].any()
    np.testing.assert_array_equal(out[1], out[1].T)
    np.testing.assert_allclose(out[1], dense, rtol=1e-12, atol=1e-12 * np.abs(dense).max())
    np.testing.assert_allclose(out[1], full, rtol=1e-12, atol=1e-12 * np.abs(dense).max())
    np.testing.assert_array_equal(pack_gram(out), G)  # the stored diagonal blocks are symmetric too


def test_float32_products_are_summed_in_float64():
    """float32 sub-blocks: float32 panel products added into the float64 packed sums. The
    error is that of one float32 product (the sums of 50 sub-blocks do not add it up)."""
    p = GROUP_ROWS + 300
    rng = np.random.default_rng(1)
    Z = rng.standard_normal((50 * 64, p)).astype(np.float32)
    G = np.zeros((1, packed_length(p)))
    work = np.empty(work_length(p), dtype=np.float32)
    for start in range(0, len(Z), 64):
        add_packed_gram(G[0], Z[start:start + 64], work)
    out = unpack_gram(G, p)[0]
    exact = Z.astype(np.float64).T @ Z.astype(np.float64)
    rel = np.linalg.norm(out - exact) / np.linalg.norm(exact)
    assert G.dtype == np.float64 and 0 < rel < 2 * 2.0**-23, rel
    np.testing.assert_array_equal(out, out.T)


def test_a_wrongly_shaped_accumulator_is_refused():
    Z = np.ones((3, 300))
    L = packed_length(300)
    assert L == 300 * 301 // 2 + 2 * (128 * 127 // 2) + 44 * 43 // 2
    with pytest.raises(InvalidParameterError, match=f"packed Gram of p=300 features has {L} numbers"):
        add_packed_gram(np.zeros((300, 300)), Z)  # a full Gram
    with pytest.raises(InvalidParameterError, match="packed Gram of p=300"):
        add_packed_gram(np.zeros(L - 1), Z)
    with pytest.raises(InvalidParameterError, match=rf"shape \(K, {L}\)"):
        unpack_gram(np.zeros((2, L + 1)), 300)
    with pytest.raises(InvalidParameterError, match="p >= 1"):
        panels(0)


def test_block_statistics_keep_g_packed_and_equal_the_full_storage_sums():
    """A block in 8 sub-blocks and 3 folds: the packed G, unpacked, equals the per-fold sums
    of the same sub-blocks in full storage and the dense per-fold Grams."""
    rng = np.random.default_rng(3)
    X, y = rng.standard_normal((400, 5)), rng.standard_normal(400)
    fmap = _fmap(5, 180)  # p = 360: three panels
    budget = 50 * 8 * 360  # 50 rows a sub-block
    s = block_statistics(X, y, 1000, 2, fmap, 3, 17, budget)
    assert s.packed and s.G.shape == (3, packed_length(360))
    Xf, Y, bounds, _ = prepare_block(X, y, 1000, 2, 3, 17, False)
    full = np.zeros((3, 360, 360))
    for k, Zk, _ in fold_feature_blocks(Xf, Y, bounds, fmap, budget):
        full[k] += Zk.T @ Zk
    Z = fmap.transform(X)
    f = fold_ids(np.arange(1000, 1400), 3, 17)
    dense = np.stack([Z[f == k].T @ Z[f == k] for k in range(3)])
    got = s.symmetrized()
    assert not got.packed
    np.testing.assert_allclose(got.G, full, rtol=1e-12, atol=1e-12 * np.abs(dense).max())
    np.testing.assert_allclose(got.G, dense, rtol=1e-12, atol=1e-12 * np.abs(dense).max())
    # the fold operations of the pass work on the packed form as on the full one
    np.testing.assert_allclose(s.training(1).symmetrized().G[0], dense.sum(0) - dense[1], rtol=1e-12,
                               atol=1e-12 * np.abs(dense).max())


@pytest.mark.parametrize("chunk_rows", [64, 150])
def test_a_pass_returns_full_symmetric_grams_independent_of_chunks_and_threads(chunk_rows):
    rng = np.random.default_rng(4)
    X = rng.standard_normal((600, 4))
    y = np.column_stack([np.sin(X[:, 0]), X[:, 1]])
    fmap = _fmap(4, 150)  # p = 300
    Xd, yd = as_row_chunked(X, y, chunk_rows=chunk_rows)
    with dask.config.set(scheduler="threads", num_workers=2):
        stats = streamed_statistics(Xd, yd, fmap, n_folds=4, fold_seed=9, split_every=2)
    with dask.config.set(scheduler="sync"):
        one = streamed_statistics(Xd, yd, fmap, n_folds=4, fold_seed=9)
    Z = fmap.transform(X)
    f = fold_ids(np.arange(600), 4, 9)
    dense = np.stack([Z[f == k].T @ Z[f == k] for k in range(4)])
    for s in (stats, one):
        assert not s.packed and s.G.shape == (4, 300, 300)
        np.testing.assert_array_equal(s.G, s.G.transpose(0, 2, 1))
        np.testing.assert_allclose(s.G, dense, rtol=1e-12, atol=1e-12 * np.abs(dense).max())


@pytest.mark.parametrize("p", [1, 100, PANEL_ROWS + 1, 300])
def test_direct_sums_over_folds_and_sub_blocks_equal_the_dense_grams(p):
    """Direct mode: sub-blocks of folds 0, 0, 2, 2, 2, 3 (fold 1 has none), the pending
    fold added into its panels when the next begins and at close. Each fold equals its
    dense Gram and the grouped products' sum to 1e-12; the unpacked result is exactly
    symmetric."""
    rng = np.random.default_rng(10 + p)
    parts = [(0, 30), (0, 1), (2, 17), (2, 40), (2, 5), (3, 23)]
    blocks = [(k, rng.standard_normal((rows, p)) + 0.3) for k, rows in parts]
    G = np.zeros((4, packed_length(p)))
    direct = PackedGramSum(G, p, np.float64, direct=True)
    H = np.zeros((4, packed_length(p)))
    grouped = PackedGramSum(H, p, np.float64, direct=False)
    for k, Z in blocks:
        direct.add(k, Z)
        grouped.add(k, Z)
    direct.close()
    direct.close()  # nothing pending: no second addition
    out = unpack_gram(G, p)
    dense = np.zeros((4, p, p))
    for k, Z in blocks:
        dense[k] += Z.T @ Z
    scale = np.abs(dense).max()
    assert not out[1].any()
    for k in range(4):
        np.testing.assert_array_equal(out[k], out[k].T)
        np.testing.assert_allclose(out[k], dense[k], rtol=1e-12, atol=1e-12 * scale)
    np.testing.assert_allclose(out, unpack_gram(H, p), rtol=1e-12, atol=1e-12 * scale)


def test_syrk_upper_writes_only_the_upper_triangle():
    """beta = 0 overwrites the upper triangle with Z^T Z, beta = 1 adds to it; the strict
    lower triangle keeps what it held; wrong dtypes or layouts are refused."""
    rng = np.random.default_rng(11)
    p = 37
    A, B = rng.standard_normal((50, p)), rng.standard_normal((9, p))
    C = np.full((p, p), 7.0)
    syrk_upper(C, A, 0.0)
    upper = np.triu_indices(p)
    lower = np.tril_indices(p, -1)
    np.testing.assert_allclose(C[upper], (A.T @ A)[upper], rtol=1e-13, atol=1e-13)
    assert (C[lower] == 7.0).all()
    syrk_upper(C, B, 1.0)
    np.testing.assert_allclose(C[upper], (A.T @ A + B.T @ B)[upper], rtol=1e-13, atol=1e-13)
    assert (C[lower] == 7.0).all()
    syrk_upper(C, A[:0], 1.0)  # no rows: C unchanged
    np.testing.assert_allclose(C[upper], (A.T @ A + B.T @ B)[upper], rtol=1e-13, atol=1e-13)
    syrk_upper(C, A[:0], 0.0)  # no rows, beta = 0: the upper triangle zero
    assert not C[upper].any() and (C[lower] == 7.0).all()
    # float32: SSYRK into a float32 C, the same triangle
    C32 = np.full((p, p), 7.0, dtype=np.float32)
    syrk_upper(C32, A.astype(np.float32), 0.0)
    exact = A.astype(np.float32).astype(np.float64)
    exact = exact.T @ exact
    np.testing.assert_allclose(C32[upper], exact[upper], rtol=0, atol=1e-5 * np.abs(exact).max())
    assert (C32[lower] == 7.0).all()
    for bad_C, bad_Z in [(C, A.astype(np.float32)), (C32, A), (np.asfortranarray(C), A), (C, A[:, ::-1]),
                         (C.astype(np.float16), A.astype(np.float16))]:
        with pytest.raises(InvalidParameterError, match="C-contiguous .* one dtype, float64 or float32"):
            syrk_upper(bad_C, bad_Z, 1.0)


def _main_thread_steps_during(call):
    """Steps a Python loop in this thread makes while ``call()`` runs in another one (a
    short switch interval: a call that holds the GIL leaves only a few steps, after it)."""
    started, done = threading.Event(), threading.Event()

    def run():
        started.set()
        call()
        done.set()

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        thread = threading.Thread(target=run)
        thread.start()
        started.wait()
        steps = 0
        while not done.is_set():
            steps += 1
        thread.join()
    finally:
        sys.setswitchinterval(interval)
    return steps


def test_the_direct_syrk_runs_without_the_gil():
    """While one thread runs the in-place DSYRK (ctypes), another runs Python: it makes
    many times the steps it makes during scipy's f2py dsyrk of the same product, which
    holds the GIL (why numpy's matmul, not scipy's wrapper, made the products before)."""
    from scipy.linalg.blas import dsyrk

    rng = np.random.default_rng(12)
    Z = rng.standard_normal((8192, 1024))
    C = np.zeros((1024, 1024))
    with threadpool_limits(limits=1):
        syrk_upper(C, Z[:64], 0.0)  # load the function before it is timed
        # three of each, the best of each kept: a busy machine can deschedule either thread
        free = max(_main_thread_steps_during(lambda: syrk_upper(C, Z, 1.0)) for _ in range(3))
        held = min(_main_thread_steps_during(lambda: dsyrk(1.0, Z.T, beta=1.0, c=C.T, trans=0, lower=1,
                                                           overwrite_c=1)) for _ in range(3))
    assert free > 20 * max(held, 1000), (free, held)


def test_the_direct_mode_is_chosen_for_blocks_within_budget_on_one_blas_thread():
    """float64: 8 p^2 within the budget, at least p rows a fold, one BLAS thread: direct.
    float32: 4 p^2 within the budget and one BLAS thread, any rows. Any one of them
    missing: the grouped products."""
    budget = 64 * 2**20
    with threadpool_limits(limits=1):
        assert direct_gram(2048, 65536, 5, np.float64, budget)
        assert direct_gram(2896, 2896, 1, np.float64, budget)
        assert not direct_gram(2897, 65536, 1, np.float64, budget)  # 8 p^2 above 64 MiB
        assert not direct_gram(2048, 5 * 2048 - 1, 5, np.float64, budget)
        assert direct_gram(2048, 65536, 5, np.float32, budget)
        assert direct_gram(4096, 100, 5, np.float32, budget)  # a float32 product goes into the panels at once
        assert not direct_gram(4097, 65536, 1, np.float32, budget)  # 4 p^2 above 64 MiB
        assert not direct_gram(64, 65536, 1, np.float16, budget)
    with threadpool_limits(limits=2):
        assert not direct_gram(2048, 65536, 5, np.float64, budget)
        assert not direct_gram(2048, 65536, 5, np.float32, budget)
    assert gram_work_bytes(2048, budget) == 8 * 2048 * 2048 > 8 * work_length(2048)
    assert gram_work_bytes(4096, budget) == 4 * 4096 * 4096 > 8 * work_length(4096)
    assert gram_work_bytes(8192, budget) == 8 * work_length(8192)


def test_float32_sub_blocks_by_the_direct_syrk_are_summed_in_float64():
    """The direct float32 path (SSYRK of each sub-block, added into the float64 panels at
    once): the error is that of one float32 product, as by the grouped products (the
    sums of 50 sub-blocks do not add it up), and the two paths agree to it; its lower
    triangles never leak into the panels."""
    p = GROUP_ROWS + 300
    rng = np.random.default_rng(14)
    Z = rng.standard_normal((50 * 64, p)).astype(np.float32)
    exact = Z.astype(np.float64).T @ Z.astype(np.float64)
    out = {}
    for direct in (True, False):
        G = np.zeros((2, packed_length(p)))
        with threadpool_limits(limits=1):
            gram = PackedGramSum(G, p, np.float32, direct=direct)
            for start in range(0, len(Z), 64):
                gram.add(1, Z[start:start + 64])
            gram.close()
        assert not G[0].any()
        out[direct] = unpack_gram(G, p)[1]
        np.testing.assert_array_equal(out[direct], out[direct].T)
        rel = np.linalg.norm(out[direct] - exact) / np.linalg.norm(exact)
        assert 0 < rel < 2 * 2.0**-23, (direct, rel)
    np.testing.assert_allclose(out[True], out[False], rtol=0, atol=4 * 2.0**-23 * 64 * np.abs(exact).max() / 50)


@pytest.mark.parametrize("with_weights", [False, True])
def test_block_statistics_are_the_same_by_both_gram_paths(with_weights):
    """One block of 2,000 rows, 3 folds, p = 300, float64, sub-blocks of 300 rows: with
    one BLAS thread the Gram takes the direct path, with two the grouped products; the
    statistics agree to 1e-12 and equal the dense per-fold Grams."""
    from dkrr.linalg._weighted import weighted_maps_block_statistics

    rng = np.random.default_rng(13)
    X, y = rng.standard_normal((2000, 6)), rng.standard_normal(2000)
    w = rng.uniform(0.5, 2.0, 2000)
    fmap = _fmap(6, 150)
    budget = 8 * 300 * 300  # the direct accumulator just fits; 300 rows a sub-block

    def stats():
        if with_weights:
            (out,) = weighted_maps_block_statistics(X, y, w, 500, 1, [fmap], 3, 5, budget, False)
            return out
        return block_statistics(X, y, 500, 1, fmap, 3, 5, budget)

    with threadpool_limits(limits=1):
        assert direct_gram(300, 2000, 3, np.float64, budget)
        one = stats().symmetrized()
    with threadpool_limits(limits=2):
        assert not direct_gram(300, 2000, 3, np.float64, budget)
        two = stats().symmetrized()
    Z = fmap.transform(X) * (np.sqrt(w)[:, None] if with_weights else 1.0)
    f = fold_ids(np.arange(500, 2500), 3, 5)
    dense = np.stack([Z[f == k].T @ Z[f == k] for k in range(3)])
    scale = np.abs(dense).max()
    np.testing.assert_allclose(one.G, two.G, rtol=1e-12, atol=1e-12 * scale)
    np.testing.assert_allclose(one.G, dense, rtol=1e-12, atol=1e-12 * scale)
    np.testing.assert_array_equal(one.c, two.c)


@pytest.mark.parametrize("with_weights", [False, True])
def test_float32_block_statistics_are_the_same_by_both_gram_paths(with_weights, monkeypatch):
    """A block of 2,000 rows in 3 folds in float32, p = GROUP_ROWS + 300 (the grouped
    products cut the Gram into a SYRK and a GEMM, the direct path makes one SSYRK): the
    direct path (one BLAS thread) and the grouped products (two) agree to float32
    products' rounding, and both to the dense float64 per-fold Grams of the float32
    features; the linear statistics do not depend on the path. (OpenBLAS sums each entry
    in the same order by both, so they may agree to the bit: the direct run is made with
    the grouped products' function refused.)"""
    from dkrr.linalg._precision import float32_weight_unit
    from dkrr.linalg._weighted import weighted_maps_block_statistics

    rng = np.random.default_rng(15)
    X, y = rng.standard_normal((2000, 6)), rng.standard_normal(2000)
    w = rng.uniform(0.5, 2.0, 2000)
    p = GROUP_ROWS + 300
    fmap = _fmap(6, p // 2)
    budget = 4 * p * p  # the float32 accumulator just fits

    def stats():
        if with_weights:
            (out,) = weighted_maps_block_statistics(X, y, w, 500, 1, [fmap], 3, 5, budget, False,
                                                    precision="float32")
            return out
        return block_statistics(X, y, 500, 1, fmap, 3, 5, budget, precision="float32")

    def grouped(*args, **kwargs):
        raise AssertionError("the grouped products were used")

    with threadpool_limits(limits=1), monkeypatch.context() as m:
        m.setattr(packed_module, "add_packed_gram", grouped)
        assert direct_gram(p, 2000, 3, np.float32, budget)
        one = stats().symmetrized()
    with threadpool_limits(limits=2):
        assert not direct_gram(p, 2000, 3, np.float32, budget)
        two = stats().symmetrized()
    Z = fmap.transform(X.astype(np.float32)).astype(np.float64)
    Z *= np.sqrt(w / float32_weight_unit(w, np.float32))[:, None] if with_weights else 1.0
    f = fold_ids(np.arange(500, 2500), 3, 5)
    dense = np.stack([Z[f == k].T @ Z[f == k] for k in range(3)])
    scale = np.abs(dense).max()
    if with_weights:
        dense *= float32_weight_unit(w, np.float32)
    tol = 700 * 2.0**-23 * scale  # a fold's rows in one float32 sum
    np.testing.assert_allclose(one.G, two.G, rtol=0, atol=tol)
    np.testing.assert_allclose(one.G, dense, rtol=0, atol=tol)
    np.testing.assert_array_equal(one.c, two.c)
