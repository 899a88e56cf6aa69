"""Suite "approx": kernel approximation error versus D for every registered projection.

The analogue of Figure 4 of the ORF paper (Yu et al. 2016): on a random sample of rows
of real data sets (standardised columns), Gaussian kernel with sigma = the mean distance
to the 50th nearest neighbour within the sample (ALGORITHMS.md section 5), the MSE
``mean_{i<j} ((Z Z^T)_ij - K_ij)^2`` over distinct pairs, for every method in
``dkrr.features.PROJECTIONS`` at D = d' x {1, 2, 4, 8(, 16)} (d' = d padded to a power of
two). Each point is the median over independent draws of the map (new seed each), with
the min-max spread; the table also gives the ratio to RFF's median at the same D.

A second table per data set (ALGORITHMS.md section 2.8, [CRW17]): the ``linear`` kernel
(``x^T y``, a JLT sketch) and the ``angular`` kernel for RFF, ORF, SORF and the ROM
variants (real / complex4 / unit-circle diagonals, first rows or rows sampled without
repetitions) at D = d'/4, d'/2 (where row sampling acts on a partial block; one draw in
the quick run), and d', 2 d' in the full run. A complex ROM has ``2 D`` output columns at
D rows.
"""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import Any

import numpy as np

from ._common import Config, fmt_num, fmt_stat, summarize
from ._data import load_raw, sigma_50nn

NAME = "approx"
TITLE = "Kernel approximation MSE versus D (ORF paper Fig. 4 analogue)"


def settings(cfg: Config) -> dict[str, Any]:
    if cfg.quick:
        return {"datasets": ["usps", "cal_housing"], "rows": 300, "multiples": [1, 2, 4], "draws": 3}
    return {"datasets": ["usps", "letter", "cal_housing"], "rows": 1000, "multiples": [1, 2, 4, 8], "draws": max(10, cfg.repeats)}


#: (label, method, options) of the linear/angular table; complex diagonals are linear only
ROM_VARIANTS = [
    ("rff", "rff", {}),
    ("orf", "orf", {}),
    ("sorf", "sorf", {}),
    ("rom", "rom", {}),
    ("rom without_replacement", "rom", {"row_sampling": "without_replacement"}),
    ("rom complex4", "rom", {"rom_diagonal": "complex4"}),
    ("rom unit_circle", "rom", {"rom_diagonal": "unit_circle"}),
    ("rom complex4 without_replacement", "rom", {"rom_diagonal": "complex4", "row_sampling": "without_replacement"}),
]


def _rom_table(X: np.ndarray, dp: int, st: dict, seed0: int, quick: bool) -> dict[str, Any]:
    """Linear- and angular-kernel MSE over distinct pairs for :data:`ROM_VARIANTS`."""
    from dkrr import RandomFeatures
    from dkrr.features import exact_kernel

    n = X.shape[0]
    iu = np.triu_indices(n, k=1)
    # quick: the partial-block sizes only (where row sampling acts), one draw
    Ds = [max(1, dp // 4), max(1, dp // 2)] + ([] if quick else [dp, 2 * dp])
    draws = 1 if quick else st["draws"]
    table: dict[str, Any] = {"D": Ds, "linear": {}, "angular": {}, "failures": {}}
    for kernel in ("linear", "angular"):
        K = exact_kernel(kernel, X, X)
        for label, method, opts in ROM_VARIANTS:
            if kernel != "linear" and opts.get("rom_diagonal", "rademacher") != "rademacher":
                continue
            table[kernel][label] = []
            for D in Ds:
                vals = []
                try:
                    for r in range(draws):
                        rf = RandomFeatures(kernel=kernel, method=method, n_components=D,
                                            random_state=seed0 + 7919 * r + D, **opts)
                        A = (lambda Z: Z @ Z.T)(rf.fit_transform(X))
                        vals.append(float(np.mean((A[iu] - K[iu]) ** 2)))
                except Exception as exc:
                    table["failures"][f"{kernel} {label} D={D}"] = f"{type(exc).__name__}: {str(exc)[:200]}"
                table[kernel][label].append(summarize(vals))
    return table


def _sample(name: str, rows: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Standardised evaluation sample and the disjoint pool of the other rows (same scaling)."""
    X, _ = load_raw(name)
    rng = np.random.default_rng(seed)
    perm = rng.permutation(X.shape[0])
    S, pool = X[perm[:rows]], X[perm[rows:]]
    mu, sd = S.mean(0), S.std(0)
    sd[sd == 0] = 1.0
    return np.ascontiguousarray((S - mu) / sd), np.ascontiguousarray((pool - mu) / sd)


def run(cfg: Config) -> dict[str, Any]:
    from dkrr import RandomFeatures
    from dkrr.features import PROJECTIONS, exact_kernel, next_power_of_two

    st = settings(cfg)
    methods = sorted(PROJECTIONS)
    all_methods = methods + ["nystroem"]
    out: dict[str, Any] = {"settings": st, "methods": all_methods, "projections": methods,
                           "nystroem": "available", "datasets": []}
    for name in st["datasets"]:
        try:
            X, pool = _sample(name, st["rows"], cfg.seed)
            n, d = X.shape
            sigma = sigma_50nn(X, k=50, n_sample=n, seed=cfg.seed)
            gamma = 1.0 / (2.0 * sigma**2)
            K = exact_kernel("gaussian", X, X, gamma)
            iu = np.triu_indices(n, k=1)
            dp = next_power_of_two(d)
            mult = list(st["multiples"]) + ([16] if dp < 64 and not cfg.quick else [])
            Ds = [dp * m for m in mult]
            res = {"dataset": name, "rows": n, "d": d, "sigma": sigma, "gamma": gamma, "D": Ds, "mse": {}, "failures": {}}
            for m in all_methods:
                res["mse"][m] = []
                for D in Ds:
                    vals = []
                    try:
                        for r in range(st["draws"]):
                            seed = cfg.seed + 7919 * r + D
                            if m == "nystroem":  # equal output width 2D; landmarks from the disjoint pool
                                if 2 * D > pool.shape[0]:
                                    break
                                rf = RandomFeatures(method=m, n_components=2 * D, gamma=gamma, random_state=seed).fit(pool)
                                Z = rf.transform(X)
                            else:
                                Z = RandomFeatures(method=m, n_components=D, gamma=gamma, random_state=seed).fit_transform(X)
                            A = Z @ Z.T
                            vals.append(float(np.mean((A[iu] - K[iu]) ** 2)))
                    except Exception as exc:
                        res["failures"][f"{m} D={D}"] = f"{type(exc).__name__}: {str(exc)[:200]}"
                    res["mse"][m].append(summarize(vals))
            res["rom"] = _rom_table(X, dp, st, cfg.seed, cfg.quick)
            out["datasets"].append(res)
        except Exception:
            out["datasets"].append({"dataset": name, "error": traceback.format_exc(limit=5)})
    out["plot"] = _plot(out, cfg.out)
    out["notes"] = _notes(out)
    return out


def _plot(out: dict, folder: Path) -> str | None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ds = [d for d in out["datasets"] if "mse" in d]
    if not ds:
        return None
    fig, axes = plt.subplots(1, len(ds), figsize=(5.2 * len(ds), 4.2), squeeze=False)
    for ax, d in zip(axes[0], ds):
        for m in out["methods"]:
            stats = d["mse"][m]
            pts = [(D, s) for D, s in zip(d["D"], stats) if s["median"] is not None]
            if not pts:
                continue
            xs = [p[0] for p in pts]
            ax.plot(xs, [p[1]["median"] for p in pts], marker="o", ms=3, label=m)
            ax.fill_between(xs, [p[1]["min"] for p in pts], [p[1]["max"] for p in pts], alpha=0.15)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("D (random frequencies)")
        ax.set_ylabel("kernel approximation MSE")
        ax.set_title(f"{d['dataset']} (n={d['rows']}, d={d['d']}, sigma={d['sigma']:.3g})")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].legend(fontsize=7, ncol=2)
    fig.tight_layout()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "approx_mse.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path.name


def _notes(out: dict) -> list[str]:
    notes = []
    for d in out["datasets"]:
        if "mse" not in d or "rff" not in d["mse"]:
            continue
        for i, D in enumerate(d["D"]):
            rff = d["mse"]["rff"][i]
            for m in ("orf", "sorf"):
                s = d["mse"].get(m, [None] * len(d["D"]))[i]
                # flag only when outside RFF's whole spread over draws
                if s and s["median"] is not None and rff["max"] is not None and s["median"] > rff["max"]:
                    notes.append(f"{d['dataset']} D={D}: {m} median MSE {s['median']:.3g} is above RFF's largest "
                                 f"{rff['max']:.3g} (expected below, ORF paper Fig. 4).")
    return notes


def render(res: dict[str, Any]) -> str:
    st = res["settings"]
    L = [f"{st['rows']} random rows per data set (standardised columns), MSE over distinct pairs, median [min-max] over "
         f"{st['draws']} independent draws of each map; 'x RFF' = median / RFF median at the same D. Every method in "
         f"dkrr.features.PROJECTIONS ({', '.join(res.get('projections', res['methods']))}). Nystroem: {res.get('nystroem', 'n/a')}"
         " -- when present it is given m = 2D landmarks (the same output width as the cos/sin maps) drawn from the rows "
         "outside the evaluation sample (n/a where 2D exceeds them).", ""]
    if res.get("plot"):
        L += [f"![kernel approximation MSE]({res['plot']})", ""]
    for d in res["datasets"]:
        if "error" in d:
            L += [f"#### {d['dataset']}", "", "```", d["error"], "```", ""]
            continue
        L += [f"#### {d['dataset']} (n = {d['rows']}, d = {d['d']}, sigma = {fmt_num(d['sigma'])}, gamma = {fmt_num(d['gamma'])})", "",
              "| method | " + " | ".join(f"D={D}" for D in d["D"]) + " |",
              "|---|" + "---|" * len(d["D"])]
        L += _mse_rows(d["mse"])
        if d["failures"]:
            L += ["", "Failures: " + "; ".join(f"{k}: {v}" for k, v in d["failures"].items())]
        L.append("")
        if d.get("rom"):
            L += _render_rom(d["dataset"], d["rom"])
    if res.get("notes"):
        L += [f"- {n}" for n in res["notes"]] + [""]
    return "\n".join(L)


def _mse_rows(table: dict[str, list]) -> list[str]:
    """One markdown row per method: each D's MSE statistics and its ratio to RFF's median."""
    rff = table.get("rff")
    rows = []
    for m, stats in table.items():
        cells = []
        for i, s in enumerate(stats):
            c = fmt_stat(s)
            if rff and rff[i]["median"] and s["median"] is not None and m != "rff":
                c += f" ({s['median'] / rff[i]['median']:.2f} x RFF)"
            cells.append(c)
        rows.append(f"| {m} | " + " | ".join(cells) + " |")
    return rows


def _render_rom(name: str, t: dict[str, Any]) -> list[str]:
    L = []
    for kernel in ("linear", "angular"):
        L += [f"{name}, kernel={kernel} (ROMs, ALGORITHMS.md 2.8): MSE over distinct pairs, median [min-max] "
              "over draws", "",
              "| method | " + " | ".join(f"D={D}" for D in t["D"]) + " |", "|---|" + "---|" * len(t["D"])]
        L += _mse_rows(t[kernel])
        L.append("")
    if t["failures"]:
        L += ["Failures: " + "; ".join(f"{k}: {v}" for k, v in t["failures"].items()), ""]
    return L


def headline(res: dict[str, Any]) -> list[str]:
    out = []
    for d in res["datasets"]:
        if "mse" not in d or "rff" not in d["mse"]:
            continue
        i = len(d["D"]) - 1
        rff = d["mse"]["rff"][i]["median"]
        parts = [f"{m} {d['mse'][m][i]['median'] / rff:.2f}x" for m in ("orf", "sorf", "qmc", "fastfood", "circulant")
                 if m in d["mse"] and d["mse"][m][i]["median"] is not None and rff]
        out.append(f"{d['dataset']} (d={d['d']}, D={d['D'][i]}): MSE relative to RFF: " + ", ".join(parts))
    return out
