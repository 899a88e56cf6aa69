"""scikit-learn compatible transformer of random features: :class:`RandomFeatures`."""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from .._validation import check_input, check_n_features, check_random_state
from ..errors import InvalidParameterError
from ..features._base import PROJECTIONS
from ..features._blockwise import transform_array
from ..features._map import FeatureMap, RandomFeatureMap
from ..features._nonlinear import KERNELS
from ..features._nystroem import fit_nystroem_map
from ..linalg._memory import check_feature_map_budget
from .. import sampling as _sampling  # noqa: F401  (registers the sampled map type for model files)

__all__ = ["RandomFeatures", "build_feature_map", "build_random_feature_map", "MAP_OPTION_NAMES", "DATA_DEPENDENT_METHODS"]

#: methods whose map is fitted from the data (their landmarks are training rows)
DATA_DEPENDENT_METHODS = ("nystroem",)

#: construction options of the projection families, as estimator parameters
MAP_OPTION_NAMES = ("n_hd_blocks", "row_norms", "displacement_rank", "skew_nonzeros", "sequence")


def _check_positive_int(value, name):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise InvalidParameterError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def build_random_feature_map(
    *,
    kernel: str,
    method: str,
    n_components: int,
    gamma: float,
    n_features_in: int,
    random_state,
    options: dict,
) -> RandomFeatureMap:
    """Validate parameters and draw a data-independent :class:`RandomFeatureMap`.

    ``options`` maps option names (``n_hd_blocks``, ``row_norms``, ``displacement_rank``,
    ``sequence``) to values or ``None`` (not given). An option given for a method that
    does not take it is an error rather than silently ignored.
    """
    if kernel not in KERNELS:
        raise InvalidParameterError(f"kernel must be one of {list(KERNELS)}, got {kernel!r}")
    if method not in PROJECTIONS:
        raise InvalidParameterError(
            f"method must be one of {sorted(PROJECTIONS)}, got {method!r}"
        )
    n_components = _check_positive_int(n_components, "n_components")
    if kernel == "gaussian":
        if isinstance(gamma, bool) or not isinstance(gamma, numbers.Real) or not np.isfinite(gamma) or gamma <= 0:
            raise InvalidParameterError(f"gamma must be a positive finite number, got {gamma!r}")
        scale = float(np.sqrt(2.0 * gamma))  # rows of W ~ N(0, I / sigma^2), gamma = 1/(2 sigma^2)
    else:
        if gamma != 1.0:
            raise InvalidParameterError(
                f"gamma applies only to kernel='gaussian'; kernel={kernel!r} is scale "
                f"invariant in W, so leave gamma at its default (got {gamma!r})"
            )
        scale = 1.0
    cls = PROJECTIONS[method]
    given = {k: v for k, v in options.items() if v is not None}
    for name in given:
        if name not in cls.options:
            takers = sorted(m for m, c in PROJECTIONS.items() if name in c.options)
            raise InvalidParameterError(
                f"option {name}={given[name]!r} does not apply to method={method!r}; it is "
                f"used by method(s) {takers}"
            )
    opts = {**cls.options, **given}
    rng = check_random_state(random_state)
    proj = cls.generate(n_features_in, n_components, scale, rng, **opts)
    return RandomFeatureMap(kernel, proj)


def build_feature_map(
    X,
    *,
    kernel: str,
    method: str,
    n_components: int,
    gamma: float,
    random_state,
    options: dict,
) -> FeatureMap:
    """Validate parameters and build the feature map of ``method`` for inputs like ``X``.

    Data-independent methods (every projection construction) call
    :func:`build_random_feature_map` and read only ``X.shape[1]``. ``method="nystroem"``
    samples ``n_components`` landmark rows of ``X`` (a validated numpy array or row-chunked
    dask array; for dask only those rows are computed) with the generator of
    ``random_state`` and returns a :class:`~dkrr.features._nystroem.NystroemMap`.

    Raises
    ------
    InvalidParameterError
        Unknown kernel or method, bad ``n_components``/``gamma``, an option that does not
        apply to ``method``.
    """
    if method == "nystroem":
        if kernel not in KERNELS:
            raise InvalidParameterError(f"kernel must be one of {list(KERNELS)}, got {kernel!r}")
        n_components = _check_positive_int(n_components, "n_components")
        given = {k: v for k, v in options.items() if v is not None}
        if given:
            raise InvalidParameterError(
                f"option(s) {sorted(given)} do not apply to method='nystroem' (they configure "
                "random projections; Nystroem uses landmark rows of X)"
            )
        if kernel == "gaussian":
            if isinstance(gamma, bool) or not isinstance(gamma, numbers.Real) or not np.isfinite(gamma) or gamma <= 0:
                raise InvalidParameterError(f"gamma must be a positive finite number, got {gamma!r}")
        elif gamma != 1.0:
            raise InvalidParameterError(
                f"gamma applies only to kernel='gaussian'; leave it at its default for kernel={kernel!r} "
                f"(got {gamma!r})"
            )
        return fit_nystroem_map(
            X, kernel=kernel, n_components=n_components, gamma=float(gamma),
            rng=check_random_state(random_state),
        )
    return build_random_feature_map(
        kernel=kernel, method=method, n_components=n_components, gamma=gamma,
        n_features_in=X.shape[1], random_state=random_state, options=options,
    )


class RandomFeatures(TransformerMixin, BaseEstimator):
    """Random feature map approximating a kernel, applied blockwise to numpy or dask data.

    ``transform(X)`` returns ``Z = phi(X)`` such that ``Z @ Z.T`` estimates the kernel
    matrix. Structured methods store only O(D) random numbers and apply fast transforms.

    Parameters
    ----------
    kernel : {"gaussian", "angular", "arccos0", "arccos1"}, default="gaussian"
        Kernel to approximate (ALGORITHMS.md section 1). ``gaussian`` outputs
        ``[cos(X W^T), sin(X W^T)] / sqrt(D)`` (cos block first).
    method : str, default="sorf"
        Construction of W: ``"rff"``, ``"orf"``, ``"sorf"``, ``"fastfood"``,
        ``"circulant"``, ``"skew_circulant"``, ``"toeplitz"``, ``"hankel"``,
        ``"toeplitz_like"``, ``"qmc"``; or ``"nystroem"``: data-dependent Nyström
        features ``k(x, C) K_CC^(-1/2)`` with ``n_components`` landmarks C sampled
        uniformly from the rows of X at fit (then the output width is ``n_components``
        for every kernel, and there is no W).
    n_components : int, default=256
        D, the number of random frequencies (rows of W), as in the papers. The output
        width is ``n_output_features_``: ``2 * D`` for the gaussian kernel, ``D``
        otherwise. (scikit-learn's ``RBFSampler`` counts output columns instead.)
    gamma : float, default=1.0
        Gaussian kernel ``k(x, y) = exp(-gamma ||x - y||^2)`` as in scikit-learn. Only for
        ``kernel="gaussian"``.
    random_state : int, numpy Generator or None, default=None
        Determines every random draw of the map.
    n_hd_blocks : int, optional
        SORF only: number of ``H D`` factors (default 3).
    row_norms : {"chi", "fixed"}, optional
        ORF/SORF only: chi(d) row norms or fixed ``sqrt(d)`` (defaults: ORF chi, SORF fixed).
    displacement_rank : int, optional
        ``toeplitz_like`` only: displacement rank r (default 1).
    skew_nonzeros : int, optional
        ``toeplitz_like`` only: non-zeros of each skew-circulant generator h_i (the
        paper's sparse variant). Default: dense h_i, whose features are slightly biased
        at small d (a scale mixture, excess kurtosis O(1/(r d'))); ``1`` is exactly
        unbiased.
    sequence : {"halton", "sobol"}, optional
        ``qmc`` only: low-discrepancy sequence (default halton).

    Attributes
    ----------
    n_features_in_ : int
    n_output_features_ : int
        Output width p.
    feature_map_ : RandomFeatureMap
        The fitted map (small; what workers receive).

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
        method="sorf",
        n_components=256,
        gamma=1.0,
        random_state=None,
        *,
        n_hd_blocks=None,
        row_norms=None,
        displacement_rank=None,
        skew_nonzeros=None,
        sequence=None,
    ):
        self.kernel = kernel
        self.method = method
        self.n_components = n_components
        self.gamma = gamma
        self.random_state = random_state
        self.n_hd_blocks = n_hd_blocks
        self.row_norms = row_norms
        self.displacement_rank = displacement_rank
        self.skew_nonzeros = skew_nonzeros
        self.sequence = sequence

    def _map_options(self) -> dict:
        return {name: getattr(self, name) for name in MAP_OPTION_NAMES}

    def fit(self, X, y=None):
        """Draw the random map for inputs with ``X.shape[1]`` columns.

        For the random projection methods the data values are not read and dask input is
        not computed. ``method="nystroem"`` samples its landmarks from the rows of X (for
        dask input only those rows are computed).
        """
        X = check_input(X, check_finite=False)
        check_feature_map_budget(  # before the map is allocated
            self.method, X.shape[1], self.n_components, n_rows=X.shape[0], displacement_rank=self.displacement_rank
        )
        self.feature_map_ = build_feature_map(
            X,
            kernel=self.kernel,
            method=self.method,
            n_components=self.n_components,
            gamma=self.gamma,
            random_state=self.random_state,
            options=self._map_options(),
        )
        self.n_features_in_ = X.shape[1]
        self.n_output_features_ = self.feature_map_.n_output_features
        return self

    def transform(self, X):
        """Features ``Z`` of X: a numpy array, or a lazy dask array for dask/zarr input.

        float32 input gives float32 output; float64 gives float64; integers become float64.
        """
        check_is_fitted(self, "feature_map_")
        X = check_input(X)
        check_n_features(X.shape, self.n_features_in_)
        return transform_array(self.feature_map_, X)

    def projection_matrix(self) -> np.ndarray:
        """Dense ``W`` (n_components, n_features_in_) float64: features are ``f(X @ W.T)``.

        For P-model maps W includes the densifying pre-multiplication. Formed explicitly
        (for checks and small problems); the transform never uses it.
        """
        check_is_fitted(self, "feature_map_")
        if not isinstance(self.feature_map_, RandomFeatureMap):
            raise InvalidParameterError(
                f"method={self.method!r} has no projection matrix W: its features are "
                "k(x, C) K_CC^(-1/2) for landmark rows C (see feature_map_.landmarks and "
                "feature_map_.normalizer)."
            )
        return self.feature_map_.projection.matrix()

    def get_feature_names_out(self, input_features=None):
        check_is_fitted(self, "feature_map_")
        return np.asarray([f"randomfeatures{i}" for i in range(self.n_output_features_)], dtype=object)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags
