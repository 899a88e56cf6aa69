"""Reading text inputs safely: bounded lines, compressed streams, cells and missing markers.

Shared by the CSV and LIBSVM readers. :class:`LineReader` (LIBSVM) reads one line at a
time with a length bound (:data:`MAX_LINE_CHARS`); :class:`BlockReader` (CSV) reads
blocks of whole lines as bytes for pyarrow's parser, keeping the line numbers, and
refuses a line longer than :data:`MAX_LINE_CHARS` bytes without a line break. Either
way a file without line breaks (or a binary file) is refused after reading at most that
much instead of being read whole.
"""

from __future__ import annotations

import bz2
import codecs
import gzip
import io
import zlib
from pathlib import Path

import numpy as np

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
        return not_text(self.src, self.fmt, why)

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
            raise too_long(self.src, self.fmt, self.lineno + 1, "characters")
        if "\x00" in line:
            raise self._not_text(f"line {self.lineno + 1} contains a NUL byte")
        return line

    def _unreadable(self, exc: BaseException) -> InputValidationError:
        return unreadable(self.src, self.lineno, exc)

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


def not_text(src: Path, fmt: str, why: str) -> InputValidationError:
    """The error for a file that is not text (`why`: what was found, and where)."""
    what = sniff(src)
    hint = f"; it looks like {what}" if what else ""
    return InputValidationError(
        f"{src} is not a text file ({why}), so it cannot be read as {fmt}{hint}"
    )


def too_long(src: Path, fmt: str, line: int, unit: str) -> InputValidationError:
    """The error for a line over :data:`MAX_LINE_CHARS` (`unit`: characters or bytes)."""
    what = sniff(src)
    return InputValidationError(
        f"{src}: line {line} is longer than {MAX_LINE_CHARS:,} {unit}; {fmt} text needs "
        f"line breaks between rows (is the file binary or in another format?"
        f"{' It looks like ' + what if what else ''})"
    )


def unreadable(src: Path, lines_read: int, exc: BaseException) -> InputValidationError:
    """The error for a read that fails after `lines_read` lines: a corrupt or truncated
    ``.gz``/``.bz2`` stream, a file that is not compressed as its suffix says, or an
    I/O error."""
    name = src.name.lower()
    if name.endswith(COMPRESSIONS):
        kind = "gzip" if name.endswith(".gz") else "bzip2"
        what = sniff(src)
        if what is None or not what.startswith(kind):
            return InputValidationError(
                f"{src} is not a {kind} file ({exc}); if it is not compressed, "
                f"drop the {name[name.rfind('.'):]} suffix"
            )
        where = f"past line {lines_read}" if lines_read else "from its start"
        return InputValidationError(
            f"{src}: the {kind} data is corrupt or truncated: it cannot be "
            f"decompressed {where} ({exc}); download or compress it again"
        )
    return InputValidationError(f"{src}: cannot read past line {lines_read}: {exc}")


def check_text(src: Path, fmt: str, data, first_line: int) -> int:
    """Refuse a block of lines (bytes-like) holding a NUL byte or bytes that are not UTF-8,
    naming the line (`first_line`: the number of the block's first line); return the
    number of line breaks in it. ASCII blocks, the common case, cost three vectorised
    scans."""
    x = np.frombuffer(data, dtype=np.uint8)
    breaks = int(np.count_nonzero(x == 10))
    if not x.size or (x.min() > 0 and x.max() < 128):
        return breaks
    nul = np.flatnonzero(x == 0)
    if nul.size:
        line = first_line + int(np.count_nonzero(x[: nul[0]] == 10))
        raise not_text(src, fmt, f"line {line} contains a NUL byte")
    try:
        bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        line = first_line + int(np.count_nonzero(x[: exc.start] == 10))
        raise not_text(src, fmt, f"line {line} is not valid UTF-8: {exc.reason}") from None
    return breaks


def _last_break(buf: np.ndarray, start: int, stop: int) -> int:
    """The index of the last ``\\n`` in ``buf[start:stop]``, or -1."""
    window = 4096
    while True:
        lo = max(start, stop - window)
        hits = np.flatnonzero(buf[lo:stop] == 10)
        if hits.size:
            return lo + int(hits[-1])
        if lo == start:
            return -1
        stop, window = lo, window * 16


class BlockReader:
    """Reads a text file in blocks of whole lines, numbering the lines.

    A block ends at a line break (the file's last line may lack one); each block is
    checked with :func:`check_text`. A line longer than :data:`MAX_LINE_CHARS` bytes is
    refused once that many bytes are read without a line break, so memory stays bounded
    whatever the input. Lines are counted at ``\\n`` (``\\r\\n`` counts once). Each block
    is read into its own buffer (one copy from the file) and returned as a memoryview.

    Parameters
    ----------
    src : Path
        The file (``.gz``/``.bz2`` are decompressed on the fly).
    fmt : str
        The format it is read as, named in error messages.
    start, end : int
        Offsets in the (decompressed) bytes: read ``[start, end)``; ``end`` None reads to
        the end. ``start`` must be 0 or the start of a line. A compressed stream is read
        from its beginning and the bytes before ``start`` are skipped.
    first_line : int
        The number of the line at ``start`` (1-based).
    """

    def __init__(self, src: Path, fmt: str, *, start: int = 0, end: int | None = None,
                 first_line: int = 1):
        self.src = src
        self.fmt = fmt
        self.raw, self.stream = open_binary(src)
        self.pos = 0
        self.end = end
        self.line = first_line
        self.carry = b""
        try:
            if start and self.stream is self.raw:
                self.raw.seek(start)
                self.pos = start
            while self.pos < start:
                skipped = self.stream.read(min(start - self.pos, 2**20))
                if not skipped:
                    break
                self.pos += len(skipped)
        except (OSError, EOFError, zlib.error) as exc:
            self.close()
            raise unreadable(src, 0, exc) from exc
        except BaseException:
            self.close()
            raise

    def _readinto(self, view: memoryview) -> int:
        n = len(view)
        if self.end is not None:
            n = min(n, self.end - self.pos)
        if self.stream is not self.raw:
            n = min(n, 2**16)  # small reads: the data before a truncation is not lost
        if n <= 0:
            return 0
        got = self.stream.readinto(view[:n])  # OSError, EOFError, zlib.error: see read()
        self.pos += got
        return got

    def read(self, size: int) -> tuple[memoryview, int, int]:
        """About `size` bytes of whole lines (more when a line is longer), the number of
        their first line and their number of lines; an empty block at the end."""
        at_start = self.pos == 0
        buf = np.empty(max(size, len(self.carry)) + 2**16, dtype=np.uint8)  # not zeroed
        n = tail = len(self.carry)  # tail: bytes since the last line break
        buf[:n] = np.frombuffer(self.carry, dtype=np.uint8)
        self.carry = b""
        cut = None
        while True:
            if n == buf.size:
                buf = np.concatenate([buf, np.empty(buf.size, dtype=np.uint8)])
            try:
                got = self._readinto(memoryview(buf)[n:])
            except (OSError, EOFError, zlib.error) as exc:  # corrupt or truncated gzip/bz2
                lines = self.line - 1 + int(np.count_nonzero(buf[:n] == 10))
                raise unreadable(self.src, lines, exc) from exc
            if not got:
                break
            nl = _last_break(buf, n, n + got)
            n += got
            tail = tail + got if nl < 0 else n - nl - 1
            if tail > MAX_LINE_CHARS:
                line = self.line + int(np.count_nonzero(buf[:n] == 10))
                raise too_long(self.src, self.fmt, line, "bytes")
            if n >= size and nl >= 0:
                cut = n - tail
                break
        if cut is not None and cut < n:
            self.carry = buf[cut:n].tobytes()
        data = memoryview(buf)[: n if cut is None else cut]
        if at_start and data[:3] == b"\xef\xbb\xbf":  # a UTF-8 byte order mark
            data = data[3:]
        first = self.line
        breaks = check_text(self.src, self.fmt, data, first)
        self.line += breaks
        return data, first, breaks + (1 if len(data) and data[-1] != 10 else 0)

    def bytes_read(self) -> int:
        """Bytes of the file read so far (compressed bytes for ``.gz``/``.bz2``)."""
        return self.raw.tell()

    def close(self) -> None:
        if self.stream is not self.raw:
            self.stream.close()
        self.raw.close()
