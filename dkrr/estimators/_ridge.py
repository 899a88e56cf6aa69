"""Kernel ridge regression with random features, fitted in one streamed pass:
:class:`RandomFeatureRidge` (and the shared machinery of the classifier)."""

from __future__ import annotations

import dataclasses

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted

from .._system import check_active_workers
from .._validation import check_input, check_n_features, is_dask
from ..errors import InputValidationError, InvalidParameterError
from ..linalg import DEFAULT_MAX_BLOCK_BYTES, as_row_chunked
from ..linalg._cv import AUTO_GAMMA_FACTORS, check_gammas, check_rows_for_folds
from ..linalg._weighted import check_sample_weight
from ._fitted import RidgeFit, replace_fitted_state
from ._folds import fold_plan
from ._passes import fit_statistics_path
from ._pcg_fit import fit_pcg
from ._random_features import check_ridge_map
from ._solver import choose_solver
from ._inputs import _materialize, _refuse_sparse, _shifted_target  # noqa: F401 - the classifier imports them from here
from ._inputs import frame_inputs, frame_to_predict, names_state, score_target
from ._models import _LinearModel, posterior_model, predict_decision, predict_mean_std
from ._ridge_params import check_ridge_params, uses_evidence

__all__ = ["RandomFeatureRidge"]


class _RandomFeatureRidgeBase(BaseEstimator):
    """Parameters, the streamed fit and the decision function shared by the estimators."""

    _labels_mode = False

    def __init__(
        self,
        kernel="gaussian",
        method="auto",
        n_components=256,
        gamma=1.0,
        alpha=1.0,
        alphas=None,
        cv=None,
        fit_intercept=True,
        random_state=None,
        *,
        nu=None, degree=None, coef0=None,
        n_hd_blocks=None,
        row_norms=None,
        displacement_rank=None,
        skew_nonzeros=None,
        sequence=None,
        rom_diagonal=None,
        row_sampling=None,
        chunk_rows=None,
        max_block_bytes=DEFAULT_MAX_BLOCK_BYTES,
        split_every=None,
        solver="auto",
        sampling=None,
        n_candidates=None,
        gammas=None,
        pcg_rank=None, tol=1e-6, max_iter=200, pcg_persist="auto",
        standardize=False,
        precision="auto",
    ):
        self.kernel = kernel
        self.method = method
        self.n_components = n_components
        self.gamma = gamma
        self.alpha = alpha
        self.alphas = alphas
        self.cv = cv
        self.fit_intercept = fit_intercept
        self.random_state = random_state
        self.nu, self.degree, self.coef0 = nu, degree, coef0
        self.n_hd_blocks = n_hd_blocks
        self.row_norms = row_norms
        self.displacement_rank = displacement_rank
        self.skew_nonzeros = skew_nonzeros
        self.sequence = sequence
        self.rom_diagonal = rom_diagonal
        self.row_sampling = row_sampling
        self.chunk_rows = chunk_rows
        self.max_block_bytes = max_block_bytes
        self.split_every = split_every
        self.solver, self.sampling, self.n_candidates = solver, sampling, n_candidates
        self.gammas = gammas
        self.pcg_rank, self.tol, self.max_iter, self.pcg_persist = pcg_rank, tol, max_iter, pcg_persist
        self.standardize = standardize
        self.precision = precision

    # ---------------------------------------------------------------- validation
    def _check_params(self):
        """The parameters, checked: ``(alpha, K, alphas)`` (:func:`check_ridge_params`)."""
        return check_ridge_params(self)

    # ---------------------------------------------------------------- fitting
    def _fit_streamed(self, X, y, sample_weight=None, groups=None) -> RidgeFit:
        """Validate, make the pass(es), cross-validate and solve: a ``RidgeFit`` (no attribute set)."""
        if y is None:
            raise InputValidationError(f"{type(self).__name__} requires y to be passed, but the target y is None")
        _refuse_sparse(X, y)
        alpha, K, alphas = self._check_params()
        Xd, yd = as_row_chunked(X, y, chunk_rows=self.chunk_rows, y_kind="labels" if self._labels_mode else "numeric")
        check_ridge_map(self, Xd.shape[1])  # before any pass over X
        folds = fold_plan(self.cv, Xd, y, groups)  # a splitter's or explicit splits' folds, else None
        K = K if folds is None else folds.n_folds
        gammas = check_gammas(self.gammas, kernel=self.kernel, n_folds=max(K, 2 * uses_evidence(self)),
                              sampling=self.sampling)
        wd = check_sample_weight(sample_weight, Xd)
        if wd is not None and self.sampling is not None:
            raise InvalidParameterError(f"sample_weight cannot be combined with sampling={self.sampling!r} (the "
                                        "leverage scores are unweighted); drop one of them.")
        n = Xd.shape[0]
        check_rows_for_folds(n, K)
        yd, shift = _shifted_target(yd, not self._labels_mode and bool(self.fit_intercept), y)
        # gammas="auto": the grid around the resolved gamma (known after the draws below);
        # the memory estimate and the solver's choice need only its length
        relative = isinstance(gammas, str)
        if relative:
            gammas = AUTO_GAMMA_FACTORS
        # "auto": the Gram path when its memory estimate fits (checked here, before any task), else pcg
        solver, solver_reason = choose_solver(self, Xd, yd, wd, K, alpha, alphas, gammas)
        targets_fn = self._targets_fn()
        if solver == "pcg" and (uses_evidence(self) or folds is not None):
            what = "cv='evidence'" if folds is None else "cv as a splitter or explicit splits"
            raise InvalidParameterError(f"{what} needs the Gram path, but {solver_reason} Lower n_components.")
        if solver == "pcg":  # matrix-free: one streamed pass per CG iteration
            fit = fit_pcg(self, Xd, yd, wd, K, gammas, alpha, alphas, targets_fn)
        else:
            fit = fit_statistics_path(self, Xd, yd, wd, n, K, alpha, alphas, gammas, relative, solver, targets_fn,
                                      folds=folds)
        return dataclasses.replace(fit, intercept=fit.intercept + shift, solver_reason=solver_reason)

    def _targets_fn(self):
        """What turns the pass's statistics into those of the fitted targets (None: y itself)."""
        return None

    def _coef_and_intercept(self, fit: RidgeFit, y_ndim: int):
        """``(coef_, intercept_)`` of ``fit`` in the estimator's convention."""
        raise NotImplementedError

    def _set_fitted(self, fit: RidgeFit, y_ndim: int, names=None) -> None:
        """The one place where a ridge estimator's fitted attributes are set: all of them
        from ``fit``, in one step (:func:`~dkrr.estimators._fitted.replace_fitted_state`;
        the attributes of an earlier fit that this one does not have are dropped). Called
        only after the whole fit succeeded, so a failed fit leaves the estimator as it was.
        `names`: the column names of a DataFrame X (``feature_names_in_``), or None."""
        coef, intercept = self._coef_and_intercept(fit, y_ndim)
        fmap = fit.feature_map
        state = dict(
            coef_=coef, intercept_=intercept, alpha_=fit.alpha, gamma_=fit.gamma, feature_map_=fmap,
            mean_=fit.mean, scale_=fit.scale, n_features_in_=fmap.n_features_in,
            n_output_features_=fmap.n_output_features, fold_seed_=fit.fold_seed, solver_=fit.solver,
            precision_=fit.precision, precision_error_=fit.precision_error,
        )
        optional = dict(cv_results_=fit.cv_results, best_score_=fit.best_score, solver_info_=fit.solver_info,
                        classes_=fit.classes, solver_reason_=fit.solver_reason, refinement_=fit.refinement)
        if fit.posterior is not None:  # the regressor's Gram paths (ALGORITHMS 3.11)
            post = fit.posterior
            s2 = np.asarray(post["noise_variance"], dtype=np.float64)
            optional.update(
                noise_variance_=float(s2[0]) if y_ndim == 1 else s2,
                log_marginal_likelihood_=float(post["log_marginal_likelihood"]),
                posterior_={"factor": post["factor"], "mean": post["mean"], "inv_weight": float(post["inv_weight"])},
            )
        state.update({k: v for k, v in optional.items() if v is not None})
        replace_fitted_state(self, {**state, **names_state(names)})

    # ---------------------------------------------------------------- prediction
    def _model(self) -> _LinearModel:
        coef = np.atleast_2d(self.coef_)  # (t, p)
        b = np.broadcast_to(np.asarray(self.intercept_, dtype=np.float64), (coef.shape[0],)).copy()
        return _LinearModel(self.feature_map_, np.ascontiguousarray(coef.T), b, int(self.max_block_bytes))

    def _decision(self, X, squeeze: bool):
        """``phi(X) coef^T + intercept``: numpy in -> numpy out, dask/zarr -> lazy dask."""
        check_is_fitted(self, "coef_")
        _refuse_sparse(X)
        Xv = check_input(frame_to_predict(self, X), name="X")
        check_n_features(Xv.shape, self.n_features_in_, estimator=self)
        return predict_decision(self._model(), Xv, squeeze)


class RandomFeatureRidge(RegressorMixin, _RandomFeatureRidgeBase):
    """Kernel ridge regression with random features, fitted in one pass over row blocks.

    Fits ``f(x) = phi(x)^T beta + b`` minimising ``||y - Z beta - b||^2 + alpha
    ||beta||^2`` (scikit-learn's ``Ridge`` convention) where ``Z = phi(X)`` are random
    features approximating the kernel (ALGORITHMS.md sections 1-3). The data may be a
    numpy array, a row-chunked dask array or a zarr array: one dask task per row block
    computes the block's features and the sufficient statistics ``Z^T Z``, ``Z^T y``,
    ... (``precision``), a tree reduction sums them, and the solve happens on the client. Z is
    never materialised beyond a sub-block of ``max_block_bytes``. With ``cv`` the
    statistics are also kept per fold, and every (fold, alpha) is scored from them alone:
    choosing alpha costs no extra pass over the data.

    Parameters
    ----------
    kernel : {"gaussian", "matern", "laplacian", "polynomial", "angular", "arccos0", "arccos1", "linear"}, default="gaussian"
        The kernel (see :class:`dkrr.RandomFeatures`). ``"linear"``: ridge on a random
        projection (JLT sketch) of X, ``k(x, y) = x^T y``.
    method : str, default="auto"
        Construction of the projection (see :class:`dkrr.RandomFeatures`; ``"auto"`` is ORF
        up to 128 padded input columns, SORF above).
    n_components : int, default=256
        D, the number of random frequencies; the model has ``n_output_features_``
        coefficients per target (``2 * D`` for the gaussian kernel). scikit-learn's
        ``RBFSampler`` counts output columns instead.
    gamma : float, array of shape (n_features,), "median" or "scale", default=1.0
        The kernel's width as in :class:`dkrr.RandomFeatures` (gaussian ``exp(-gamma ||x -
        y||^2)``; matern of length scale ``1 / sqrt(2 gamma)``; laplacian; polynomial): one
        per column for ARD (shift-invariant kernels); ``"median"`` (the 50-NN rule on a
        seeded 1,000-row sample; gaussian and matern) and ``"scale"`` (``1 / (d Var X)``)
        computed on the standardised X with ``standardize``. The value used is ``gamma_``.
    alpha : float, default=1.0
        Ridge penalty, ``>= 0`` as scikit-learn's ``Ridge`` (a negative value is an
        :class:`~dkrr.errors.InvalidParameterError`). ``0`` is least squares and raises
        :class:`~dkrr.errors.SingularSystemError` when ``Z^T Z`` is singular.
    alphas : array-like of float, default=None
        Grid (each ``>= 0``) scored by cross-validation; requires ``cv`` (a grid without ``cv`` is an
        error rather than a silent choice of folds).
    cv : int, "evidence", splitter or iterable of (train, test), default=None
        An int: the folds K of the one-pass cross-validation, rows hashed to folds by their global index
        (independent of the chunking). A scikit-learn splitter (``KFold``, ``StratifiedKFold``,
        ``GroupKFold`` with ``fit(..., groups=...)``, ``PredefinedSplit``, ...) or ``(train, test)`` index
        arrays, as ``RidgeCV`` takes (Gram path): their test sets must partition the rows (the one pass trains
        fold k on every other row); ``TimeSeriesSplit``, ``ShuffleSplit`` are refused with the reason
        (ALGORITHMS.md 3.3). ``"evidence"`` (regression, Gram path): (gamma, alpha) by the log marginal
        likelihood instead (ALGORITHMS.md 3.11; one tridiagonal reduction per gamma, no fold statistics). With
        ``cv`` and no ``alphas`` the grid ``s * 10**(-7, ..., 1)`` is scored, ``s`` the mean diagonal of the
        (centred) Gram (ALGORITHMS.md 3.6; ``alpha`` is then not used). A chosen alpha on the edge of its
        grid warns (:class:`~dkrr.errors.GridEdgeWarning`).
    fit_intercept : bool, default=True
    random_state : int, numpy Generator, SeedSequence, RandomState or None, default=None
        One generator is made from it (a RandomState by one draw); the feature map is drawn first (exactly as
        ``RandomFeatures(random_state=...)`` draws it), then the fold seed, then (``gamma=
        "median"``) the seed of the bandwidth's row sample.
    nu, degree, coef0 : optional
        ``nu`` of ``matern`` (default 1.5), ``degree`` (3) and ``coef0`` (1) of ``polynomial``.
    n_hd_blocks, row_norms, displacement_rank, skew_nonzeros, sequence, rom_diagonal, row_sampling : optional
        Options of the projection methods (see :class:`dkrr.RandomFeatures`).
    chunk_rows : int, default=None
        Rows per block. numpy input is cut into blocks of this size (default: about
        32 MiB of X per block and at least 8 blocks when there are enough rows); dask
        input is rechunked when it is given, and otherwise keeps its row chunks unless
        there are more than 1,024 of them with fewer than 4,096 rows on average: such
        small chunks are joined, consecutive ones, into blocks of at least 4,096 rows
        (each block costs every pass about a millisecond of task overhead; the result is
        the same but for rounding).
    max_block_bytes : int, default=64 MiB
        Memory budget of the float64 feature buffer of one task: a block whose
        ``rows x p x 8`` exceeds it is processed in sub-blocks.
    split_every : int, default=None
        Fan-in of the tree reduction (default 8).
    solver : {"auto", "cholesky", "eigh", "pcg"}, default="auto"
        ``"cholesky"``/``"eigh"``: the Gram path (its CV uses one tridiagonal reduction
        ``G = Q T Q^T`` per fold for the whole grid; ``"eigh"`` solves by that reduction
        too, ALGORITHMS.md 3.5). ``"pcg"``: matrix-free preconditioned CG, one pass per
        iteration, no p x p array; with ``cv`` every (fold, alpha) system shares each pass
        (fold-masked matvecs, ALGORITHMS.md 3.9). ``"auto"``: Cholesky when the Gram path's
        memory estimate fits the workers' and this machine's memory (the host's available
        memory, or what this process's cgroup limit leaves when that is less), else
        ``"pcg"`` (``solver_`` says which, ``solver_reason_`` why).
    pcg_rank, tol, max_iter, pcg_persist : int, float, int, bool or "auto", default=None, 1e-6, 200, "auto"
        ``solver="pcg"``: rank of the Nystrom preconditioner (None: ``min(256, p)``; 0: plain
        CG), relative residual to stop at, most iterations (then a ``PcgConvergenceWarning``),
        and whether X is kept in (worker) memory across the passes (``"auto"``: when X and
        y take at most a quarter of the memory the fit's estimate leaves free; else every
        pass reads the source). numpy X with a distributed Client is sent to the workers
        once and held there for the fit in any case.
    sampling : {None, "surrogate_leverage", "ridge_leverage"}, default=None
        Data-dependent frequencies (ALGORITHMS.md section 4, Liu et al. 2020): draw
        ``n_candidates`` candidates with ``method``, score them in one streamed pass
        (surrogate leverage ``(y^T z_i)^2``, centred y / +-1 labels; or ridge leverage from
        the candidates' Gram with penalty ``alpha``), keep ``n_components`` of them by
        weighted resampling with importance weights, then fit: exactly two passes over
        the data. With ``cv`` and surrogate leverage each fold's features are sampled from
        its training rows only (the second pass then computes ``cv + 1`` feature maps per
        block); ridge leverage does not read the labels and uses one map for every fold.
    n_candidates : int, default=None
        l, the number of candidates (``>= n_components``; default ``4 * n_components``).
        Only with ``sampling``.
    gammas : array-like of float or "auto", default=None
        Grid of widths (each ``> 0``) scored jointly with ``alphas`` by the
        one-pass CV (requires ``cv`` and a kernel with a width: gaussian, matern, laplacian,
        polynomial; not with ``sampling``; ``gamma`` is then not used). With an ARD
        ``gamma`` (an array) the grid holds multipliers ``t`` of the whole array: the
        widths ``t * gamma`` are scored, ``cv_results_["gammas"]`` are the multipliers and
        ``gamma_`` the chosen ``t * gamma``. ``"auto"``: the grid ``gamma_ * 2**(-3..2)`` around
        ``gamma`` or the value of its rule (``dkrr fit``'s default; equal to the fit with
        that explicit list; ALGORITHMS.md 3.6). Without ``alphas`` the default alpha grid
        follows the Gram of the grid's middle width. X is read once: one map is drawn and rescaled to each
        gamma (``W = sqrt(2 gamma) W_unit``, the map that ``gamma`` and the same
        ``random_state`` would draw; Nystroem keeps its landmarks), and every block task
        accumulates one statistics object per gamma, so the cost grows with the number
        of gammas and the reads do not. A chosen gamma on the edge of the grid warns
        (:class:`~dkrr.errors.GridEdgeWarning`).
    standardize : bool, default=False
        Centre and scale the columns before the map, as in :class:`dkrr.RandomFeatures`
        (one more streamed pass over X, for the column moments; ``feature_map_`` then
        applies ``(x - mean_) / scale_``, also in model files).
    precision : {"auto", "float64", "float32"}, default="auto"
        ``"auto"``: the statistics pass and the CV in float32, then the final model's
        coefficients refined to the float64 solution by a few streamed float64 passes
        (``precision_ = "mixed"``, ``refinement_``); where alpha is below what float32
        resolves, a :class:`~dkrr.errors.PrecisionWarning` and the pass in float64.
        ``"float32"``: float32 statistics (sub-block products in single precision,
        float64 sums) solved as they are; ``"float64"``: one float64 pass (ALGORITHMS.md
        3.10). With ``solver="pcg"`` or ``sampling``, ``"auto"`` is float64.
    Attributes
    ----------
    coef_ : ndarray of shape (p,) or (n_targets, p)
    intercept_ : float or ndarray of shape (n_targets,)
        ``0.0`` when ``fit_intercept=False`` (as scikit-learn).
    alpha_ : float
        The alpha of the final fit (chosen by CV when ``cv`` is given).
    feature_map_ : FeatureMap
        The fitted map, the same name and type as ``RandomFeatures.feature_map_`` (with
        ``sampling``, the resampled map of the final fit):
        ``feature_map_.transform(X)`` gives the features of a float numpy array ``X``
        (already validated: finite, 2-D). For dask or zarr input,
        ``RandomFeatures`` with the same map parameters and integer ``random_state``,
        fitted on X, draws this same map (without ``sampling``) and transforms lazily.
    n_features_in_, n_output_features_ : int
        The columns of X, and p, the width of Z.
    cv_results_ : dict
        With ``cv``: ``alphas``, ``fold_mse`` (K, n_alphas) validation MSEs (averaged over targets),
        ``mean_mse`` (weighted by fold size), ``std_mse`` (unweighted over folds), ``fold_sizes`` (rows;
        with ``sample_weight`` rows of positive weight, the MSEs weighted, the mean by the folds' weight
        sums). With ``cv="evidence"``: ``alphas``, ``log_evidence`` (n_alphas,) summed over targets and
        ``noise_variance`` (n_alphas, n_targets), a column even for 1-D y. With ``gammas`` also ``gammas``
        (n_gammas,), and the other arrays gain a leading gamma axis (``fold_mse`` (n_gammas, K, n_alphas)).
    best_score_ : float
        With ``cv``: minus the mean validation MSE of ``alpha_`` (and ``gamma_``; higher is
        better). Ties of the mean go to the larger alpha, then to the smaller gamma.
    gamma_ : float or ndarray of shape (n_features_in_,)
        The width used: ``gamma``, the value of its rule, or with ``gammas`` the
        chosen one (``feature_map_`` is its map); an array with ARD.
    mean_, scale_ : ndarray of shape (n_features_in_,) or None
        The column means and scales of ``standardize`` (None without it).
    fold_seed_ : int
        Seed of the fold hash.
    solver_ : {"cholesky", "eigh", "pcg"}
        The solver used (what ``"auto"`` chose).
    solver_reason_ : str
        Why: a sentence with the memory estimate of the Gram path (and of PCG when
        ``"auto"`` switched to it) against the limits and where they come from (a Dask
        worker's ``memory_limit``, this machine's available memory or its cgroup limit),
        e.g. ``solver='auto' chose 'cholesky': the Gram path (p = 256 features) needs about
        3.45 MiB in all, within the available memory of this machine (21.8 GiB)``; so the
        same fit on two machines can be explained. Saved in model files (absent from
        files saved before it existed).
    solver_info_ : dict
        PCG only: ``n_iter``, ``converged``, ``residuals`` (iterations x systems: targets, or
        with ``cv`` (folds + 1) x alphas x targets), ``tol``, ``rank``, ``passes``, ``persisted``.
    precision_ : {"mixed", "float64", "float32"}
        The statistics' precision; ``"mixed"``: float32, the coefficients refined in float64.
    precision_error_ : float
        Estimated relative change of the coefficients from rounding, ``eps (||G||_F / alpha_ + 20)``
        in ``precision_`` (float64's for ``"mixed"``; an upper estimate; ``nan`` with ``solver="pcg"``).
    refinement_ : dict
        ``precision_ = "mixed"`` only: ``passes`` (float64 passes), ``residuals`` (passes, targets: relative
        residuals, the first the float32 solution's), ``converged`` and ``tol``.
    noise_variance_ : float or ndarray of shape (n_targets,)
        Gram path only: the noise variance ``s^2`` of the Bayesian reading at ``alpha_``
        (profiled at its maximum, ALGORITHMS.md 3.11), used by ``predict(return_std=...)``.
    log_marginal_likelihood_ : float
        Gram path only: the log evidence at ``alpha_`` (and ``gamma_``), summed over targets.
    posterior_ : dict
        Gram path only: ``factor`` (the lower Cholesky factor of ``G_c + alpha_ I``),
        ``mean`` (feature means) and ``inv_weight`` (``1 / W``), what the std needs.

    Notes
    -----
    Predictions are float64 whatever the input dtype (float32 input is cast per block);
    ``feature_map_.transform`` keeps a float32 input's dtype.

    Examples
    --------
    >>> import numpy as np
    >>> from dkrr import RandomFeatureRidge
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((200, 3)); y = np.sin(X[:, 0])
    >>> est = RandomFeatureRidge(method="rff", n_components=64, gamma=0.5, alphas=[0.01, 0.1, 1],
    ...                          cv=3, random_state=0).fit(X, y)
    >>> est.coef_.shape, est.score(X, y) > 0.9
    ((128,), True)
    """

    def fit(self, X, y, sample_weight=None, groups=None):
        """Fit from numpy, dask or zarr ``X`` (n, d) and ``y`` (n,) or (n, t) in one pass.

        Parameters
        ----------
        X : array-like, dask array, zarr array or DataFrame of shape (n, d)
            A pandas or dask DataFrame's column names are kept as ``feature_names_in_``
            (when all are strings) and checked at predict, as scikit-learn does; its
            columns must be numeric (others are refused with their names). A dask
            DataFrame is read as a dask array with known chunk sizes (one pass counts
            the rows of its partitions).
        y : array-like, dask array, zarr array or Series of shape (n,) or (n, t)
        sample_weight : float or array-like, dask array or zarr array of shape (n,), default=None
            Row weights, scikit-learn's ``Ridge`` convention: minimise ``sum_i w_i (y_i -
            z_i^T beta - b)^2 + alpha ||beta||^2`` (intercept from weighted means; with ``cv`` the
            fold errors are weighted MSEs). Finite and ``>= 0``, not all zero; streamed with X (dask/zarr
            weights checked block by block). ``standardize`` and ``gamma="scale"`` use weighted moments;
            ``gamma="median"`` and Nyström landmarks draw rows of positive weight only (ALGORITHMS.md 5).
            The Bayesian reading takes them as precision weights (noise ``s^2 / w``; ALGORITHMS.md 3.11).
        groups : array-like or dask array of shape (n,), default=None
            Groups for a group splitter ``cv`` (its ``split``); with ``GroupKFold``, dask integer codes
            aligned with X are hashed to folds in the pass, never gathered. Refused without such a ``cv``.

        Raises
        ------
        InputValidationError
            Shapes, dtypes, X/y length mismatch, too few rows for the folds.
        NonFiniteInputError
            NaN or inf in X or y (the message names the block and count).
        InvalidParameterError
            Invalid parameters, e.g. ``alpha < 0`` (checked before the pass).
        SingularSystemError
            The regularised system is singular (``alpha = 0`` with singular ``Z^T Z``).
        MemoryBudgetError
            The fit cannot be held in memory, or the active Client's workers have a memory
            limit below what a worker needs to run dkrr's tasks at all (about 375 MiB;
            checked before the first task).
        """
        check_active_workers()  # workers that cannot run a task at all: refused before the first
        X, y, sample_weight, groups, names = frame_inputs(X, y, sample_weight, groups)
        y_ndim = y.ndim if hasattr(y, "ndim") else np.asarray(y).ndim
        self._set_fitted(self._fit_streamed(X, y, sample_weight, groups), y_ndim, names)
        return self

    def _coef_and_intercept(self, fit, y_ndim):
        beta, intercept = fit.beta, fit.intercept
        if y_ndim == 1:
            coef, b = beta[:, 0].copy(), float(intercept[0])
        else:
            coef, b = np.ascontiguousarray(beta.T), intercept
        return coef, (b if self.fit_intercept else 0.0)  # 0.0: as scikit-learn's Ridge

    def predict(self, X, return_std=False):
        """Predictions: numpy (computed block by block) or a lazy dask array for dask/zarr X.

        Shape (n,) for a model fitted on 1-D y, else (n, n_targets).

        Parameters
        ----------
        X : array-like, dask or zarr array of shape (n, n_features_in_)
        return_std : bool or "latent", default=False
            Also return the predictive standard deviation (scikit-learn's
            ``GaussianProcessRegressor.predict(X, return_std=True)``) of the model read as
            Bayesian linear regression on the features, noise variance ``noise_variance_``
            (ALGORITHMS.md 3.11, also for its float32 rounding under the default precision):
            ``True`` for a new observation (of weight 1), ``"latent"`` for ``f(x)``. Not after
            ``solver="pcg"`` (no p x p factor exists).

        Returns
        -------
        y_pred : ndarray or dask array
        y_std : ndarray or dask array, same shape (only with ``return_std``)
        """
        check_is_fitted(self, "coef_")
        squeeze = np.ndim(self.coef_) == 1
        # a bool (numpy's too) or "latent"; not 1 or 1.0, which equal True but could be read
        # either way ("latent" and True give different standard deviations)
        if isinstance(return_std, (bool, np.bool_)):
            return_std = bool(return_std)
        elif not (isinstance(return_std, str) and return_std == "latent"):
            raise InvalidParameterError(f"return_std must be False, True or 'latent', got {return_std!r}")
        if return_std is False:
            return self._decision(X, squeeze=squeeze)
        model = posterior_model(self, return_std is True)  # refuses a model without the posterior
        _refuse_sparse(X)
        Xv = check_input(frame_to_predict(self, X), name="X")
        check_n_features(Xv.shape, self.n_features_in_, estimator=self)
        mean, std = predict_mean_std(model, Xv)
        return (mean[:, 0], std[:, 0]) if squeeze else (mean, std)

    def score(self, X, y, sample_weight=None):
        """R^2 of the predictions (averaged uniformly over targets, as scikit-learn)."""
        from sklearn.metrics import r2_score

        y = score_target(y, self)
        pred = self.predict(X)
        if is_dask(pred):
            pred = _materialize(pred)
        if y.shape[0] != pred.shape[0]:
            raise InputValidationError(f"X has {pred.shape[0]} rows but y has {y.shape[0]}")
        return float(r2_score(y, pred, sample_weight=sample_weight))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags

