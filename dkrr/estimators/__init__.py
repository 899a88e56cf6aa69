"""scikit-learn compatible estimators."""

from ._random_features import RandomFeatures

__all__ = ["RandomFeatures"]
