"""Write ``csv_parity.json``: what the hand-written CSV parser (dkrr before issue 24) made of
the shipped CSV files and of awkward small CSVs, for ``tests/test_ingest_parallel.py``.

Run with the old dkrr importable (its checkout on ``PYTHONPATH``), from this folder::

    PYTHONPATH=/path/to/old/dkrr python make_csv_parity.py

Each case records the input (a shipped file, or the text itself), the ingest options and,
of the store written, the sha256 of the bytes of ``X`` and ``y``, their shapes, dtypes and
row chunks and the attributes that describe the columns; or the error's type and message.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from pathlib import Path

import numpy as np
import zarr

HERE = Path(__file__).resolve().parent
SHIPPED = HERE.parents[1] / "dkrr" / "data"


def _rows(n, seed, fmt="{:.6g}"):
    rng = np.random.default_rng(seed)
    return [[fmt.format(v) for v in row] for row in rng.standard_normal((n, 4)) * [1, 10, 1e-3, 1e5]]


def _text(rows, sep=",", header=None, end="\n"):
    lines = ([sep.join(header)] if header else []) + [sep.join(r) for r in rows]
    return end.join(lines) + end


def cases() -> dict[str, dict]:
    r = _rows(200, 0)
    blank = [",".join(x) for x in r]
    blank[10:10] = [""]
    blank[50:50] = ["   "]
    blank[120:120] = ["\t"]
    na = [list(x) for x in r]
    for i, j, cell in ((3, 0, ""), (40, 3, "NA"), (41, 1, " ? "), (150, 2, "null"), (199, 3, "nan")):
        na[i][j] = cell
    labels = [x[:3] + [["cat", "dog", " emu", "\"a b\""][i % 4]] for i, x in enumerate(r)]
    digits = [x[:3] + [str([10, 2, 1][i % 3])] for i, x in enumerate(r)]
    return {
        "magic04": {"shipped": "magic04.csv.gz", "kwargs": {"chunk_rows": 4000}},
        "casp": {"shipped": "casp.csv.gz", "kwargs": {"target": 0, "chunk_rows": 10000,
                                                      "dtype": "float64"}},
        "header_blank_lines": {"text": "a,b,c,t\n" + "\n".join(blank) + "\n\n\n",
                               "kwargs": {"chunk_rows": 7}},
        "crlf_bom_quoted_header": {"text": "\ufeff" + _text(r[:50], header=['"x, 1"', "y", "z", "t"],
                                                             end="\r\n"),
                                   "kwargs": {"chunk_rows": 16, "target": 0}},
        "missing_drop": {"text": _text(na, header=["a", "b", "c", "t"]),
                         "kwargs": {"missing": "drop", "chunk_rows": 32, "dtype": "float64"}},
        "missing_error": {"text": _text(na, header=["a", "b", "c", "t"]), "kwargs": {"chunk_rows": 32}},
        "labels": {"text": _text(labels, header=["a", "b", "c", "kind"]), "kwargs": {"chunk_rows": 64}},
        "numeric_labels": {"text": _text(digits, header=["a", "b", "c", "digit"]),
                           "kwargs": {"target_type": "labels"}},
        "multi_target": {"text": _text(r, header=["a", "t", "b", "u"]),
                         "kwargs": {"target": ["u", 1], "chunk_rows": 50}},
        "whitespace": {"text": "\n".join("  " + "   ".join(x) + " " for x in r) + "\n",
                       "kwargs": {"format": "csv", "delimiter": None, "target": 1, "header": False}},
        "semicolon_y32": {"text": _text(r, sep=";"), "kwargs": {"delimiter": ";", "y_dtype": "float32"}},
        "bad_cell": {"text": _text(r[:100] + [["1", "oops", "2", "3"]] + r[100:], header=["a", "b", "c", "t"]),
                     "kwargs": {"chunk_rows": 16}},
        "ragged": {"text": _text(r[:150] + [["1", "2"]] + r[150:]), "kwargs": {"chunk_rows": 16}},
        "late_text_target": {"text": _text(r[:100] + [["1", "2", "3", "x"]]), "kwargs": {"chunk_rows": 10}},
    }


def _sha(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def run(case: dict, folder: Path) -> dict:
    """Ingest one case with the dkrr importable now; the record of its store or error."""
    from dkrr.io import ingest

    if "shipped" in case:
        src = SHIPPED / case["shipped"]
    else:
        src = folder / "data.csv"
        src.write_bytes(case["text"].encode("utf-8"))
    out = folder / "out.zarr"
    try:
        ingest(src, out, **case["kwargs"])
    except Exception as exc:  # noqa: BLE001 - the record of an error
        return {"error": type(exc).__name__, "message": str(exc).replace(str(src), "SRC")}
    g = zarr.open_group(str(out), mode="r")
    X, y = g["X"][...], g["y"][...]
    attrs = dict(g.attrs)
    record = {
        "X": [_sha(X), list(X.shape), X.dtype.str, int(g["X"].chunks[0])],
        "y": [_sha(y), list(y.shape), y.dtype.str, int(g["y"].chunks[0])],
        "attrs": {k: attrs.get(k) for k in ("feature_names", "target_names", "classes", "rows_dropped",
                                             "header", "delimiter", "target_columns")},
    }
    shutil.rmtree(out)
    return record


def main() -> None:
    out = {}
    folder = Path(tempfile.mkdtemp())
    try:
        for name, case in cases().items():
            out[name] = {**case, "old": run(case, folder)}
    finally:
        shutil.rmtree(folder)
    (HERE / "csv_parity.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
