"""Random feature maps: projections (the linear part) and kernel nonlinearities."""

from ._base import PROJECTIONS, Projection, next_power_of_two, register_projection
from ._nonlinear import KERNELS, exact_kernel
from . import _rff  # noqa: F401  (registers "rff")
from . import _orthogonal, _fastfood  # noqa: F401  (registers "orf", "sorf", "fastfood")
from . import _structured, _qmc  # noqa: F401  (registers "circulant", "skew_circulant", "toeplitz", "hankel", "toeplitz_like", "qmc")

__all__ = ["KERNELS", "PROJECTIONS", "Projection", "exact_kernel", "next_power_of_two", "register_projection"]
