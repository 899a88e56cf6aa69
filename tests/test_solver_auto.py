"""solver="auto" (the Gram path when its memory estimate fits, else "pcg") and
pcg_persist (X kept in memory across the CG passes when it fits): ALGORITHMS.md 3.9."""

from __future__ import annotations

import re

import dask
import dask.array as da
import numpy as np
import pytest
from test_one_pass import ROWS, counting_array, loads

from dkrr import RandomFeatureRidge
from dkrr.errors import MemoryBudgetError
from dkrr.estimators._solver import choose_solver
from dkrr.io._model import load_model, save_model
from dkrr.linalg._pcg import PERSIST_FRACTION, data_fits_in_memory, pcg_memory_estimate

GiB = 2**30
MiB = 2**20


def _data(n=400, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    return X, np.sin(X[:, 0]) + 0.1 * rng.standard_normal(n)


def _dask(n=1000, d=8):
    return da.zeros((n, d), chunks=(250, d)), da.zeros(n, chunks=250)


def test_auto_chooses_by_the_gram_paths_estimate():
    """p = 4096: a chain step of the Gram path holds two 128 MiB statistics objects and a
    p x p temporary (~0.4 GiB); PCG's largest part is a few MiB."""
    X, y = _dask()
    est = RandomFeatureRidge(method="rff", n_components=2048)
    args = (est, X, y, None, 1, 1.0, None, None)
    assert choose_solver(*args, limits=(None, 8 * GiB)).solver == "cholesky"  # threaded: this machine's memory
    assert choose_solver(*args, limits=(None, 256 * MiB)).solver == "pcg"
    assert choose_solver(*args, limits=(4 * GiB, 8 * GiB)).solver == "cholesky"  # a Client: the worker limit
    assert choose_solver(*args, limits=(512 * MiB, 8 * GiB)).solver == "pcg"  # its tasks: 110 MiB
    with pytest.raises(MemoryBudgetError, match=r"also tried the matrix-free solver='pcg', which does not fit"):
        choose_solver(*args, limits=(None, 1 * MiB))
    # the Gram solvers asked for by name keep the Gram path and name pcg as the fix
    est.set_params(solver="eigh")
    assert choose_solver(*args, limits=(None, 8 * GiB)).solver == "eigh"
    with pytest.raises(MemoryBudgetError, match=r"Or use solver='pcg' \(matrix-free"):
        choose_solver(*args, limits=(None, 256 * MiB))
    # options pcg does not support keep "auto" on the Gram path, and the error says why
    est.set_params(solver="auto", sampling="surrogate_leverage")
    with pytest.raises(MemoryBudgetError, match=r"could not switch to the matrix-free solver='pcg': sampling="):
        choose_solver(*args, limits=(None, 256 * MiB))
    est.set_params(sampling=None)
    with pytest.raises(MemoryBudgetError, match=r"could not switch.*alpha = 0"):
        choose_solver(est, X, y, None, 3, 1.0, np.array([0.0, 1.0]), None, limits=(None, 256 * MiB))


def test_the_choice_says_why_with_the_numbers():
    """solver_reason_: the Gram path's estimate (and pcg's when "auto" switched) against
    each limit and where the limit comes from."""
    X, y = _dask()
    est = RandomFeatureRidge(method="rff", n_components=2048)
    args = (est, X, y, None, 1, 1.0, None, None)
    gram = r"the Gram path \(p = 4096 features\) needs about [\d.]+ MiB"
    choice = choose_solver(*args, limits=(None, 8 * GiB))
    assert re.fullmatch(rf"solver='auto' chose 'cholesky': {gram} in all, within the available memory of this "
                        r"machine \(8\.00 GiB\)", choice.reason), choice.reason
    choice = choose_solver(*args, limits=(512 * MiB, 8 * GiB))
    # a worker's tasks hold what its limit leaves at distributed's pause, less the worker's own memory
    worker = (r"what a Dask worker's tasks can hold, 80% of its 512 MiB memory limit \(where distributed pauses "
              r"it\) less about 300 MiB that the worker holds itself \(110 MiB\)")
    assert re.fullmatch(rf"solver='auto' chose 'pcg': {gram} per worker, more than {worker} and [\d.]+ MiB on the "
                        r"client, within the available memory of this machine \(8\.00 GiB\); the matrix-free pcg "
                        rf"\(p = 4096 features\) needs about [\d.]+ MiB per worker, within {worker} and [\d.]+ \w+ on "
                        r"the client, within the available memory of this machine \(8\.00 GiB\)", choice.reason), choice.reason
    est.set_params(solver="eigh")
    assert re.fullmatch(rf"solver='eigh' was asked for; {gram} in all, within the available memory of this machine "
                        r"\(8\.00 GiB\)", choose_solver(*args, limits=(None, 8 * GiB)).reason)
    est.set_params(solver="pcg")
    assert choose_solver(*args, limits=(None, 1 * MiB)) == (
        "pcg", "solver='pcg' was asked for (matrix-free CG: no p x p Gram is formed)")


def test_solver_reason_is_fitted_saved_and_checked(tmp_path):
    import json
    import shutil

    from dkrr.errors import ModelFormatError

    X, y = _data()
    est = RandomFeatureRidge(method="rff", n_components=32, alpha=1.0, random_state=0).fit(X, y)
    assert re.fullmatch(r"solver='auto' chose 'cholesky': the Gram path \(p = 64 features\) needs about [\d.]+ "
                        r"\w+ in all, within .+ \([\d.]+ \w+\)", est.solver_reason_), est.solver_reason_
    save_model(est, tmp_path / "m")
    assert load_model(tmp_path / "m").solver_reason_ == est.solver_reason_
    for bad, error in [("solver='auto' chose 'pcg': trust me", "disagrees"),
                       ("\x1b[2J" + est.solver_reason_, "must be a sentence"), ("x" * 2001, "must be a sentence"),
                       (42, "must be a sentence")]:
        d = shutil.copytree(tmp_path / "m", tmp_path / "bad", dirs_exist_ok=True)
        doc = json.loads((d / "model.json").read_text())
        doc["estimator"]["__estimator__"]["fitted"]["solver_reason_"] = bad
        (d / "model.json").write_text(json.dumps(doc))
        with pytest.raises(ModelFormatError, match=rf"model\.solver_reason_ .*{error}"):
            load_model(d)
    # a file saved before solver_reason_ existed loads without it
    doc = json.loads((tmp_path / "m" / "model.json").read_text())
    del doc["estimator"]["__estimator__"]["fitted"]["solver_reason_"]
    (tmp_path / "bad" / "model.json").write_text(json.dumps(doc))
    assert not hasattr(load_model(tmp_path / "bad"), "solver_reason_")


@pytest.mark.cluster
def test_auto_switches_to_pcg_on_a_worker_memory_limit(local_cluster, tmp_path):
    """The session cluster's workers have 1 GiB: D = 8192 (p = 16384, a 2 GiB Gram) goes
    to PCG, D = 64 stays on the Gram path; the model file keeps the choice."""
    import distributed

    X, y = _data()
    kw = {"method": "rff", "gamma": 0.3, "alpha": 1.0, "random_state": 0}
    with distributed.Client(local_cluster):
        big = RandomFeatureRidge(n_components=8192, tol=1e-8, **kw).fit(X, y)
        small = RandomFeatureRidge(n_components=64, **kw).fit(X, y)
    assert big.solver_ == "pcg" and big.solver_info_["converged"] and big.n_output_features_ == 16384
    assert big.solver_info_["persisted"]  # 13 KiB of X: kept on the workers across the passes
    assert small.solver_ == "cholesky" and not hasattr(small, "solver_info_")
    # the reasons quote what the workers' 1 GiB limit leaves their tasks
    worker = ("what a Dask worker's tasks can hold, 80% of its 1.00 GiB memory limit (where distributed pauses it) "
              "less about 300 MiB that the worker holds itself (519 MiB)")
    assert f"more than {worker}" in big.solver_reason_
    assert f"per worker, within {worker}" in small.solver_reason_
    # the same model as asking for pcg on the threaded scheduler
    with dask.config.set(scheduler="threads"):
        ref = RandomFeatureRidge(n_components=8192, tol=1e-8, solver="pcg", **kw).fit(X, y)
    np.testing.assert_allclose(big.predict(X), ref.predict(X), rtol=1e-6, atol=1e-9)
    save_model(big, tmp_path / "m")
    back = load_model(tmp_path / "m")
    assert back.solver_ == "pcg" and back.solver_info_["persisted"] is True
    assert back.solver_reason_ == big.solver_reason_


def test_data_fits_in_memory_rule():
    est = pcg_memory_estimate(kernel="gaussian", method="sorf", n_features_in=8, n_components=1024, n_targets=1,
                              rank=64, split_every=None, block_rows=1000, n_blocks=10, max_block_bytes=64 * MiB)
    # what a worker's tasks can hold, as the solver's choice takes it: 80% of its limit
    # (distributed's pause) less the ~300 MiB the worker holds itself; the fit's part is not free
    free = 0.8 * 4 * GiB - 300 * MiB - est.worker
    fits = PERSIST_FRACTION * free
    # a Client with 2 workers of 4 GiB: a worker's share is half of X plus a block
    assert data_fits_in_memory(int(2 * (fits - MiB)), MiB, est, limits=(4 * GiB, 64 * GiB), n_workers=2)
    assert not data_fits_in_memory(int(2 * fits), MiB, est, limits=(4 * GiB, 64 * GiB), n_workers=2)
    # threaded: all of X against this machine's available memory less the estimate
    local = 4 * GiB
    room = PERSIST_FRACTION * (local - max(est.worker, est.client))
    assert data_fits_in_memory(int(room), MiB, est, limits=(None, local))
    assert not data_fits_in_memory(int(room) + 1, MiB, est, limits=(None, local))


@pytest.mark.parametrize("persist", [True, False])
def test_persist_reads_each_block_once(tmp_path, scheduler, persist):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((sum(ROWS), 4))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(len(X))
    Xd, yd = counting_array(X, str(tmp_path), "X"), counting_array(y, str(tmp_path), "y")
    kw = {"method": "rff", "n_components": 16, "gamma": 0.5, "random_state": 0, "solver": "pcg", "tol": 1e-10,
          "pcg_rank": 4}
    est = RandomFeatureRidge(**kw, pcg_persist=persist).fit(Xd, yd)
    info = est.solver_info_
    assert info["persisted"] is persist and info["passes"] == info["n_iter"] + 1 > 3
    reads = info["passes"] if not persist else 1  # pass 1 and one pass per iteration read X
    # y's first block is read once more before the passes: the target's shift (ALGORITHMS 3.4)
    assert dict(loads(tmp_path)) == ({f"X-{i}": reads for i in range(len(ROWS))} | {f"y-{i}": 1 for i in range(len(ROWS))}
                                     | {"y-0": 2})
    ref = RandomFeatureRidge(**kw, pcg_persist=not persist).fit(X, y)  # other chunks: rounding differs
    assert np.linalg.norm(est.coef_ - ref.coef_) < 1e-8 * np.linalg.norm(ref.coef_)


def test_persist_auto_follows_the_rule_and_cv_reads_once(tmp_path):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((sum(ROWS), 4))
    y = np.sin(X[:, 0])
    Xd, yd = counting_array(X, str(tmp_path), "X"), counting_array(y, str(tmp_path), "y")
    with dask.config.set(scheduler="threads"):
        est = RandomFeatureRidge(method="rff", n_components=16, gamma=0.5, random_state=0, solver="pcg", cv=3,
                                 alphas=[0.1, 1.0], tol=1e-8, pcg_rank=4).fit(Xd, yd)
    # 3 KiB of data on this machine: "auto" keeps it; the CV's passes (iterations + 2) read it once
    assert est.solver_info_["persisted"] and est.solver_info_["passes"] == est.solver_info_["n_iter"] + 2
    assert loads(tmp_path) == {**{f"X-{i}": 1 for i in range(len(ROWS))},
                               **{f"y-{i}": 1 for i in range(len(ROWS))}, "y-0": 2}  # + the shift's read
