"""``method="auto"`` (the default): ORF up to 128 padded input columns, SORF above.

At small d' SORF's structured rows are far from independent (at d' = 2 its 256
frequencies take four values), so its kernel estimate is much worse than ORF's, while
there both multiply by a dense W and cost the same.
"""

from __future__ import annotations

import numpy as np
import pytest

from dkrr import RandomFeatureRidge, RandomFeatures
from dkrr.errors import InvalidParameterError
from dkrr.features import exact_kernel
from dkrr.features._registry import AUTO_ORF_MAX_WIDTH, resolve_method


@pytest.mark.parametrize("d, chosen", [(1, "orf"), (9, "orf"), (128, "orf"), (129, "sorf"), (300, "sorf")])
def test_auto_resolves_by_padded_width(d, chosen):
    assert AUTO_ORF_MAX_WIDTH == 128
    assert resolve_method("auto", d) == chosen
    assert resolve_method("rff", d) == "rff"  # other methods unchanged
    X = np.random.default_rng(0).standard_normal((5, d))
    auto = RandomFeatures(n_components=16, random_state=3).fit(X)
    named = RandomFeatures(method=chosen, n_components=16, random_state=3).fit(X)
    assert RandomFeatures().method == "auto"
    assert auto.feature_map_.projection.method == chosen
    np.testing.assert_array_equal(auto.transform(X), named.transform(X))  # the same draws


def test_ridge_default_is_the_resolved_method():
    rng = np.random.default_rng(1)
    X, y = rng.standard_normal((200, 9)), rng.standard_normal(200)
    auto = RandomFeatureRidge(n_components=32, gamma=0.2, random_state=0).fit(X, y)
    orf = RandomFeatureRidge(method="orf", n_components=32, gamma=0.2, random_state=0).fit(X, y)
    assert auto.feature_map_.projection.method == "orf"
    np.testing.assert_array_equal(auto.coef_, orf.coef_)


def test_auto_names_its_choice_when_an_option_does_not_apply():
    X = np.zeros((4, 10))
    with pytest.raises(InvalidParameterError, match=r"method='auto' chose 'orf' for 10 input columns.*n_hd_blocks"):
        RandomFeatures(n_hd_blocks=2).fit(X)
    RandomFeatures(n_hd_blocks=2).fit(np.zeros((4, 200)))  # sorf takes it


@pytest.mark.parametrize("kw, said", [
    (dict(n_components=0), "n_components must be a positive integer, got 0"),
    (dict(gamma=-1.0), "gamma must be a positive finite number"),
    (dict(kernel="matern", nu=-2), "nu must be a positive finite number"),
])
def test_a_parameter_of_every_method_is_refused_without_naming_autos_choice(kw, said):
    """n_components=0 was "method='auto' chose 'orf' for 10 input columns: n_components must
    be ... (name the method to use its options)": naming a method does not help."""
    with pytest.raises(InvalidParameterError) as exc:
        RandomFeatures(**kw).fit(np.zeros((4, 10)))
    assert str(exc.value).startswith(said) and "auto" not in str(exc.value), exc.value


@pytest.mark.parametrize("d", [2, 4, 8])
def test_auto_approximates_the_kernel_better_than_sorf_at_small_width(d):
    """Mean squared kernel error over 8 seeds: the default's is below half of SORF's, by more
    than 4 standard errors of the difference."""
    X = np.random.default_rng(d).standard_normal((150, d)) / np.sqrt(d)
    K = exact_kernel("gaussian", X, X, gamma=1.0)

    def mse(method, seed):
        Z = RandomFeatures(method=method, n_components=128, gamma=1.0, random_state=seed).fit(X).transform(X)
        return float(np.mean((Z @ Z.T - K) ** 2))

    auto = np.array([mse("auto", s) for s in range(8)])
    sorf = np.array([mse("sorf", s) for s in range(8)])
    diff = sorf - 2 * auto
    assert diff.mean() > 4 * diff.std(ddof=1) / np.sqrt(len(diff)), (auto.mean(), sorf.mean())
