"""Which solver a ridge fit uses: ``solver="auto"`` takes the Gram path (Cholesky of the
accumulated p x p statistics) when its memory estimate fits, else the matrix-free
``"pcg"`` (ALGORITHMS.md 3.9); the memory checks of both, before any task runs.

The decision reads the same estimates and budget as the pre-fit check
(:func:`dkrr.linalg._memory.check_fit_memory`): the Gram path fits when its per-worker
part fits the smallest worker's memory limit (with a distributed Client) and its client
part this machine's available memory (without a Client, both together the available
memory). Options the PCG path does not support keep ``"auto"`` on the Gram path, and its
:class:`~dkrr.errors.MemoryBudgetError` then says why PCG could not be used.
"""

from __future__ import annotations

from ..errors import MemoryBudgetError
from ..features._registry import resolve_method
from ..features._rom import is_complex_rom
from ..linalg._memory import check_fit_memory

__all__ = ["choose_solver", "gram_memory_check", "pcg_memory_check", "pcg_unavailable"]


def pcg_unavailable(est, alpha, n_folds, gammas, alphas=None) -> str | None:
    """Why ``solver="pcg"`` cannot fit ``est`` with these arguments (None: it can)."""
    if gammas is not None:
        shown = est.gammas if isinstance(est.gammas, str) else [float(g) for g in gammas]
        return (f"gammas={shown!r} is not cross-validated by solver='pcg' (each gamma is another "
                "feature map, so another set of passes); fit one gamma at a time (gammas=None, "
                "dkrr fit --gammas none), or choose gamma with the Gram path on a row sub-sample")
    if est.sampling is not None:
        return f"sampling={est.sampling!r} is not available with solver='pcg'; drop sampling"
    if est.precision != "float64":
        return f"precision={est.precision!r} is not available with solver='pcg' (its passes are float64)"
    if n_folds > 1 and alphas is not None and (alphas <= 0).any():
        return (f"alphas={alphas.tolist()!r} holds alpha = 0: solver='pcg' needs every alpha > 0 (CG on an "
                "unregularised, possibly singular Z^T Z does not converge reliably)")
    if n_folds == 1 and alpha <= 0:
        return (f"solver='pcg' needs alpha > 0, got alpha={alpha!r}: CG on the unregularised (possibly "
                "singular) Z^T Z does not converge reliably; use a positive alpha, or solver='cholesky' "
                "for least squares")
    return None


def _common(est, Xd):
    method = resolve_method(est.method, Xd.shape[1], est.kernel)
    return dict(
        kernel=est.kernel, method=method, n_components=est.n_components,
        split_every=est.split_every, max_block_bytes=est.max_block_bytes, displacement_rank=est.displacement_rank,
        # complex features [Re, Im]: 2 D columns
        is_complex=is_complex_rom(method, est.rom_diagonal) or method == "tensor_srht",
    )


def gram_memory_check(est, Xd, yd, n_folds, gammas, *, limits=None):
    """The Gram path's estimate, refused (:class:`MemoryBudgetError`) when it cannot fit."""
    return check_fit_memory(
        Xd, yd, n_folds=n_folds, sampling=est.sampling, n_candidates=est.n_candidates,
        n_gammas=1 if gammas is None else len(gammas), limits=limits, **_common(est, Xd),
    )


def pcg_memory_check(est, Xd, yd, n_folds, n_alphas, rank, *, limits=None):
    """The PCG path's estimate (:func:`dkrr.linalg._pcg.pcg_memory_estimate`), refused
    (:class:`MemoryBudgetError` naming its terms and fixes) when it cannot fit: the worker
    part against the smallest worker's memory limit and the client part against this
    machine's available memory (without a Client, the larger part against the latter)."""
    from ..linalg._memory import available_memory, format_bytes

    # the estimate alone (an unbounded budget); None for parameters refused later
    estimate = check_fit_memory(Xd, yd, n_folds=n_folds, solver="pcg", pcg_rank=rank, n_alphas=n_alphas,
                                limits=(None, 2**62), **_common(est, Xd))
    if estimate is None:
        return None
    worker_limit, local = available_memory() if limits is None else limits
    if worker_limit is not None:
        checks = [(estimate.worker, worker_limit, "the memory limit of a Dask worker"),
                  (estimate.client, local, "the available memory of this machine")]
    else:
        checks = [(max(estimate.worker, estimate.client), local, "the available memory of this machine")]
    for need, limit, where in checks:
        if need > limit:
            p, l = estimate.p, min(rank, estimate.p)
            raise MemoryBudgetError(
                f"solver='pcg' needs about {format_bytes(need)}, more than {where} ({format_bytes(limit)}): with "
                f"n_components={est.n_components} (p={p} features), pcg_rank={l} and {n_folds} fold(s) x "
                f"{n_alphas if n_folds > 1 else 1} alpha(s) of right-hand sides per pass, a partial sum takes "
                f"{format_bytes(estimate.statistics)}, a block task {format_bytes(estimate.block_task)} and the client "
                f"{format_bytes(estimate.client)} (p x pcg_rank and p x right-hand-side arrays; nothing is p x p). Use "
                f"a smaller n_components (about {max(1, int(est.n_components * limit / need))} or fewer would "
                "fit), a smaller pcg_rank, fewer alphas or cv folds, or more memory."
            )
    return estimate


def choose_solver(est, Xd, yd, wd, n_folds, alpha, alphas, gammas, *, limits=None) -> str:
    """The solver of the fit: ``est.solver``, or for ``"auto"`` ``"cholesky"`` when the
    Gram path's estimate fits the budget (``limits`` as
    :func:`~dkrr.linalg._memory.available_memory` returns it; asked when None), else
    ``"pcg"``. Runs the Gram path's memory check for the Gram solvers (the PCG branch
    checks its own); a refusal names what ``"pcg"`` would have needed, or why it cannot
    be used."""
    if est.solver == "pcg":
        return "pcg"
    from ..linalg._cv import DEFAULT_ALPHA_EXPONENTS
    from ._pcg_fit import check_pcg_params

    try:
        gram_memory_check(est, Xd, yd, n_folds, gammas, limits=limits)
        return "cholesky" if est.solver == "auto" else est.solver
    except MemoryBudgetError as exc:
        reason = pcg_unavailable(est, alpha, n_folds, gammas, alphas)
        if reason is not None:
            what = "solver='auto' could not switch to" if est.solver == "auto" else "The alternative,"
            raise MemoryBudgetError(f"{exc} {what} the matrix-free solver='pcg': {reason}.") from None
        if est.solver != "auto":
            raise MemoryBudgetError(
                f"{exc} Or use solver='pcg' (matrix-free CG, no p x p matrix), or solver='auto', which "
                "switches to it when the Gram path does not fit."
            ) from None
        rank = check_pcg_params(est)[0]
        n_alphas = len(DEFAULT_ALPHA_EXPONENTS) if alphas is None else len(alphas)
        try:
            pcg_memory_check(est, Xd, yd, n_folds, n_alphas, rank, limits=limits)
        except MemoryBudgetError as pcg_exc:
            raise MemoryBudgetError(
                f"{exc} solver='auto' also tried the matrix-free solver='pcg', which does not fit either: "
                f"{pcg_exc}"
            ) from None
        return "pcg"
