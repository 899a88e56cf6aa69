"""BLAS threads: one BLAS thread per Dask thread.

Random-feature ridge regression spends its time in BLAS (``Z.T @ Z`` per chunk). Dask
already runs one task per worker thread, so a multi-threaded BLAS inside each task would
oversubscribe the cores. ``distributed`` prevents this for every worker started by a
nanny (``LocalCluster(processes=True)`` and the ``dask worker`` command): its config key
``distributed.nanny.pre-spawn-environ`` sets ``OMP_NUM_THREADS``, ``MKL_NUM_THREADS`` and
``OPENBLAS_NUM_THREADS`` to 1 in the worker process before it imports numpy (checked on
distributed 2026.8; ``tests/test_cluster_client.py`` verifies it with ``threadpoolctl``).
With ``threads_per_worker > 1`` each worker thread still calls a single-threaded BLAS, so
there is one BLAS thread per Dask thread. Workers run *inside* the client process
(``processes=False``) do not get this environment; for them
:func:`dkrr.cluster.local_cluster` limits BLAS with :func:`limit_blas_threads` for the
duration of the block, and so does :func:`dkrr._progress.compute_limited` on dask's
threaded scheduler.
"""

from __future__ import annotations

import functools
import os
from contextlib import contextmanager

__all__ = ["BLAS_THREAD_VARIABLES", "blas_single_threaded", "limit_blas_threads", "worker_blas_threads"]

#: Environment variables that bound the thread pools of the common BLAS libraries.
BLAS_THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


@contextmanager
def limit_blas_threads(n_threads=1):
    """Limit the BLAS/OpenMP thread pools of *this* process for the block.

    Uses ``threadpoolctl`` when it is installed (it is a dependency of scikit-learn);
    otherwise does nothing. Worker processes started by a nanny need no such limit (see
    the module docstring).

    Parameters
    ----------
    n_threads : int, default=1
    """
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - scikit-learn always brings threadpoolctl
        yield
        return
    with threadpool_limits(limits=n_threads):
        yield


@functools.lru_cache(maxsize=1)
def _blas_pools() -> tuple:
    """The BLAS libraries of this process (threadpoolctl's controllers), found once, after
    numpy's and scipy's (``scipy.linalg.cython_blas``) are loaded: the scan of the loaded
    libraries takes milliseconds, a controller's thread count microseconds."""
    import numpy  # noqa: F401
    import scipy.linalg.cython_blas  # noqa: F401

    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # pragma: no cover - a dependency of dkrr and scikit-learn
        return ()
    return tuple(lib for lib in ThreadpoolController().lib_controllers if lib.user_api == "blas")


def blas_single_threaded() -> bool:
    """Whether every BLAS library of this process (numpy's, scipy's) runs one thread now:
    in a Dask worker, and within :func:`limit_blas_threads` ``(1)`` (about 2 us a call)."""
    pools = _blas_pools()
    return bool(pools) and all(lib.num_threads == 1 for lib in pools)


def _blas_info():
    import numpy  # noqa: F401  (load the BLAS numpy links against)

    env = {name: os.environ.get(name) for name in BLAS_THREAD_VARIABLES}
    try:
        from threadpoolctl import threadpool_info
    except ImportError:  # pragma: no cover
        return {"environ": env, "pools": []}
    pools = [
        {"user_api": p["user_api"], "internal_api": p["internal_api"], "num_threads": p["num_threads"]}
        for p in threadpool_info()
    ]
    return {"environ": env, "pools": pools}


def worker_blas_threads(client):
    """Report the BLAS thread settings of every worker of ``client``.

    Parameters
    ----------
    client : distributed.Client

    Returns
    -------
    info : dict
        Maps each worker address to ``{"environ": {...}, "pools": [...]}``: the values of
        :data:`BLAS_THREAD_VARIABLES` and the thread pools seen by ``threadpoolctl``
        (``user_api``, ``internal_api``, ``num_threads``).

    Examples
    --------
    >>> from dkrr.cluster import local_cluster, worker_blas_threads
    >>> with local_cluster(n_workers=1, dashboard=False, quiet=True) as client:
    ...     (info,) = worker_blas_threads(client).values()
    >>> info["environ"]["OMP_NUM_THREADS"]
    '1'
    """
    return client.run(_blas_info)
