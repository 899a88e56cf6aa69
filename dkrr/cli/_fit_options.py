"""What ``dkrr fit`` builds: its options from a TOML config file and the flags, the
command's defaults where they differ from the classes' (:func:`command_defaults`), and the
estimator they describe (:func:`estimator_from_options`)."""

from __future__ import annotations

import tomllib

from ..errors import InvalidParameterError
from ._options import ESTIMATOR_OPTIONS, GRID_PARSERS

__all__ = ["DEFAULT_CV", "DEFAULT_RANDOM_STATE", "command_defaults", "estimator_from_options"]


def _expected(dest: str, typ) -> tuple[str, callable]:
    """What a config value of option `dest` must be, and a check returning it or None."""
    def number(v):
        return None if isinstance(v, bool) or not isinstance(v, (int, float)) else float(v)

    if dest in ("classifier", "fit_intercept", "standardize"):
        return "true or false", lambda v: v if isinstance(v, bool) else None
    if dest == "gamma":
        def gamma(v):
            if isinstance(v, list):  # ARD: one per column
                return v if v and all(number(a) is not None for a in v) else None
            return v if v in ("median", "scale") else number(v)
        return "a positive number, a list of them (ARD), 'median' or 'scale'", gamma
    if dest == "cv":
        def cv(v):
            return v if v == "evidence" or (isinstance(v, int) and not isinstance(v, bool)) else None
        return "an integer (the folds; 0 for none) or 'evidence'", cv
    if dest == "pcg_persist":
        return "true, false or 'auto'", lambda v: v if isinstance(v, bool) or v == "auto" else None
    if dest in GRID_PARSERS:
        def grid(v):
            if isinstance(v, str):
                return v
            if isinstance(v, list) and v and all(number(a) is not None for a in v):
                return v
            return None
        what = "a list of numbers or a comma-separated string" + (", 'auto' or 'none'" if dest == "gammas" else "")
        return what, grid
    if typ is int:
        return "an integer", lambda v: v if isinstance(v, int) and not isinstance(v, bool) else None
    if typ is float:
        return "a number", number
    return "a string", lambda v: v if isinstance(v, str) else None


def _load_config(path: str | None) -> dict:
    if not path:
        return {}
    try:
        with open(path, "rb") as fh:
            raw = tomllib.load(fh)
    except FileNotFoundError:
        raise InvalidParameterError(f"config file {path!r} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidParameterError(f"config file {path!r} cannot be read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise InvalidParameterError(f"config file {path!r} is not valid TOML: {exc}") from None
    if "fit" in raw:  # either top-level keys or a [fit] table
        if not isinstance(raw["fit"], dict) or len(raw) > 1:
            raise InvalidParameterError(
                f"config file {path!r}: 'fit' must be the only table, [fit], holding the "
                f"options; got {sorted(raw)} with fit = {raw['fit']!r}"
            )
        raw = raw["fit"]
    types = {dest: typ for _, dest, typ, _ in ESTIMATOR_OPTIONS}
    types.update(classifier=bool, fit_intercept=bool, standardize=bool)
    config, spelled = {}, {}
    for key, value in raw.items():
        dest = key.replace("-", "_")
        if dest in spelled:  # TOML refuses a key twice; 'n-components' and 'n_components' are one
            raise InvalidParameterError(
                f"config file {path!r}: option {key!r} is given twice (also as {spelled[dest]!r}); keep one")
        spelled[dest] = key
        if dest not in types:
            raise InvalidParameterError(
                f"config file {path!r}: unknown option {key!r}; known: "
                f"{sorted(k.replace('_', '-') for k in types)}"
            )
        what, check = _expected(dest, types[dest])
        checked = check(value)
        if checked is None:
            raise InvalidParameterError(
                f"config file {path!r}: {key} must be {what}, got {value!r} "
                f"({type(value).__name__})"
            )
        if dest in GRID_PARSERS:
            try:
                checked = GRID_PARSERS[dest](checked)
            except Exception as exc:  # noqa: BLE001 - argparse's error type, a bad number
                raise InvalidParameterError(f"config file {path!r}: {key}: {exc}") from None
        config[dest] = checked
    return config


#: folds of the command's default cross-validation
DEFAULT_CV = 5
#: the command's seed when --random-state is not given
DEFAULT_RANDOM_STATE = 0


def command_defaults(options: dict) -> list[str]:
    """The command's defaults, where they differ from the classes' (which follow
    scikit-learn), filled into ``options`` (config file and flags already in):

    - standardised columns, the width from a rule (the 50-NN rule for the gaussian and
      matern kernels, ``"scale"`` for the laplacian and polynomial), ``random_state=0``;
    - alpha (and gamma) chosen by 5-fold one-pass CV over the default alpha grid, unless
      ``cv`` is 0 (``--no-cv``), or ``alpha`` is given without ``cv`` or ``alphas``: then
      the single alpha is fitted;
    - with CV, a kernel with a width, a gamma *rule* and neither ``sampling`` nor
      ``solver="pcg"`` (which cannot score a gamma grid), ``gammas="auto"``: the widths
      gamma_rule x 2**(-3..2) are scored in the same pass. ``gammas="none"`` turns that off.

    Returns the notes (a list) that say what a given option does not do here: ``--solver
    pcg`` leaves the default gamma grid out; ``--alpha`` beside a cross-validation, or
    the evidence, that chooses alpha; the pcg options beside another solver.
    """
    from ..features._nonlinear import WIDTH_KERNELS

    if options.get("sampling") == "none":  # the help's "default none"
        options["sampling"] = None
    gamma_given = "gamma" in options
    options.setdefault("standardize", True)
    options.setdefault("random_state", DEFAULT_RANDOM_STATE)
    kernel = options.get("kernel", "gaussian")
    width = kernel in WIDTH_KERNELS  # a kernel with a width: a rule and a grid by default
    if "gamma" not in options and width:
        options["gamma"] = "median" if kernel in ("gaussian", "matern") else "scale"
    notes = []
    if "cv" not in options:
        single = "alpha" in options and options.get("alphas") is None and options.get("gammas") in (None, "none")
        options["cv"] = None if single else DEFAULT_CV
    elif options["cv"] == 0:
        options["cv"] = None
    if "alpha" in options and options["cv"] is not None:
        how = "the evidence (--cv evidence)" if options["cv"] == "evidence" else "cross-validation"
        leverage = (", though --sampling ridge_leverage scores the features' leverage at it"
                    if options.get("sampling") == "ridge_leverage" else "")
        notes.append(f"--alpha {options['alpha']:g} is not fitted: {how} chooses alpha from "
                     f"{'--alphas' if options.get('alphas') is not None else 'the default grid'} "
                     f"(--no-cv fits --alpha alone){leverage}")
    if gamma_given and isinstance(options.get("gammas"), (list, tuple)) and not isinstance(options["gamma"], (list, tuple)):
        notes.append(f"--gamma {options['gamma']} is not used: --gammas gives the widths scored "
                     "(multipliers of --gamma only where it is one width per column, ARD)")
    unused = [f"--{d.replace('_', '-')}" for d in ("pcg_rank", "tol", "max_iter", "pcg_persist") if d in options]
    if unused and options.get("solver", "auto") in ("cholesky", "eigh"):
        notes.append(f"{', '.join(unused)} {'applies' if len(unused) == 1 else 'apply'} to --solver pcg only: "
                     f"not used with --solver {options['solver']}")
    if options.get("gammas") == "none":
        options["gammas"] = None
    elif ("gammas" not in options and width and options["cv"] is not None
          and isinstance(options.get("gamma"), str) and options.get("sampling") is None):
        if options.get("solver", "auto") == "pcg":
            notes.append("--solver pcg scores no gamma grid: alpha is chosen by cross-validation at the gamma of the "
                         f"rule {options['gamma']!r} alone (--gamma sets another; the Gram path, --solver cholesky, "
                         "scores the widths gamma_rule x 2**(-3..2) with it)")
        else:
            options["gammas"] = "auto"
    return notes


def estimator_from_options(args, notes: list | None = None):
    """The estimator a ``dkrr fit`` invocation describes (config file, then flags); the
    notes of :func:`command_defaults` are appended to `notes`."""
    from ..estimators import RandomFeatureRidge, RandomFeatureRidgeClassifier

    options = _load_config(getattr(args, "config", None))
    for _, dest, _, _ in ESTIMATOR_OPTIONS:
        value = getattr(args, dest, None)
        if value is not None:
            options[dest] = value
    for dest in ("classifier", "fit_intercept", "standardize"):
        value = getattr(args, dest, None)
        if value is not None:
            options[dest] = value
    said = command_defaults(options)
    if notes is not None:
        notes.extend(said)
    classifier = bool(options.pop("classifier", False))
    cls = RandomFeatureRidgeClassifier if classifier else RandomFeatureRidge
    valid = set(cls().get_params())
    unknown = set(options) - valid
    if unknown:
        raise InvalidParameterError(f"options {sorted(unknown)} do not apply to {cls.__name__}")
    return cls(**options)
