"""Reading text inputs safely: bounded lines, compressed streams, cells and missing markers.

Shared by the CSV and LIBSVM readers. A line is read with a length bound
(:data:`MAX_LINE_CHARS`), so a file without line breaks (or a binary file) is refused
after reading at most that many characters instead of being read whole.
"""

from __future__ import annotations

import bz2
import codecs
import gzip
import io
import zlib
from pathlib import Path

from ...errors import InputValidationError

#: longest line accepted, in characters (about a million numeric CSV columns)
MAX_LINE_CHARS = 16 * 2**20
#: characters of text held in one batch of lines (a batch ends early past this)
TEXT_BUDGET = 64 * 2**20
#: cells (stripped, lower-cased) that mean "no value"; "nan" is a number in numeric columns
MISSING_MARKERS = frozenset({"", "?", "na", "n/a", "nan", "null", "none"})
COMPRESSIONS = (".gz", ".bz2")

_MAGIC = [
    (b"\x93NUMPY", "a .npy array: pass format='npy'"),
    (b"PK\x03\x04", "a zip archive (.npz or zipped store): unzip it, or save one array with numpy.save"),
    (b"\x89HDF", "an HDF5 file: export its arrays to .npy or CSV"),
    (b"\x1f\x8b", "gzip-compressed: name it with a .gz suffix"),
    (b"BZh", "bzip2-compressed: name it with a .bz2 suffix"),
    (b"PAR1", "a Parquet file: export it to CSV or .npy"),
]


def sniff(src: Path) -> str | None:
    """What the first bytes of `src` say the file is, as a hint for an error message."""
    try:
        with open(src, "rb") as fh:
            head = fh.read(8)
    except OSError:
        return None
    for magic, what in _MAGIC:
        if head.startswith(magic):
            return what
    return None


def format_bytes(n: float) -> str:
    """``1.1 TiB``-style size."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def is_missing(cell: str) -> bool:
    """Whether a cell is empty or a missing-value marker (``NA``, ``?``, ``null``, ...)."""
    return cell.strip().lower() in MISSING_MARKERS


def to_float(cell: str) -> float | None:
    """Parse a cell as a float like numpy.loadtxt does; None if it is not a number."""
    cell = cell.strip()
    if not cell or "_" in cell:
        return None
    try:
        return float(cell)
    except ValueError:
        return None


def open_binary(src: Path):
    """Return (raw file, decompressed binary stream) for a possibly compressed file."""
    raw = open(src, "rb")  # noqa: SIM115 -- the caller closes it (LineReader.close)
    name = src.name.lower()
    try:
        if name.endswith(".gz"):
            return raw, gzip.GzipFile(fileobj=raw, mode="rb")
        if name.endswith(".bz2"):
            return raw, bz2.BZ2File(raw, mode="rb")
    except BaseException:
        raw.close()
        raise
    return raw, raw


def bad_utf8_line(src: Path, after: int) -> int:
    """The 1-based number of the first line that is not valid UTF-8 (at least `after` + 1).

    Read again from the start, in binary (only on the error path: the text decoder
    reads ahead, so the line it had reached is not the line of the bad bytes). Lines
    are counted at ``\\n``.
    """
    raw, stream = open_binary(src)
    decoder = codecs.getincrementaldecoder("utf-8")()
    number = 1
    try:
        while chunk := stream.readline(2**20):
            end = chunk.endswith(b"\n")
            try:
                decoder.decode(chunk, final=end)
            except UnicodeDecodeError:
                return max(number, after + 1)
            if end:
                number += 1
                decoder.reset()
    except (OSError, EOFError, zlib.error):
        pass
    finally:
        if stream is not raw:
            stream.close()
        raw.close()
    return after + 1


class LineReader:
    """Reads non-blank lines in batches, remembering their 1-based line numbers.

    Parameters
    ----------
    src : Path
        The file (``.gz``/``.bz2`` are decompressed on the fly).
    fmt : str
        The format it is read as, named in error messages.
    skip_comments : bool
        Also skip lines starting with ``#`` (LIBSVM).
    """

    def __init__(self, src: Path, fmt: str, *, skip_comments: bool = False):
        self.src = src
        self.fmt = fmt
        self.raw, stream = open_binary(src)
        self.text = io.TextIOWrapper(stream, encoding="utf-8-sig", newline=None)
        self.lineno = 0
        self.skip_comments = skip_comments

    def _not_text(self, why: str) -> InputValidationError:
        what = sniff(self.src)
        hint = f"; it looks like {what}" if what else ""
        return InputValidationError(
            f"{self.src} is not a text file ({why}), so it cannot be read as "
            f"{self.fmt}{hint}"
        )

    def _readline(self) -> str:
        try:
            line = self.text.readline(MAX_LINE_CHARS + 1)
        except UnicodeDecodeError as exc:
            # the decoder reads ahead: find the line that holds the bad bytes
            where = bad_utf8_line(self.src, self.lineno)
            raise self._not_text(f"line {where} is not valid UTF-8: {exc.reason}") from exc
        except (OSError, EOFError, zlib.error) as exc:  # corrupt or truncated gzip/bz2
            raise self._unreadable(exc) from exc
        if len(line) - line.endswith("\n") > MAX_LINE_CHARS:
            what = sniff(self.src)
            raise InputValidationError(
                f"{self.src}: line {self.lineno + 1} is longer than {MAX_LINE_CHARS:,} "
                f"characters; {self.fmt} text needs line breaks between rows (is the file "
                f"binary or in another format?{' It looks like ' + what if what else ''})"
            )
        if "\x00" in line:
            raise self._not_text(f"line {self.lineno + 1} contains a NUL byte")
        return line

    def _unreadable(self, exc: BaseException) -> InputValidationError:
        name = self.src.name.lower()
        if name.endswith(COMPRESSIONS):
            kind = "gzip" if name.endswith(".gz") else "bzip2"
            what = sniff(self.src)
            if what is None or not what.startswith(kind):
                return InputValidationError(
                    f"{self.src} is not a {kind} file ({exc}); if it is not compressed, "
                    f"drop the {name[name.rfind('.'):]} suffix"
                )
            where = f"past line {self.lineno}" if self.lineno else "from its start"
            return InputValidationError(
                f"{self.src}: the {kind} data is corrupt or truncated: it cannot be "
                f"decompressed {where} ({exc}); download or compress it again"
            )
        return InputValidationError(
            f"{self.src}: cannot read past line {self.lineno}: {exc}"
        )

    def read(self, n: int, max_chars: int = TEXT_BUDGET) -> tuple[list[str], list[int]]:
        """Up to `n` lines (fewer at the end or past `max_chars` characters, at least 1)."""
        lines: list[str] = []
        numbers: list[int] = []
        chars = 0
        while len(lines) < n and chars < max_chars:
            line = self._readline()
            if not line:
                break
            self.lineno += 1
            if line.isspace() or (self.skip_comments and line.lstrip().startswith("#")):
                continue
            lines.append(line)
            numbers.append(self.lineno)
            chars += len(line)
        return lines, numbers

    def bytes_read(self) -> int:
        return self.raw.tell()

    def close(self) -> None:
        self.text.close()
        self.raw.close()
