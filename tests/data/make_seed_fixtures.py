"""Writes the fixtures of tests/test_seed_fixtures.py: seeded outputs and saved models.

Run once with the code *before* the estimator/transformer redesign (commit d7b94a6,
``feature_map_`` of the ridge estimators a nested ``RandomFeatures``, model format 2)::

    PYTHONPATH=<old checkout> python tests/data/make_seed_fixtures.py tests/data

The test then checks that today's code draws bitwise the same features and models from
the same ``random_state`` and still loads the models saved by that code.
"""

import sys
from pathlib import Path

import numpy as np

import dkrr
from dkrr import RandomFeatureRidge, RandomFeatureRidgeClassifier, RandomFeatures
from dkrr.io._model import save_model

#: name -> RandomFeatures parameters (gaussian gamma=0.3 unless given)
TRANSFORMS = {
    "rff": dict(method="rff"),
    "orf": dict(method="orf"),
    "orf_fixed": dict(method="orf", row_norms="fixed"),
    "sorf": dict(method="sorf"),
    "sorf_2blocks_chi": dict(method="sorf", n_hd_blocks=2, row_norms="chi"),
    "fastfood": dict(method="fastfood"),
    "circulant": dict(method="circulant"),
    "skew_circulant": dict(method="skew_circulant"),
    "toeplitz": dict(method="toeplitz"),
    "hankel": dict(method="hankel"),
    "toeplitz_like": dict(method="toeplitz_like"),
    "toeplitz_like_r2_s1": dict(method="toeplitz_like", displacement_rank=2, skew_nonzeros=1),
    "qmc": dict(method="qmc"),
    "qmc_sobol": dict(method="qmc", sequence="sobol"),
    "nystroem": dict(method="nystroem"),
    "sorf_arccos1": dict(method="sorf", kernel="arccos1", gamma=1.0),
    "nystroem_angular": dict(method="nystroem", kernel="angular", gamma=1.0),
}

MODELS = {
    "ridge_sorf_cv": (RandomFeatureRidge, dict(method="sorf", n_components=16, gamma=0.3, cv=3,
                                               alphas=[0.01, 0.1, 1.0], random_state=5)),
    "ridge_sampled": (RandomFeatureRidge, dict(method="rff", n_components=8, n_candidates=24, gamma=0.3,
                                               sampling="surrogate_leverage", random_state=2)),
    "ridge_nystroem": (RandomFeatureRidge, dict(method="nystroem", n_components=10, gamma=0.3, random_state=4)),
    "classifier_str": (RandomFeatureRidgeClassifier, dict(method="circulant", n_components=8, gamma=0.3,
                                                          random_state=1)),
}


def data():
    X = np.random.default_rng(0).standard_normal((40, 5))
    Xq = np.random.default_rng(1).standard_normal((6, 5))
    y = np.sin(X[:, 0]) + 0.1 * X[:, 1]
    labels = np.array(["a", "b", "c"])[np.argmax(X[:, :3], axis=1)]
    return X, Xq, y, labels


def main(out: Path) -> None:
    X, Xq, y, labels = data()
    arrays = {}
    for name, params in TRANSFORMS.items():
        params = {"gamma": 0.3, "n_components": 12, "random_state": 7, **params}
        rf = RandomFeatures(**params).fit(X)
        arrays[f"transform__{name}"] = rf.transform(Xq)
        arrays[f"transform32__{name}"] = rf.transform(Xq.astype(np.float32))
    for name, (cls, params) in MODELS.items():
        target = labels if cls is RandomFeatureRidgeClassifier else y
        est = cls(**params).fit(X, target)
        arrays[f"coef__{name}"] = np.asarray(est.coef_)
        arrays[f"intercept__{name}"] = np.asarray(est.intercept_)
        arrays[f"fold_seed__{name}"] = np.asarray(est.fold_seed_)
        arrays[f"features__{name}"] = est.feature_map_.transform(Xq)
        if cls is RandomFeatureRidgeClassifier:
            arrays[f"decision__{name}"] = est.decision_function(Xq)
            arrays[f"predict__{name}"] = est.predict(Xq).astype(str)
        else:
            arrays[f"predict__{name}"] = est.predict(Xq)
        save_model(est, out / "models_v2" / name, overwrite=True)
    rf = RandomFeatures(method="toeplitz_like", n_components=12, gamma=0.3, random_state=7).fit(X)
    save_model(rf, out / "models_v2" / "random_features_toeplitz_like", overwrite=True)
    np.savez(out / "seeded_outputs_v2.npz", **arrays)
    print("written with dkrr from", dkrr.__file__)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
