"""The real datasets dkrr's pipelines and benchmarks use: where each file comes from and
its sha256.

Every downloadable file is fetched from a fixed commit of a public GitHub repository, so
the bytes cannot change under the recorded checksum; the original publisher (UCI, LIBSVM,
StatLib, Delve) is named in ``source``. cod-RNA has no such copy (its LIBSVM files were
rebuilt from a ``.mat`` file, see ``notes``): it is read from a mirror folder only.
"""

from __future__ import annotations

import dataclasses
from urllib.parse import quote

__all__ = ["DATASETS", "Dataset", "RemoteFile"]


def _github(repo: str, commit: str, path: str) -> str:
    return f"https://raw.githubusercontent.com/{repo}/{commit}/{quote(path)}"


@dataclasses.dataclass(frozen=True)
class RemoteFile:
    """One data file: its name in the cache/mirror folder, its sha256 and where to get it.

    Attributes
    ----------
    folder : str
        Sub-folder of the cache directory and of a mirror (``<mirror>/<folder>/<filename>``).
    filename : str
    sha256 : str
        Hex digest of the file's bytes; checked after every download and mirror read.
    url : str or None
        Public download location; None when the file exists only in mirrors.
    """

    folder: str
    filename: str
    sha256: str
    url: str | None = None


@dataclasses.dataclass(frozen=True)
class Dataset:
    """A named dataset: its files, task, shape and provenance."""

    name: str
    task: str  # "regression", "binary" or "multiclass"
    files: dict[str, RemoteFile]  # part name -> file ("data" unless the set has parts)
    shape: str
    source: str
    license: str
    notes: str = ""


_ARFF = ("renatopp/arff-datasets", "c59f172882592bb58982cc54d2d3c8a2b57e9b73")


def _torgo(name: str, folder: str, filename: str, sha: str, shape: str, source: str, lic: str = "not stated") -> Dataset:
    url = _github(*_ARFF, f"regression/{filename}")
    return Dataset(name, "regression", {"data": RemoteFile(folder, filename, sha, url)}, shape,
                   f"{source}; Weka ARFF copy in GitHub renatopp/arff-datasets@{_ARFF[1][:8]}", lic)


DATASETS: dict[str, Dataset] = {
    d.name: d
    for d in [
        Dataset(
            "casp", "regression",
            {"data": RemoteFile(
                "casp", "CASP.csv", "b115e8c1106416560a696c8e045ac26451a0a0e28e44559c4dcd724b055ac6ed",
                _github("iamani123/ML1819--task-104--team-15", "25a88b9741e49373473c61b5ee1e1bca3993dd9a", "CASP.csv"))},
            "45,730 x 9, target RMSD (column 0)",
            "UCI 265 'Physicochemical Properties of Protein Tertiary Structure' (P. Rana, 2013, doi:10.24432/C5QW3H)",
            "CC BY 4.0", "also shipped in dkrr/data (load_casp)",
        ),
        Dataset(
            "magic04", "binary",
            {"data": RemoteFile(
                "magic04", "magic04.data", "e9314b7ebd4b4b59a3b3d65f7316663963777b16a46786877651dbbaa640b36a",
                _github("TanishaSharma01/MAGIC-gamma-hadron-classification", "ba397177839dc51604e858e8af2ac34c44660374", "magic04.data"))},
            "19,020 x 10, labels 'g'/'h' (column 10)",
            "UCI 159 'MAGIC Gamma Telescope' (R. K. Bock, 2007, doi:10.24432/C52C8B)",
            "CC BY 4.0", "also shipped in dkrr/data (load_magic04)",
        ),
        Dataset(
            "letter", "multiclass",
            {"data": RemoteFile(
                "letter", "letter-recognition.data", "2b89f3602cf768d3c8355267d2f13f2417809e101fc2b5ceee10db19a60de6e2",
                _github("betterenvi/Adaboost-Muliclass", "7eecaeb8b8c96d3b3fb37f56a5d1d91a7981834a", "Downloads/letter-recognition.data"))},
            "20,000 x 16, 26 letter labels (column 0); Statlog split: first 16,000 train",
            "UCI 59 'Letter Recognition' (D. J. Slate, 1991, doi:10.24432/C5ZP40)", "CC BY 4.0",
        ),
        Dataset(
            "eeg_eye_state", "binary",
            {"data": RemoteFile(
                "eeg_eye_state", "EEG_Eye_State.arff", "693c689be416df0b487b45b5b58a44896fbcd0be72b4ef161d5cc34e2c66c928",
                _github("rogerior/ixio", "5529dc301c83dd152ba981c3da6239a42e6b1855", "EEG Eye State.arff"))},
            "14,980 x 14, labels 0/1 (eyeDetection, last)",
            "UCI 264 'EEG Eye State' (O. Roesler, 2013, doi:10.24432/C57G7J)", "CC BY 4.0",
            "rows in time order; a few extreme outliers: standardise or clip",
        ),
        Dataset(
            "usps", "multiclass",
            {"data": RemoteFile(
                "usps", "usps.t.bz2", "a9c0164e797d60142a50604917f0baa604f326e9a689698763793fa5d12ffc4e",
                _github("team-approx-bayes/kpriors", "7113fe83a025bc6eba02b4d9fa8c9f10e04c6366", "data/usps.t.bz2"))},
            "2,007 x 256, digits 0-9 (LIBSVM labels 1-10 minus 1)",
            "USPS digits (J. J. Hull, IEEE TPAMI 16(5), 1994), LIBSVM multiclass 'usps.t'", "not stated",
            "only the LIBSVM test split (the training file is not in any fixed public copy)",
        ),
        Dataset(
            "cod_rna", "binary",
            {part: RemoteFile("cod_rna", f"cod-rna.{part}.txt.gz", sha)
             for part, sha in [
                 ("train", "e30f2a44eb17e26cf26d975888efd2dd9983523bddf5bcb7c1ff7991beabae64"),
                 ("test", "e012574a991aae772e1568c768c5f09d51695a488f82ad0e04812e75fd88d88e"),
                 ("remaining", "854248e3a79c9a415377f5607c1cddf41a45bddadeb5de706190afcc56f1939d"),
             ]},
            "train 59,535 / test 271,617 / remaining 157,413 rows x 8, labels -1/+1 (column 0)",
            "LIBSVM 'cod-rna' (Uzilov, Keegan & Mathews, BMC Bioinformatics 7:173, 2006)", "not stated",
            "mirror only: dense text rebuilt from cod_rna.mat of GitHub fatemehzare-tamu/svm-bm-ncrna "
            "(values exact, not LIBSVM's bytes); 351 test rows have NaN in feature 1",
        ),
        _torgo("cal_housing", "cal_housing", "cal.housing.arff",
               "99ac39a6158b5eddec1a36be650beb5f11ff2e5237e925dfa4cb8d48cc1c7398",
               "20,640 x 8, target medianHouseValue (last)",
               "StatLib 'houses' (R. K. Pace & R. Barry, Stat. & Prob. Letters 33, 1997)"),
        _torgo("cpu_small", "cpu_small", "cpu.small.arff",
               "be6a626bd91804c81cc2f26d015f8df23afcce7af952c522c8dfe06bc187203c",
               "8,192 x 12, target usr (last)", "Delve comp-activ 'cpuSmall'"),
        _torgo("kin8nm", "kin8nm", "kin8nm.arff",
               "64a4d839e3ce2fd57f57a21d612392170a57f9612fdd56a8fc35b4e7a5d59881",
               "8,192 x 8, target y (last)", "Delve kin family 'kin-8nm'"),
        _torgo("abalone", "abalone", "abalone.arff",
               "3f955702660d3a6c022baf88b69f314534a625ac3fdebb761878ddff5960a560",
               "4,177 x 8 (Sex one-hot encoded to 3 columns: 10), target Class_Rings (last)",
               "UCI Abalone (Nash et al. 1994, doi:10.24432/C55C7W)", "CC BY 4.0"),
        _torgo("elevators", "elevators", "elevators.arff",
               "fd11efdb0e3bc42a3eae7e267d52d736637cc4aa2c274712d0309ea15a211afa",
               "16,599 x 18, target Goal (last)", "L. Torgo's regression collection (F16 control, R. Camacho)"),
        _torgo("ailerons", "ailerons", "ailerons.arff",
               "4fcf53bdec2ba209395dd1fe97eb0327c07468c73bfed312a317c9ea6c08061f",
               "13,750 x 40, target goal (last)", "L. Torgo's regression collection (F16 control, R. Camacho)"),
    ]
}
