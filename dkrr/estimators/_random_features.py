"""scikit-learn compatible transformer of random features: :class:`RandomFeatures`."""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from ..features._nonlinear import check_kernel
from ..features._registry import resolve_method
from .._params import KERNEL_PARAMS, check_bool, check_gamma, check_kernel_params
from .._validation import check_input, check_n_features, check_random_state, is_dask
from ..errors import InputValidationError, InvalidParameterError
from ..features import MAP_OPTION_NAMES, FeatureMap, RandomFeatureMap, build_feature_map
from ..features._blockwise import transform_array
from ..features._standardize import StandardizedMap, standardize_block
from ..linalg._memory import check_feature_map_budget
from ._fitted import replace_fitted_state
from ._inputs import frame_inputs, frame_to_predict, names_state

__all__ = ["GAMMA_RULES", "RandomFeatures", "check_gamma_param", "draw_feature_map", "draw_ridge_map", "fit_input_map",
           "kernel_params_of", "standardized_input"]

#: the data-driven values of ``gamma`` (docs/ALGORITHMS.md section 5) and the kernels each
#: applies to: the 50-NN rule gives a length scale (gaussian, matern); ``"scale"`` is
#: SVC's ``1 / (d Var X)`` (also for the polynomial kernel, as SVC), ``1 / (d std X)`` for
#: the laplacian (its exponent is linear in the distance)
GAMMA_RULES = {"median": ("gaussian", "matern"), "scale": ("gaussian", "matern", "laplacian", "polynomial")}


def check_gamma_param(gamma, kernel):
    """``gamma``: a positive number, one per column (ARD) for the shift-invariant kernels,
    or a rule of :data:`GAMMA_RULES` for the kernels it applies to (an unknown ``kernel`` is
    refused first, as such: gamma's message would call it a kernel without a width)."""
    check_kernel(kernel)
    if isinstance(gamma, str):
        if gamma not in GAMMA_RULES:
            raise InvalidParameterError(
                f"gamma={gamma!r} is neither a positive number nor one of {list(GAMMA_RULES)} "
                "(the 50-NN median rule, or scikit-learn SVC's 1 / (d Var X))"
            )
        if kernel not in GAMMA_RULES[gamma]:
            raise InvalidParameterError(
                f"gamma={gamma!r} chooses the width of the kernels {list(GAMMA_RULES[gamma])}; kernel={kernel!r} "
                + ("has no width, so leave gamma at its default 1.0" if kernel not in GAMMA_RULES["scale"] else
                   "takes a number, one per column, or gamma='scale'")
            )
        return gamma
    return check_gamma(gamma, kernel)


def kernel_params_of(est) -> dict:
    """The kernel parameters of an estimator (``nu``, ``degree``, ``coef0``), checked against
    its kernel, defaults filled in: only its kernel's."""
    return check_kernel_params(est.kernel, **{name: getattr(est, name) for name in KERNEL_PARAMS})


def standardized_input(est, X, sample_weight=None):
    """One streamed pass for what ``standardize`` and ``gamma="scale"`` need.

    Returns ``(X_used, mean, scale, moments)``: X standardised lazily (dask) or now
    (numpy) with ``mean``/``scale`` when ``est.standardize``, else X itself and None;
    ``moments`` (:class:`~dkrr.linalg._moments.ColumnMoments`) or None when neither
    option needs them. No pass runs for ``standardize=False`` with a numeric gamma.
    ``sample_weight`` (the checked dask weights of a ridge fit, or None): the moments are
    weighted, as ``StandardScaler().fit(X, sample_weight=w)``'s (docs/ALGORITHMS.md
    section 5).
    """
    from ..linalg._moments import column_moments
    from ..linalg._blocks import as_row_chunked

    standardize = check_bool(est.standardize, "standardize")
    if not standardize and not (isinstance(est.gamma, str) and est.gamma == "scale"):
        return X, None, None, None
    Xd = X if is_dask(X) else as_row_chunked(X)[0]
    moments = column_moments(Xd, split_every=getattr(est, "split_every", None), sample_weight=sample_weight)
    if not standardize:
        return X, None, None, moments
    mean, scale = moments.mean, moments.scale()
    if not is_dask(X):
        return standardize_block(X, mean, scale), mean, scale, moments
    from dask.base import tokenize

    from .._rows import map_rows

    Xs = map_rows(X, standardize_block, mean, scale, dtype=np.float64,
                  name=f"dkrr-standardize-{tokenize(standardize_block, X.name, mean, scale)}")
    return Xs, mean, scale, moments


def fit_input_map(est, X, rng, *, n_components=None, moments=None, scale=None, after_draw=None,
                  resolve=True, sample_weight=None):
    """Draw the map of ``est`` on (standardised) ``X`` and resolve a data-driven gamma.

    The map is drawn first (with ``gamma=1.0`` when gamma is a rule: the gaussian maps
    of every width share their draw, ``W = sqrt(2 gamma) W_unit``), then ``after_draw(rng)``
    runs (the ridge estimators draw their fold seed there), then, for ``gamma="median"``,
    the seed of the bandwidth's row sample is the next draw ``rng.integers(0, 2**63 - 1)``
    and ``gamma = knn_gamma(X, k=min(50, n - 1), random_state=seed)`` (1.0 for one row); for ``gamma="scale"`` it is
    ``1 / (d Var)`` from ``moments`` (of the standardised X when ``scale`` is given). A
    numeric gamma draws nothing more than before. Returns ``(map, gamma, extra)`` with
    ``extra`` what ``after_draw`` returned. ``sample_weight`` (checked weights, or None):
    the rows drawn (Nyström landmarks, the bandwidth sample) are drawn among those of
    positive weight, ``n`` counts those rows, and the 50-NN rule's mean is weighted
    (:func:`~dkrr.linalg._bandwidth.knn_sigma`); the moments are the weighted ones of
    :func:`standardized_input`.
    """
    from .._rows import row_pool
    from ..linalg._stats import _check_weight_block

    rule = est.gamma if isinstance(est.gamma, str) else None
    # one pool for every draw: a dask array's positive weights are counted once
    pool = row_pool(int(X.shape[0]), sample_weight, _check_weight_block)
    fmap = draw_feature_map(est, X, rng, n_components=n_components, gamma=1.0 if rule else None,
                            sample_weight=pool)
    extra = after_draw(rng) if after_draw is not None else None
    if rule is None:
        return fmap, check_gamma(est.gamma, est.kernel), extra
    if not resolve:  # a gamma grid replaces the width
        return fmap, None, extra
    if rule == "median":
        from ..linalg._bandwidth import knn_gamma
        from ..linalg._weighted import ZERO_WEIGHT_MESSAGE

        seed, n = int(rng.integers(0, 2**63 - 1)), pool.n
        if n == 0:
            raise InputValidationError(ZERO_WEIGHT_MESSAGE)
        # fewer than 51 rows: the nearest neighbour there is (one row has no distance at all)
        gamma = knn_gamma(X, k=min(50, n - 1), random_state=seed, sample_weight=pool) if n > 1 else 1.0
    else:
        var = moments.total_variance(scale)
        spread = np.sqrt(var) if est.kernel == "laplacian" else var  # the exponent's power of the distance
        gamma = 1.0 / (X.shape[1] * spread) if var > 0 else 1.0
    return fmap.with_gamma(gamma), float(gamma), extra


def draw_ridge_map(est, X, moments=None, scale=None, resolve=True, sample_weight=None):
    """A ridge estimator's draws from its one generator, in this order: the feature map
    (the ``n_candidates`` candidates with ``sampling``), the fold seed, then (``gamma=
    "median"``) the bandwidth sample's seed. Returns ``(map, gamma, fold_seed, rng)``;
    ``rng`` goes on to the resampling of ``sampling``. ``sample_weight``: as
    :func:`fit_input_map`'s."""
    rng = check_random_state(est.random_state)
    sampling, n_cand = _checked_sampling(est)
    fmap, gamma, fold_seed = fit_input_map(
        est, X, rng, n_components=n_cand or est.n_components, moments=moments, scale=scale,
        after_draw=lambda r: int(r.integers(0, 2**63 - 1)), resolve=resolve, sample_weight=sample_weight,
    )
    return fmap, gamma, fold_seed, rng


def _checked_sampling(est):
    """``(sampling, n_candidates)`` of a ridge estimator, checked."""
    from ..sampling import check_sampling

    sampling, n_cand = check_sampling(est.sampling, est.n_candidates, est.n_components)
    if sampling is not None and (est.method == "nystroem" or est.kernel == "polynomial"):
        what = "method='nystroem'" if est.method == "nystroem" else "the polynomial kernel's sketches"
        raise InvalidParameterError(f"sampling resamples random frequencies; it does not apply to {what}")
    return sampling, n_cand


def check_ridge_map(est, n_features_in: int) -> None:
    """The map and sampling parameters of a ridge estimator, checked before any pass over
    X (a bad method, n_components or sampling was refused only after the column moments'
    or the bandwidth's pass; :func:`draw_ridge_map` draws with them later). A width rule
    (``gamma="median"``) is checked where it is resolved."""
    from ..features._registry import check_map_params

    _checked_sampling(est)
    check_map_params(est.kernel, est.method, est.n_components, 1.0 if isinstance(est.gamma, str) else est.gamma,
                     {name: getattr(est, name) for name in MAP_OPTION_NAMES}, n_features_in,
                     {name: getattr(est, name) for name in KERNEL_PARAMS})


def draw_feature_map(est, X, random_state, n_components: int | None = None, gamma=None,
                     sample_weight=None) -> FeatureMap:
    """The feature map of an estimator's map parameters for inputs like ``X``.

    ``est`` is :class:`RandomFeatures` or a ridge estimator: anything with the parameters
    ``kernel``, ``method``, ``n_components``, ``gamma``, the kernel parameters ``nu``,
    ``degree``, ``coef0`` and the options of :data:`~dkrr.features.MAP_OPTION_NAMES`. ``random_state`` (a seed or a Generator that
    is advanced) and ``n_components`` (default ``est.n_components``; leverage sampling
    draws its ``n_candidates`` candidates) are given by the caller. Both estimators draw
    their map here, so the same parameters and seed give the same map. ``gamma`` (default
    ``est.gamma``) overrides the width. ``sample_weight``: Nyström's landmarks are drawn
    among the rows of positive weight (:func:`~dkrr.features.build_feature_map`).
    """
    return build_feature_map(
        X,
        kernel=est.kernel,
        method=est.method,
        n_components=est.n_components if n_components is None else n_components,
        gamma=est.gamma if gamma is None else gamma,
        random_state=random_state,
        options={name: getattr(est, name) for name in MAP_OPTION_NAMES},
        kernel_params={name: getattr(est, name) for name in KERNEL_PARAMS},
        sample_weight=sample_weight,
    )


class RandomFeatures(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Random feature map approximating a kernel, applied blockwise to numpy or dask data.

    ``transform(X)`` returns ``Z = phi(X)`` such that ``Z @ Z.T`` estimates the kernel
    matrix. Structured methods store only O(D) random numbers and apply fast transforms.

    Parameters
    ----------
    kernel : {"gaussian", "matern", "laplacian", "polynomial", "angular", "arccos0", "arccos1", "linear"}, default="gaussian"
        Kernel to approximate (ALGORITHMS.md section 1). The shift-invariant ``gaussian``
        (``exp(-gamma ||x - y||^2)``), ``matern`` (scikit-learn's ``Matern(length_scale=1 /
        sqrt(2 gamma), nu)``) and ``laplacian`` (``exp(-gamma ||x - y||_1)``,
        ``sklearn.metrics.pairwise.laplacian_kernel``) output ``[cos(X W^T), sin(X W^T)] /
        sqrt(D)`` (cos block first) with rows of W from the kernel's spectral law
        (Gaussian, Student t with ``2 nu`` degrees of freedom, i.i.d. Cauchy);
        ``polynomial`` is ``(gamma x^T y + coef0)^degree`` (``polynomial_kernel``), sketched
        by ``method="tensorsketch"`` or ``"tensor_srht"``; ``linear`` (the dot
        product ``x^T y``) outputs ``X W^T / sqrt(D)``, a random projection (JLT) with
        ``Z Z^T`` unbiased for ``X X^T``.
    method : str, default="auto"
        ``"auto"`` is ``"orf"`` when the padded width ``d'`` (the next power of two of
        ``n_features_in_``) is at most 128 — there SORF multiplies by a dense W as well,
        so ORF costs the same and approximates the kernel better (SORF's MSE is 2x ORF's at
        d' = 16 and up to 100x at d' = 2) — and ``"sorf"`` above (O(D) state, FWHT
        transforms); ``"rff"`` for the laplacian kernel, ``"tensor_srht"`` for the
        polynomial. ``feature_map_.projection.method`` names the choice.
        Construction of W: ``"rff"``, ``"orf"``, ``"sorf"``, ``"rom"``, ``"fastfood"``,
        ``"circulant"``, ``"skew_circulant"``, ``"toeplitz"``, ``"hankel"``,
        ``"toeplitz_like"``, ``"qmc"`` (the laplacian kernel: ``"rff"``, ``"qmc"`` and the
        circulant, skew-circulant, Toeplitz and Hankel blocks, whose rows keep i.i.d.
        Cauchy entries); the polynomial sketches ``"tensorsketch"`` (Pham & Pagh) and
        ``"tensor_srht"`` (products of randomised Hadamard rows; lower error at equal
        width); or ``"nystroem"`` (every kernel): data-dependent Nyström
        features ``k(x, C) K_CC^(-1/2)`` with ``n_components`` landmarks C sampled
        uniformly from the rows of X at fit (then the output width is ``n_components``
        for every kernel, and there is no W).
    n_components : int, default=256
        D, the number of random frequencies (rows of W), as in the papers. The output
        width is ``n_output_features_``: ``2 * D`` for the shift-invariant kernels and for a
        complex ROM (``[Re, Im]`` columns), ``D`` otherwise. (scikit-learn's ``RBFSampler`` counts output columns instead.)
    gamma : float, array of shape (n_features,), "median" or "scale", default=1.0
        The kernel's width, as scikit-learn's ``gamma`` (``Matern``'s length scale is ``1 /
        sqrt(2 gamma)``, so a gamma means the same distance scale for the gaussian and the
        Matern kernels). Only for the gaussian, matern, laplacian and polynomial kernels. An
        array (shift-invariant kernels): one value per input column (ARD), ``k`` the
        unit-width kernel of the columns scaled by ``sqrt(2 gamma_j)`` (laplacian:
        ``gamma_j``), i.e. ``exp(-sum_j gamma_j (x_j - y_j)^2)`` for the gaussian and
        scikit-learn's ``Matern(length_scale=1 / sqrt(2 gamma))`` with an array length scale.
        ``"median"`` (gaussian, matern): the 50-NN rule of docs/ALGORITHMS.md section
        5, ``1 / (2 sigma^2)`` with sigma the mean distance to the 50th nearest neighbour
        within a seeded sample of 1,000 rows (:func:`dkrr.bandwidth.knn_gamma`; the
        sample's seed is the generator's next draw after the map; with fewer than 51
        rows the ``n - 1``-th neighbour). ``"scale"``:
        scikit-learn SVC's ``1 / (d Var(X))`` (variance over every entry, from the
        column moments; the laplacian: ``1 / (d sqrt(Var X))``). Both are computed on the
        standardised X with ``standardize``; the value used is ``gamma_``.
    random_state : int, numpy Generator, SeedSequence, RandomState or None, default=None
        Determines every random draw of the map (a RandomState by one draw of it).
    nu : float, optional
        ``matern`` only: the smoothness (default 1.5, as scikit-learn's ``Matern``; 0.5 is
        the exponential kernel ``exp(-sqrt(2 gamma) ||x - y||)``; any positive value).
    degree : int, optional
        ``polynomial`` only: the degree (default 3, as ``polynomial_kernel``).
    coef0 : float, optional
        ``polynomial`` only: the constant term, ``>= 0`` (default 1, as
        ``polynomial_kernel``).
    n_hd_blocks : int, optional
        SORF and ROM only: number of ``H D`` factors (default 3).
    row_norms : {"chi", "fixed"}, optional
        ORF/SORF only: chi(d) row norms or fixed ``sqrt(d)`` (defaults: ORF chi, SORF fixed).
    displacement_rank : int, optional
        ``toeplitz_like`` only: displacement rank r (default 1).
    skew_nonzeros : int, optional
        ``toeplitz_like`` only: non-zeros of each skew-circulant generator h_i (the
        paper's sparse variant). Default: dense h_i, whose gaussian-kernel estimate is
        biased upwards by about ``exp(-a) a^2 (d'-2) / (r d' (d'+2))``, ``a = gamma
        ||x-y||^2`` (at most 0.041 / r at d' = 8, 0.008 / r at d' = 64; derivation in
        docs/ALGORITHMS.md section 2.5); ``1`` is exactly unbiased.
    sequence : {"halton", "sobol"}, optional
        ``qmc`` only: low-discrepancy sequence (default halton).
    rom_diagonal : {"rademacher", "complex4", "unit_circle"}, optional
        ``rom`` only: law of the diagonals of ``W = sqrt(d') prod H_n D_i`` (default
        rademacher, which is SORF with fixed row norms). The complex laws need
        ``kernel="linear"``; their output is ``[Re, Im]`` of width ``2 D``.
    row_sampling : {"first", "with_replacement", "without_replacement"}, optional
        ``sorf`` and ``rom`` only: which rows of the last partial ``d' x d'`` block
        (all of W when ``D < d'``) are kept (default first).
    standardize : bool, default=False
        Centre and scale every column to unit variance before the map, with the column
        means and population standard deviations of the training X (one streamed pass,
        float64, Chan et al.'s pairwise merge of block moments). A constant column gets
        scale 1 (as scikit-learn's ``StandardScaler``). The fitted map applies
        ``(x - mean_) / scale_`` to every block it transforms. Off by default, as
        scikit-learn's estimators never scale implicitly (``dkrr fit`` turns it on).

    Attributes
    ----------
    n_features_in_ : int
    n_output_features_ : int
        Output width p.
    feature_map_ : FeatureMap
        The fitted map: a :class:`~dkrr.features.RandomFeatureMap` (a projection and the
        kernel nonlinearity), or a ``NystroemMap`` for ``method="nystroem"``. Small
        plain data; what workers receive. The ridge estimators hold their map under the
        same name and type. With ``standardize`` a ``StandardizedMap`` wrapping it.
    mean_, scale_ : ndarray of shape (n_features_in_,) or None
        The column means and scales of ``standardize`` (None without it).
    gamma_ : float or ndarray of shape (n_features_in_,)
        The width used: ``gamma`` itself (an array with ARD), or the value of its rule.

    Examples
    --------
    >>> import numpy as np
    >>> from dkrr import RandomFeatures
    >>> X = np.random.default_rng(0).standard_normal((5, 3))
    >>> rf = RandomFeatures(method="rff", n_components=4, random_state=0).fit(X)
    >>> rf.transform(X).shape
    (5, 8)
    """

    def __init__(
        self,
        kernel="gaussian",
        method="auto",
        n_components=256,
        gamma=1.0,
        random_state=None,
        *,
        nu=None,
        degree=None,
        coef0=None,
        n_hd_blocks=None,
        row_norms=None,
        displacement_rank=None,
        skew_nonzeros=None,
        sequence=None,
        rom_diagonal=None,
        row_sampling=None,
        standardize=False,
    ):
        self.kernel = kernel
        self.method = method
        self.n_components = n_components
        self.gamma = gamma
        self.random_state = random_state
        self.nu = nu
        self.degree = degree
        self.coef0 = coef0
        self.n_hd_blocks = n_hd_blocks
        self.row_norms = row_norms
        self.displacement_rank = displacement_rank
        self.skew_nonzeros = skew_nonzeros
        self.sequence = sequence
        self.rom_diagonal = rom_diagonal
        self.row_sampling = row_sampling
        self.standardize = standardize

    def fit(self, X, y=None):
        """Draw the random map for inputs with ``X.shape[1]`` columns.

        For the random projection methods dask input is not computed (its NaN/inf are
        found by ``transform``, block by block); in-memory X is checked for NaN/inf now.
        ``method="nystroem"`` samples its landmarks from the rows of X (for dask input
        only those rows are computed). ``standardize=True`` or ``gamma="scale"`` make one
        streamed pass over X (column moments); ``gamma="median"`` reads a seeded sample
        of at most 1,000 rows.
        """
        X, *_, names = frame_inputs(X)
        X = check_input(X)
        check_gamma_param(self.gamma, self.kernel)
        kernel_params_of(self)
        check_feature_map_budget(  # before the map is allocated
            resolve_method(self.method, X.shape[1], self.kernel), X.shape[1], self.n_components, n_rows=X.shape[0], displacement_rank=self.displacement_rank
        )
        Xs, mean, scale, moments = standardized_input(self, X)
        rng = check_random_state(self.random_state)
        fmap, gamma, _ = fit_input_map(self, Xs, rng, moments=moments, scale=scale)
        fmap = fmap if mean is None else StandardizedMap(fmap, mean, scale)
        replace_fitted_state(self, dict(  # all at once, after success (as the ridge estimators)
            gamma_=gamma, feature_map_=fmap, mean_=mean, scale_=scale, n_features_in_=X.shape[1],
            n_output_features_=fmap.n_output_features, **names_state(names)))
        return self

    def transform(self, X):
        """Features ``Z`` of X: a numpy array, or a lazy dask array for dask/zarr input.

        float32 input gives float32 output; float64 gives float64; integers become float64.
        """
        check_is_fitted(self, "feature_map_")
        X = check_input(frame_to_predict(self, X))
        check_n_features(X.shape, self.n_features_in_, estimator=self)
        return transform_array(self.feature_map_, X)

    def projection_matrix(self) -> np.ndarray:
        """Dense ``W`` (n_components, n_features_in_) float64: features are ``f(X @ W.T)``.

        For a complex ROM (``rom_diagonal`` complex) W is complex128 and the features
        are ``[X @ W.real.T, X @ W.imag.T] / sqrt(D)``.

        For P-model maps W includes the densifying pre-multiplication; for ``matern`` the
        radial factors, with an ARD ``gamma`` the column scales. The polynomial sketches
        return their ``degree`` matrices, shape ``(degree, n_components, n_features_in_ +
        1)``, acting on ``[X, 1]``: the features are the circular convolution
        (``tensorsketch``) or the product / ``sqrt(D)`` (``tensor_srht``) of the ``[X, 1]
        W_i^T``. Formed explicitly
        (for checks and small problems); the transform never uses it.
        """
        from ..features._polynomial import PolynomialSketchMap

        check_is_fitted(self, "feature_map_")
        fmap = self.feature_map_
        if isinstance(fmap, PolynomialSketchMap):
            return fmap.matrices()
        if not isinstance(fmap, RandomFeatureMap):
            raise InvalidParameterError(
                f"method={self.method!r} has no projection matrix W: its features are "
                "k(x, C) K_CC^(-1/2) for landmark rows C (see feature_map_.landmarks and "
                "feature_map_.normalizer)."
            )
        return fmap.matrix()

    @property
    def _n_features_out(self):
        """For scikit-learn's ``ClassNamePrefixFeaturesOutMixin``: ``get_feature_names_out``
        gives ``randomfeatures0..`` and checks ``input_features`` against the names and the
        number of columns seen in fit, as scikit-learn's transformers do (it ignored them)."""
        return self.n_output_features_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags
