"""What a prediction task holds: the linear model (map, coefficients, intercept) and,
for ``predict(X, return_std=...)``, the posterior of the Bayesian reading (ALGORITHMS.md
3.11); the block functions that evaluate them with the one sub-block engine."""

from __future__ import annotations

import dataclasses

import numpy as np

from .._validation import is_dask
from ..features._map import FeatureMap
from ..linalg._stats import feature_sub_blocks

__all__ = ["posterior_model", "predict_decision", "predict_mean_std"]


@dataclasses.dataclass(eq=False)
class _LinearModel:
    """What a prediction task needs: the map, coefficients (p, t) and intercept (t,)."""

    fmap: FeatureMap
    W: np.ndarray
    b: np.ndarray
    max_block_bytes: int

    def decision(self, X: np.ndarray) -> np.ndarray:
        """``phi(X) W + b`` (float64), computed in sub-blocks of at most max_block_bytes of Z."""
        out = np.empty((X.shape[0], self.W.shape[1]))
        for start, stop, Z in feature_sub_blocks(X, self.fmap, self.max_block_bytes):
            np.matmul(Z, self.W, out=out[start:stop])
        out += self.b
        return out


@dataclasses.dataclass(frozen=True, eq=False)
class _PosteriorModel:
    """What ``predict(X, return_std=...)`` needs: the linear model and the posterior
    (factor, feature means, ``1 / W``, noise variances (t,)); ``observation``: the std of
    a new noisy observation (True) or of the latent function (False)."""

    linear: _LinearModel
    factor: np.ndarray
    mean: np.ndarray
    inv_weight: float
    noise_variance: np.ndarray
    observation: bool

    def mean_std(self, X: np.ndarray) -> np.ndarray:
        """``[mean | std]`` of every row: (rows, 2t), features in sub-blocks."""
        from ..linalg._evidence import predictive_variance

        t = self.linear.W.shape[1]
        out = np.empty((X.shape[0], 2 * t))
        for start, stop, Z in feature_sub_blocks(X, self.linear.fmap, self.linear.max_block_bytes):
            out[start:stop, :t] = Z @ self.linear.W
            var = predictive_variance(Z, self.mean, self.factor, self.noise_variance, self.inv_weight,
                                      observation=self.observation)
            out[start:stop, t:] = np.sqrt(var)
        out[:, :t] += self.linear.b
        return out


def _mean_std_block(X, held, block_info=None):
    """Task body of ``predict(return_std=...)``: the :class:`_PosteriorModel` is
    ``held[()]`` (one graph key, :func:`~dkrr.features._blockwise.shared_object`)."""
    from .._validation import check_finite_rows

    info = block_info[0]
    check_finite_rows(X, "X", info["chunk-location"][0], info["array-location"][0][0])
    return held[()].mean_std(X)


def _decision_block(X, held, squeeze: bool, block_info=None):
    """Task body of a prediction: the :class:`_LinearModel` is ``held[()]`` (one graph key,
    :func:`~dkrr.features._blockwise.shared_object`)."""
    from .._validation import check_finite_rows

    info = block_info[0]
    check_finite_rows(X, "X", info["chunk-location"][0], info["array-location"][0][0])
    out = held[()].decision(X)
    return out[:, 0] if squeeze else out


def predict_mean_std(model: _PosteriorModel, Xv):
    """``(mean, std)`` (rows, t) of checked rows ``Xv``: numpy, or lazy dask arrays whose
    keys name the model's content and X (one block task computes both)."""
    t = model.linear.W.shape[1]
    if not is_dask(Xv):
        both = model.mean_std(Xv)
    else:
        from dask.base import tokenize

        from .._system import check_active_workers
        from ..features._blockwise import shared_object

        check_active_workers()  # workers below what a task needs: refused now, not looping later
        both = Xv.map_blocks(
            _mean_std_block, shared_object(model, "dkrr-posterior"), dtype=np.float64,
            chunks=(Xv.chunks[0], (2 * t,)), meta=np.empty((0, 0), dtype=np.float64),
            name=f"dkrr-mean-std-{tokenize(_mean_std_block, tokenize(model), Xv.name)}",
        )
    return both[:, :t], both[:, t:]


def predict_decision(model: _LinearModel, Xv, squeeze: bool):
    """``phi(X) W + b`` of checked rows ``Xv``: numpy, or a lazy dask array whose keys name
    the model's content and X (column 0 alone with ``squeeze``)."""
    t = model.W.shape[1]
    if not is_dask(Xv):
        out = model.decision(Xv)
        return out[:, 0] if squeeze else out
    from dask.base import tokenize

    from .._system import check_active_workers
    from ..features._blockwise import shared_object

    check_active_workers()  # workers below what a task needs: refused now, not looping later

    # the key is the identity of the result: the model's content (map, coefficients,
    # intercept) and X's name; the same model on the same input shares its tasks
    token = tokenize(model)
    chunks = (Xv.chunks[0],) if squeeze else (Xv.chunks[0], (t,))
    return Xv.map_blocks(
        _decision_block, shared_object(model, "dkrr-model"), squeeze,
        dtype=np.float64, chunks=chunks, drop_axis=1 if squeeze else None,
        meta=np.empty((0,) * len(chunks), dtype=np.float64),
        name=f"dkrr-decision-{tokenize(_decision_block, token, squeeze, Xv.name)}",
    )


def missing_posterior(est, cli: bool = False) -> tuple[str, str] | None:
    """Why a fitted regressor has no posterior (ALGORITHMS.md 3.11), and what gives one:
    ``(why, remedy)``, in the CLI's words with `cli`; None when it has one."""
    if getattr(est, "posterior_", None) is not None:
        return None
    if getattr(est, "solver_", None) == "pcg":
        return ("it was fitted with " + ("--solver pcg" if cli else "solver='pcg'") + ", which forms no p x p "
                "factor of the posterior", "Refit with " + ("`dkrr fit --solver cholesky`" if cli else
                                                            "solver='cholesky'") + " (the Gram path)")
    alpha = getattr(est, "alpha_", None)
    if alpha is not None and float(alpha) <= 0:
        return (f"alpha_ = {alpha}: the Bayesian reading needs alpha > 0 (the prior variance of the "
                "coefficients is s^2 / alpha)", "Refit with a positive alpha")
    return ("at the chosen alpha a target's residual is not positive (the features interpolate it: a "
            "constant target, or one without noise), so no noise variance can be estimated; or the model "
            "file was written without the posterior (by an older dkrr)",
            "Refit with a larger alpha, or fit such a target apart from the others")


def posterior_model(est, observation: bool) -> _PosteriorModel:
    """The :class:`_PosteriorModel` of a fitted regressor, or the error that says why it
    has none (:func:`missing_posterior`)."""
    from ..errors import InvalidParameterError

    missing = missing_posterior(est)
    if missing is not None:
        raise InvalidParameterError(
            f"predict(return_std=...) needs the posterior factor, which this model lacks: {missing[0]}. "
            f"{missing[1]} to get predictive standard deviations.")
    post = est.posterior_
    return _PosteriorModel(est._model(), post["factor"], post["mean"], float(post["inv_weight"]),
                           np.atleast_1d(np.asarray(est.noise_variance_, dtype=np.float64)), observation)
