"""Kinds of fitted attribute in a model file that are records of a solve: the solver and
why it was chosen (``solver_``, ``solver_reason_``), the pcg
solver's ``solver_info_``, the mixed-precision ``refinement_`` and the Bayesian reading's
``noise_variance_`` and ``posterior_`` (ALGORITHMS.md 3.9, 3.10, 3.11). A mixin of the model reader: each method checks
one stored value and returns it, or raises the reader's error naming the field."""

from __future__ import annotations

import math

__all__ = ["RecordKinds"]


class RecordKinds:
    """``_f_<kind>`` methods for the record kinds (uses the reader's ``bad`` and ``array``)."""

    def _f_solver(self, v, where):
        if v not in ("cholesky", "eigh", "pcg"):
            raise self.bad(where, f"must be 'cholesky', 'eigh' or 'pcg', got {v!r}")
        return v

    def _f_reason(self, v, where):
        from ._model_reader import _MAX_REASON

        if not isinstance(v, str) or not 0 < len(v) <= _MAX_REASON or not v.isprintable():
            raise self.bad(where, f"must be a sentence of at most {_MAX_REASON} printable characters, got "
                                  f"{v if not isinstance(v, str) else v[:80]!r}")
        return v

    def _f_solver_info(self, v, where):
        from ._model_reader import _is_int, _is_real

        keys = {"solver", "n_iter", "converged", "residuals", "tol", "rank", "passes"}
        # "persisted" (whether X was kept in memory) since pcg_persist; older files lack it
        if not isinstance(v, dict) or set(v) - {"persisted"} != keys or v["solver"] != "pcg":
            raise self.bad(where, f"must be the pcg solver's record with exactly the keys {sorted(keys)} "
                                  "(and 'persisted')")
        if not isinstance(v.get("persisted", False), bool):
            raise self.bad(f"{where}.persisted", f"must be true or false, got {v['persisted']!r}")
        for k in ("n_iter", "rank", "passes"):
            if not _is_int(v[k]) or not 0 <= v[k] <= 2**40:
                raise self.bad(f"{where}.{k}", f"must be a non-negative integer, got {v[k]!r}")
        if not isinstance(v["converged"], bool) or not _is_real(v["tol"]) or not 0 < v["tol"] < 1:
            raise self.bad(where, "must hold converged (true/false) and tol in (0, 1)")
        return {**v, "residuals": self.array(v["residuals"], f"{where}.residuals", ndim=(2,), finite=False)}

    def _f_refinement(self, v, where):
        from ._model_reader import _is_int, _is_real

        keys = {"passes", "residuals", "errors", "converged", "tol"}
        # format 5 stopped on the residual and recorded no errors: its record also comes in a
        # version-7 file (a version-5 model loaded and saved again); a version-6 file has errors
        if not isinstance(v, dict) or set(v) not in ((keys,) if self.version == 6 else (keys, keys - {"errors"})):
            raise self.bad(where, f"must be the refinement's record with exactly the keys {sorted(keys)}")
        if not _is_int(v["passes"]) or not 1 <= v["passes"] <= 2**20:
            raise self.bad(f"{where}.passes", f"must be a positive integer, got {v['passes']!r}")
        if not isinstance(v["converged"], bool) or not _is_real(v["tol"]) or not 0 < v["tol"] < 1:
            raise self.bad(where, "must hold converged (true/false) and tol in (0, 1)")
        out = {**v, "residuals": self.array(v["residuals"], f"{where}.residuals", ndim=(2,))}
        if "errors" in v:
            out["errors"] = self.array(v["errors"], f"{where}.errors", ndim=(2,))
        return out

    def _f_noise(self, v, where):
        from ._model_reader import _is_real

        if isinstance(v, dict):
            arr = self.array(v, where, ndim=(1,))
            if arr.dtype.kind != "f" or not (arr > 0).all():
                raise self.bad(where, "must hold positive float noise variances")
            return arr
        if not _is_real(v) or not math.isfinite(v) or v <= 0:
            raise self.bad(where, f"must be a positive finite real number or a float array, got {v!r}")
        return v

    def _f_posterior(self, v, where):
        from ._model_reader import _is_real

        if not isinstance(v, dict) or set(v) != {"factor", "mean", "inv_weight"}:
            raise self.bad(where, "must be the posterior record with exactly the keys ['factor', 'inv_weight', 'mean']")
        factor = self.array(v["factor"], f"{where}.factor", ndim=(2,))
        mean = self.array(v["mean"], f"{where}.mean", ndim=(1,))
        w = v["inv_weight"]
        if not _is_real(w) or not math.isfinite(w) or w < 0:
            raise self.bad(f"{where}.inv_weight", f"must be a finite real number >= 0, got {w!r}")
        return {"factor": factor, "mean": mean, "inv_weight": float(w)}
