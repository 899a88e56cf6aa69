"""The contract every random projection implements.

A *projection* is the linear part ``x -> W x`` of a random feature map, with ``W`` of
shape ``(n_components, n_features_in)``. Implementations store only the random numbers
their construction needs (O(D) for the structured families) and apply ``W`` with fast
transforms; :meth:`Projection.matrix` forms ``W`` explicitly and independently of the
fast path, so tests can compare the two.

Projections are plain dataclasses of numbers and numpy arrays: :meth:`get_state` and
:meth:`from_state` round-trip them without pickle, which is what model files store. The
methods by name are listed in :mod:`dkrr.features._registry`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np

from .._params import check_options
from ..errors import InvalidParameterError

__all__ = ["Projection", "next_power_of_two"]


def next_power_of_two(n: int) -> int:
    """Smallest power of two >= ``n`` (``n >= 1``)."""
    return 1 << (int(n) - 1).bit_length()


@dataclasses.dataclass(eq=False)
class Projection:
    """Base class of the linear part of a random feature map.

    Subclasses are dataclasses whose fields are ints, floats, strings or numpy arrays.

    Attributes
    ----------
    n_features_in : int
        Input dimension d.
    n_components : int
        Number of random projections D (rows of W).
    scale : float
        Multiplier applied to every row of W (``1 / sigma`` for the Gaussian kernel).
    """

    #: the ``method`` parameter of :class:`dkrr.RandomFeatures` that selects this class
    method: ClassVar[str] = ""
    #: construction options this method accepts, with their defaults
    options: ClassVar[dict[str, Any]] = {}
    #: laws of the unit draw this method can make (``dkrr.features._spectral``):
    #: ``"gaussian"`` rows N(0, I) (all), ``"cauchy"`` rows of i.i.d. standard Cauchy entries
    laws: ClassVar[tuple[str, ...]] = ("gaussian",)

    n_features_in: int
    n_components: int
    scale: float

    # -- construction -------------------------------------------------------------
    @classmethod
    def generate(
        cls,
        n_features_in: int,
        n_components: int,
        scale: float,
        rng: np.random.Generator,
        *,
        law: str = "gaussian",
        **options: Any,
    ) -> "Projection":
        """Draw a new projection from ``rng``.

        ``options`` are construction options of this method (:attr:`options`); one the
        method does not take is an :class:`~dkrr.errors.InvalidParameterError`, and the
        ones not given take their defaults. ``law`` is the law of the unit draw, one of
        :attr:`laws` (a law other than ``"gaussian"`` is passed to :meth:`_draw` as
        ``law``). Subclasses implement :meth:`_draw`.
        """
        opts = check_options(cls.method, cls.options, options)
        if law not in cls.laws:
            raise InvalidParameterError(f"method {cls.method!r} draws only {list(cls.laws)} rows, not {law!r}")
        if law != "gaussian":
            opts["law"] = law
        return cls._draw(int(n_features_in), int(n_components), float(scale), rng, **opts)

    @classmethod
    def _draw(cls, n_features_in: int, n_components: int, scale: float, rng: np.random.Generator,
              **options: Any) -> "Projection":
        """The draw itself, with every option of :attr:`options` given."""
        raise NotImplementedError

    @property
    def is_complex(self) -> bool:
        """Whether ``W`` is complex: then :meth:`project` returns ``2 * n_components``
        real columns ``[Re(X W^T), Im(X W^T)]`` (complex ROMs only)."""
        return False

    # -- application --------------------------------------------------------------
    def project(self, X: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Return ``X @ W.T`` with the fast path, in the dtype of ``X``.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features_in), float32 or float64
            Already validated (finite, C-contiguous, floating).
        out : ndarray, optional
            A C-contiguous buffer of the result's shape and dtype that a projection computed
            by one GEMM writes into (a reused buffer spares the allocation per sub-block);
            other paths may ignore it. Use the returned array.

        Returns
        -------
        ndarray of shape (n_samples, n_components), same dtype as ``X``.
        """
        raise NotImplementedError

    def matrix(self) -> np.ndarray:
        """Dense ``W`` of shape ``(n_components, n_features_in)`` in float64.

        Built explicitly from dense matrices (``scipy.linalg.hadamard``, ``circulant``,
        ``toeplitz``, ...), independently of :meth:`project`, for verification.
        """
        raise NotImplementedError

    # -- plain-data state ------------------------------------------------------------
    def get_state(self) -> dict[str, Any]:
        """Fields as a dict of ints/floats/strings/ndarrays (no pickle needed)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "Projection":
        """Inverse of :meth:`get_state`."""
        names = {f.name for f in dataclasses.fields(cls)}
        missing = names - set(state)
        extra = set(state) - names
        if missing or extra:
            raise InvalidParameterError(
                f"state for projection {cls.method!r} has missing fields {sorted(missing)} "
                f"and unexpected fields {sorted(extra)}"
            )
        return cls(**state)

    def __reduce__(self):
        """Pickle the dataclass fields only ("ship seeds, not matrices").

        Transforms cache derived arrays on the instance (a dense ``W``, dtype casts,
        spectra); they are rebuilt on first use after unpickling, so a projection embedded
        in a dask graph travels as its O(D) stored numbers. The dask token of a projection
        is likewise its fields (dask tokenizes dataclasses by their fields).
        """
        return (_rebuild, (type(self), {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}))

    @property
    def storage_size(self) -> int:
        """Number of stored numbers (O(D) for structured maps, D*d for dense ones)."""
        return int(
            sum(np.size(v) for v in self.get_state().values() if isinstance(v, np.ndarray))
        )


def _rebuild(cls: type[Projection], fields: dict[str, Any]) -> Projection:
    """Unpickle a :class:`Projection` from its fields (see :meth:`Projection.__reduce__`)."""
    return cls(**fields)
