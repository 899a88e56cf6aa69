"""scikit-learn compatible estimators."""

from ._ard import ard_gamma
from ._classifier import RandomFeatureRidgeClassifier
from ._random_features import RandomFeatures
from ._ridge import RandomFeatureRidge

__all__ = ["MODEL_CLASSES", "RandomFeatureRidge", "RandomFeatureRidgeClassifier", "RandomFeatures", "ard_gamma"]

#: the estimator classes a model file may name (a whitelist: nothing else loads)
MODEL_CLASSES: dict[str, type] = {
    cls.__name__: cls for cls in (RandomFeatures, RandomFeatureRidge, RandomFeatureRidgeClassifier)
}
