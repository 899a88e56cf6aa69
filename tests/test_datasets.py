"""Dataset loaders: cache, mirror and verified downloads from a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import dataclasses
import gzip
import http.server
import os
import socket
import threading
from pathlib import Path

import numpy as np
import pytest

from dkrr.datasets import DATASETS, data_path, fetch_file, file_sha256, load_dataset, mirror_dir
from dkrr.errors import ChecksumMismatchError, DatasetUnavailableError, InvalidParameterError

MAGIC = DATASETS["magic04"].files["data"]


@pytest.fixture(scope="module")
def magic_bytes() -> bytes:
    """The original magic04.data bytes, from the gzip copy shipped in dkrr/data."""
    with gzip.open(data_path("magic04.csv.gz"), "rb") as fh:
        return fh.read()


class _Server:
    """A real HTTP server on 127.0.0.1 serving ``self.body`` (optionally cut short)."""

    def __init__(self):
        self.body = b""
        self.claimed_length = None  # Content-Length to announce (default: len(body))
        self.requests = 0
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                server.requests += 1
                self.send_response(200)
                self.send_header("Content-Length", str(server.claimed_length or len(server.body)))
                self.end_headers()
                self.wfile.write(server.body)
                self.close_connection = True

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/magic04.data"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server(monkeypatch):
    """The server, and no offline mirror (the download path is under test)."""
    monkeypatch.delenv("DKRR_DATA_MIRROR", raising=False)
    s = _Server()
    yield s
    s.close()


def _leftovers(home: Path) -> list[str]:
    return sorted(p.name for p in home.rglob("*") if p.is_file())


def test_download_is_verified_cached_and_reused(server, magic_bytes, tmp_path):
    server.body = magic_bytes
    remote = dataclasses.replace(MAGIC, url=server.url)
    path = fetch_file(remote, data_home=tmp_path, progress=open(os.devnull, "w"))
    assert path == tmp_path / "magic04" / "magic04.data"
    assert file_sha256(path) == MAGIC.sha256  # the registry's recorded checksum
    assert _leftovers(tmp_path) == ["magic04.data"]
    server.close()  # no server any more: the cache answers
    assert fetch_file(remote, data_home=tmp_path) == path
    assert server.requests == 1


def test_wrong_bytes_are_refused_and_nothing_is_kept(server, magic_bytes, tmp_path):
    server.body = magic_bytes.replace(b"g\n", b"h\n", 1)
    remote = dataclasses.replace(MAGIC, url=server.url)
    with pytest.raises(ChecksumMismatchError, match="expected " + MAGIC.sha256):
        fetch_file(remote, data_home=tmp_path, progress=open(os.devnull, "w"))
    assert _leftovers(tmp_path) == []


def test_a_cut_transfer_leaves_no_partial_file(server, magic_bytes, tmp_path):
    server.body = magic_bytes[: len(magic_bytes) // 2]
    server.claimed_length = len(magic_bytes)
    remote = dataclasses.replace(MAGIC, url=server.url)
    with pytest.raises(DatasetUnavailableError, match="download of .* failed"):
        fetch_file(remote, data_home=tmp_path, progress=open(os.devnull, "w"))
    assert _leftovers(tmp_path) == []


def test_a_corrupted_cache_entry_is_fetched_again(server, magic_bytes, tmp_path):
    (tmp_path / "magic04").mkdir()
    (tmp_path / "magic04" / "magic04.data").write_bytes(b"not the data")
    server.body = magic_bytes
    remote = dataclasses.replace(MAGIC, url=server.url)
    path = fetch_file(remote, data_home=tmp_path, progress=open(os.devnull, "w"))
    assert path.read_bytes() == magic_bytes and server.requests == 1


def _closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/magic04.data"


def test_no_cache_no_mirror_no_network_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.delenv("DKRR_DATA_MIRROR", raising=False)
    remote = dataclasses.replace(MAGIC, url=_closed_port_url())
    with pytest.raises(DatasetUnavailableError) as err:
        fetch_file(remote, data_home=tmp_path, timeout=5)
    msg = str(err.value)
    assert str(tmp_path / "magic04" / "magic04.data") in msg  # where it looked
    assert "DKRR_DATA_MIRROR" in msg and MAGIC.sha256 in msg  # how to fix it
    assert isinstance(err.value, FileNotFoundError)


def test_mirror_is_read_in_place_and_checked(magic_bytes, tmp_path, monkeypatch):
    mirror = tmp_path / "mirror"
    (mirror / "magic04").mkdir(parents=True)
    (mirror / "magic04" / "magic04.data").write_bytes(magic_bytes)
    monkeypatch.setenv("DKRR_DATA_MIRROR", str(mirror))
    home = tmp_path / "cache"
    X, y = load_dataset("magic04", data_home=home, download=False)
    assert X.shape == (19020, 10) and sorted(np.unique(y)) == ["g", "h"]
    assert not home.exists()  # nothing copied into the cache
    (mirror / "magic04" / "magic04.data").write_bytes(magic_bytes[:-10])
    with pytest.raises(ChecksumMismatchError, match="mirror"):
        load_dataset("magic04", data_home=home, download=False)


def test_cod_rna_has_no_download_and_says_so(tmp_path, monkeypatch):
    monkeypatch.delenv("DKRR_DATA_MIRROR", raising=False)
    with pytest.raises(DatasetUnavailableError, match="no public download"):
        load_dataset("cod_rna", data_home=tmp_path)


def test_unknown_names_and_parts(tmp_path):
    with pytest.raises(InvalidParameterError, match="unknown dataset 'nope'.*casp"):
        load_dataset("nope", data_home=tmp_path)
    with pytest.raises(InvalidParameterError, match="parts .*'train'"):
        load_dataset("cod_rna", part="validation", data_home=tmp_path)


EXPECTED = {
    "casp": ((45730, 9), 15903),
    "magic04": ((19020, 10), 2),
    "letter": ((20000, 16), 26),
    "eeg_eye_state": ((14980, 14), 2),
    "usps": ((2007, 256), 10),
    "cod_rna": ((59535, 8), 2),
    "cal_housing": ((20640, 8), None),
    "cpu_small": ((8192, 12), None),
    "kin8nm": ((8192, 8), None),
    "abalone": ((4177, 10), None),
    "elevators": ((16599, 18), None),
    "ailerons": ((13750, 40), None),
}


@pytest.mark.skipif(mirror_dir() is None, reason="no offline data mirror (set DKRR_DATA_MIRROR to a folder of the data copies)")
@pytest.mark.parametrize("name", sorted(DATASETS))
def test_every_registered_file_matches_the_mirror(name, tmp_path):
    assert set(EXPECTED) == set(DATASETS)
    X, y = load_dataset(name, data_home=tmp_path, download=False)
    shape, n_unique = EXPECTED[name]
    assert X.shape == shape and X.dtype == np.float64 and y.shape == (shape[0],)
    assert np.isfinite(X).all()
    if n_unique is not None:
        assert np.unique(y).size == n_unique
