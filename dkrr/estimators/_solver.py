"""Which solver a ridge fit uses: ``solver="auto"`` takes the Gram path (Cholesky of the
accumulated p x p statistics) when its memory estimate fits, else the matrix-free
``"pcg"`` (ALGORITHMS.md 3.9); the memory checks of both, before any task runs.

The decision reads the same estimates and budget as the pre-fit check
(:func:`dkrr.linalg._memory.check_fit_memory`): the Gram path fits when its per-worker
part fits the smallest worker's memory limit (with a distributed Client) and its client
part this machine's available memory (without a Client, both together the available
memory; "available memory" is the host's or, when less, what this process's cgroup limit
leaves: :func:`dkrr._system.local_memory`). Options the PCG path does not support
keep ``"auto"`` on the Gram path, and its :class:`~dkrr.errors.MemoryBudgetError` then says
why PCG could not be used. :func:`choose_solver` also says why it chose (the estimator's
``solver_reason_``), with the numbers, so that the same fit on two machines can be
explained.
"""

from __future__ import annotations

from typing import NamedTuple

from ..errors import MemoryBudgetError
from ..features._registry import resolve_method
from ..features._rom import is_complex_rom
from ..linalg._memory import MemoryLimits, budget_checks, check_fit_memory, format_bytes, memory_limits

__all__ = ["SolverChoice", "choose_solver", "gram_memory_check", "pcg_memory_check", "pcg_unavailable"]

#: limits under which an estimate is only computed, never refused
_UNBOUNDED = MemoryLimits(None, 2**62, "no limit")


class SolverChoice(NamedTuple):
    """What :func:`choose_solver` decided: the ``solver`` of the fit and the ``reason`` (a
    sentence with the memory estimate, the limit and where the limit comes from)."""

    solver: str
    reason: str


def pcg_unavailable(est, alpha, n_folds, gammas, alphas=None) -> str | None:
    """Why ``solver="pcg"`` cannot fit ``est`` with these arguments (None: it can)."""
    if gammas is not None:
        shown = est.gammas if isinstance(est.gammas, str) else [float(g) for g in gammas]
        return (f"gammas={shown!r} is not cross-validated by solver='pcg' (each gamma is another "
                "feature map, so another set of passes); fit one gamma at a time (gammas=None, "
                "dkrr fit --gammas none), or choose gamma with the Gram path on a row sub-sample")
    if est.sampling is not None:
        return f"sampling={est.sampling!r} is not available with solver='pcg'; drop sampling"
    if est.precision == "float32":  # "auto" is float64 there
        return "precision='float32' is not available with solver='pcg' (its passes are float64)"
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
    # the estimate alone (an unbounded budget); None for parameters refused later
    estimate = check_fit_memory(Xd, yd, n_folds=n_folds, solver="pcg", pcg_rank=rank, n_alphas=n_alphas,
                                limits=_UNBOUNDED, **_common(est, Xd))
    if estimate is None:
        return None
    for need, limit, where, _ in budget_checks(estimate, limits):
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


def _needs(path: str, estimate, limits) -> str:
    """``the Gram path (p = 128 features) needs about 2.10 MiB in all, within the available
    memory of this machine (22.9 GiB)``: an estimate against each of its limits."""
    if estimate is None:
        return f"{path}'s memory was not estimated"
    return (f"{path} (p = {estimate.p} features) needs about "
            + " and ".join(check.text() for check in budget_checks(estimate, limits)))


def choose_solver(est, Xd, yd, wd, n_folds, alpha, alphas, gammas, *, limits=None) -> SolverChoice:
    """The solver of the fit and why: ``est.solver``, or for ``"auto"`` ``"cholesky"`` when
    the Gram path's estimate fits the budget (``limits`` as
    :func:`~dkrr.linalg._memory.memory_limits` takes them; asked when None), else
    ``"pcg"``. Runs the Gram path's memory check for the Gram solvers (the PCG branch
    checks its own); a refusal names what ``"pcg"`` would have needed, or why it cannot
    be used. The reason quotes the estimates against the limits and where the limits
    come from (a worker's ``memory_limit``, the host's available memory, a cgroup)."""
    if est.solver == "pcg":
        return SolverChoice("pcg", "solver='pcg' was asked for (matrix-free CG: no p x p Gram is formed)")
    from ..linalg._cv import DEFAULT_ALPHA_EXPONENTS
    from ._pcg_fit import check_pcg_params

    limits = memory_limits(limits)  # asked once: the decision and its reason quote the same numbers
    try:
        estimate = gram_memory_check(est, Xd, yd, n_folds, gammas, limits=limits)
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
            pcg_estimate = pcg_memory_check(est, Xd, yd, n_folds, n_alphas, rank, limits=limits)
        except MemoryBudgetError as pcg_exc:
            raise MemoryBudgetError(
                f"{exc} solver='auto' also tried the matrix-free solver='pcg', which does not fit either: "
                f"{pcg_exc}"
            ) from None
        gram = gram_memory_check(est, Xd, yd, n_folds, gammas, limits=_UNBOUNDED)  # its numbers
        return SolverChoice("pcg", f"solver='auto' chose 'pcg': {_needs('the Gram path', gram, limits)}; "
                                   f"{_needs('the matrix-free pcg', pcg_estimate, limits)}")
    if est.solver == "auto":
        return SolverChoice("cholesky", f"solver='auto' chose 'cholesky': {_needs('the Gram path', estimate, limits)}")
    return SolverChoice(est.solver, f"solver={est.solver!r} was asked for; {_needs('the Gram path', estimate, limits)}")
