"""scikit-learn compatible estimators."""

from ._classifier import RandomFeatureRidgeClassifier
from ._random_features import RandomFeatures
from ._ridge import RandomFeatureRidge

__all__ = ["RandomFeatureRidge", "RandomFeatureRidgeClassifier", "RandomFeatures"]


def _classes_for_model_files() -> dict[str, type]:
    """Estimator classes that model files may name (a whitelist: nothing else loads)."""
    return {cls.__name__: cls for cls in (RandomFeatures, RandomFeatureRidge, RandomFeatureRidgeClassifier)}
