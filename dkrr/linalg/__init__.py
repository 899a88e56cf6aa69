"""Streamed linear algebra: row-block reductions, ridge statistics, solvers, one-pass CV."""

from ._blocks import as_row_chunked, default_chunk_rows
from ._cv import check_alphas, check_folds, cross_validate_statistics, select_alpha
from ._reduce import DEFAULT_SPLIT_EVERY, reduce_row_blocks
from ._solve import (
    TridiagonalGram,
    center_statistics,
    ridge_coefficients,
    solve_cholesky,
    solve_tridiagonal,
)
from ._stats import (
    DEFAULT_MAX_BLOCK_BYTES,
    RidgeStatistics,
    block_statistics,
    combine_statistics,
    fold_ids,
    streamed_statistics,
)

__all__ = [
    "DEFAULT_MAX_BLOCK_BYTES",
    "DEFAULT_SPLIT_EVERY",
    "RidgeStatistics",
    "TridiagonalGram",
    "as_row_chunked",
    "block_statistics",
    "center_statistics",
    "check_alphas",
    "check_folds",
    "combine_statistics",
    "cross_validate_statistics",
    "default_chunk_rows",
    "fold_ids",
    "reduce_row_blocks",
    "ridge_coefficients",
    "select_alpha",
    "solve_cholesky",
    "solve_tridiagonal",
    "streamed_statistics",
]
