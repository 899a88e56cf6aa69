"""scikit-learn compatible estimators."""

from ._classifier import RandomFeatureRidgeClassifier
from ._random_features import RandomFeatures
from ._ridge import RandomFeatureRidge

__all__ = ["RandomFeatureRidge", "RandomFeatureRidgeClassifier", "RandomFeatures"]


def _classes_for_model_files() -> dict[str, type]:
    """Estimator classes that model files may name (a whitelist: nothing else loads)."""
    from . import _random_features

    classes = {"RandomFeatures": _random_features.RandomFeatures}
    try:
        from . import _classifier, _ridge
    except ImportError:  # pragma: no cover - while the ridge estimators are absent
        return classes
    classes["RandomFeatureRidge"] = _ridge.RandomFeatureRidge
    classes["RandomFeatureRidgeClassifier"] = _classifier.RandomFeatureRidgeClassifier
    return classes
