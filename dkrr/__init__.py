"""dkrr: kernel ridge regression at scale on Dask with random feature maps."""

from . import features as _features  # noqa: F401  (registers the projection methods)
from .errors import DkrrError
from .estimators import RandomFeatures

__version__ = "0.1.0"

__all__ = ["DkrrError", "RandomFeatures", "__version__"]
