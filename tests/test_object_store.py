"""Object stores: every store and model path is also an fsspec URL (``s3://bucket/key``).

Against a real S3-compatible server: moto in server mode, started by this module on
127.0.0.1 with IAM authentication on (a user with an access key; a wrong key is refused as
S3 refuses it). A second server on the same data stands in for a store that goes away: it
is stopped mid-read or mid-write while the first one stays up to inspect what was left.
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import subprocess
import sys
import urllib.request
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

moto_server = pytest.importorskip("moto.server")
s3fs = pytest.importorskip("s3fs")

from dkrr import RandomFeatureRidge  # noqa: E402
from dkrr.cli import main  # noqa: E402
from dkrr.errors import (  # noqa: E402
    InvalidParameterError,
    ModelFormatError,
    ObjectStoreError,
    OutputBusyError,
    OutputExistsError,
    OutputNotWritableError,
    StoreError,
    StoreNotFoundError,
)
from dkrr.io import atomic_output, ingest, open_dataset, write_dataset, write_predictions  # noqa: E402
from dkrr.io._model import load_model, save_model  # noqa: E402


def _set_auth(endpoint: str, count: str) -> None:
    """moto's switch for IAM authentication: on after `count` more requests ("inf": off)."""
    request = urllib.request.Request(f"{endpoint}/moto-api/reset-auth", data=count.encode(),
                                     method="POST", headers={"Content-Type": "text/plain"})
    urllib.request.urlopen(request, timeout=10).read()


def _start(port: int = 0):
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    return server, f"http://{host}:{port}"


@dataclass
class S3:
    endpoint: str
    key: str
    secret: str

    def options(self, endpoint: str | None = None, **extra: Any) -> dict:
        """Storage options for this server (one retry: a dead server fails fast)."""
        return {"endpoint_url": endpoint or self.endpoint, "key": self.key, "secret": self.secret,
                "config_kwargs": {"retries": {"max_attempts": 1}}, **extra}

    def fs(self, endpoint: str | None = None):
        fs = s3fs.S3FileSystem(**self.options(endpoint))
        fs.invalidate_cache()
        return fs


@pytest.fixture(scope="module")
def s3():
    """A real S3 server on 127.0.0.1 requiring the credentials of an IAM user."""
    import boto3

    saved = {k: os.environ.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                                            "AWS_DEFAULT_REGION", "AWS_EC2_METADATA_DISABLED")}
    os.environ.update(AWS_ACCESS_KEY_ID="bootstrap", AWS_SECRET_ACCESS_KEY="bootstrap",
                      AWS_DEFAULT_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server, endpoint = _start()
    try:
        iam = boto3.client("iam", endpoint_url=endpoint)
        iam.create_user(UserName="dkrr")
        iam.put_user_policy(UserName="dkrr", PolicyName="s3", PolicyDocument=json.dumps({
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}))
        key = iam.create_access_key(UserName="dkrr")["AccessKey"]
        _set_auth(endpoint, "0")
        yield S3(endpoint, key["AccessKeyId"], key["SecretAccessKey"])
        _set_auth(endpoint, "inf")
    finally:
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture
def bucket(s3):
    name = f"dkrr-{secrets.token_hex(6)}"
    fs = s3.fs()
    fs.mkdir(name)
    yield name
    fs.rm(name, recursive=True)


@pytest.fixture
def dying(s3):
    """A second server on the same data (moto keeps it in this process), to be stopped."""
    server, endpoint = _start()
    yield server, endpoint
    server.stop()


def _keys(s3, bucket) -> list[str]:
    fs = s3.fs()
    fs.invalidate_cache()
    return sorted(k.split("/", 1)[1] for k in fs.find(bucket))


def _csv(tmp_path, n=400):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 5))
    y = np.sin(X[:, 0]) + X[:, 1] * X[:, 2] + 0.1 * rng.normal(size=n)
    path = tmp_path / "data.csv"
    np.savetxt(path, np.c_[X, y], delimiter=",", header="a,b,c,d,e,t", comments="", fmt="%.8g")
    return path


def _estimator():
    return RandomFeatureRidge(n_components=32, alpha=1.0, random_state=0)


# ------------------------------------------------------------------ round trips


def test_python_round_trip_through_s3_equals_the_local_one(s3, bucket, tmp_path, local_cluster):
    import dask
    import dask.array as da
    import distributed
    import zarr
    from packaging.version import Version

    so = s3.options()
    csv = _csv(tmp_path)
    url = f"s3://{bucket}/data.zarr"
    summary = ingest(csv, url, target="t", chunk_rows=100, storage_options=so)
    ingest(csv, tmp_path / "data.zarr", target="t", chunk_rows=100)
    assert summary.path == url and summary.n_rows == 400
    remote = open_dataset(url, storage_options=so)
    local = open_dataset(tmp_path / "data.zarr")
    assert remote.path == url and remote.X.chunks == local.X.chunks
    assert remote.feature_names == ["a", "b", "c", "d", "e"]
    # a test file read the way the store in the bucket was (--like a URL)
    like = ingest(_csv(tmp_path, 30), f"s3://{bucket}/test.zarr", like=url, storage_options=so)
    assert like.feature_names == summary.feature_names and like.n_rows == 30
    with distributed.Client(local_cluster) as client:
        # the workers read their blocks from S3 themselves: the task carries the store
        est = _estimator().fit(remote.X, remote.y)
        opened = client.run(lambda: len(sys.modules["s3fs"].S3FileSystem._cache)
                            if "s3fs" in sys.modules else 0)
        assert all(n > 0 for n in opened.values()), opened
        ref = _estimator().fit(local.X, local.y)
        np.testing.assert_array_equal(est.coef_, ref.coef_)
        # da.from_zarr on a URL is an input like any other (dask >= 2025.1; before, its
        # from_zarr built a Zarr-2 FSStore: open the array with zarr, as the README says)
        # (dask's array query planning has no from_zarr: a zarr array is wrapped by from_array)
        if Version(dask.__version__) >= Version("2025.1.0") and not dask.config.get("array.query-planning", False):
            X = da.from_zarr(url, component="X", storage_options=so)
            y = da.from_zarr(url, component="y", storage_options=so)
        else:
            group = zarr.open_group(url, mode="r", storage_options=so)
            X, y = (da.from_array(group[k], chunks=group[k].chunks) for k in ("X", "y"))
        np.testing.assert_array_equal(_estimator().fit(X, y).coef_, ref.coef_)
        out = write_predictions(est.predict(remote.X), f"s3://{bucket}/pred.zarr", storage_options=so,
                                inputs=[url])
    assert out == f"s3://{bucket}/pred.zarr"
    y_pred = zarr.open_group(out, mode="r", storage_options=so)["y_pred"][:]
    np.testing.assert_array_equal(y_pred, ref.predict(local.X.compute()))
    assert save_model(est, f"s3://{bucket}/models/m", storage_options=so) == f"s3://{bucket}/models/m"
    back = load_model(f"s3://{bucket}/models/m", storage_options=so)
    np.testing.assert_array_equal(back.predict(local.X.compute()), ref.predict(local.X.compute()))
    # nothing but the outputs: no lock, marker or temporary objects left
    keys = _keys(s3, bucket)
    assert not [k for k in keys if k.split("/")[0].startswith(".")], keys
    assert sorted({k.split("/")[0] for k in keys}) == ["data.zarr", "models", "pred.zarr", "test.zarr"]


def test_cli_round_trip_through_s3_equals_the_local_one(s3, bucket, tmp_path, capsys, local_cluster):
    import zarr

    csv = _csv(tmp_path)
    so = json.dumps(s3.options())
    run = ["--scheduler", local_cluster.scheduler_address, "-q"]
    remote = {"data": f"s3://{bucket}/d.zarr", "model": f"s3://{bucket}/m.model",
              "pred": f"s3://{bucket}/p.zarr"}
    local = {k: str(tmp_path / v.rsplit("/", 1)[1]) for k, v in remote.items()}
    outputs = {}
    for paths, options in ((remote, ["--storage-options", so]), (local, [])):
        assert main(["ingest", str(csv), "--out", paths["data"], "--target", "t", "--chunk-rows", "100",
                     "-q", *options]) == 0
        assert main(["fit", paths["data"], "--out", paths["model"], "--n-components", "32", "--cv", "2",
                     "--gammas", "none", "--json", *run, *options]) == 0
        fit = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert main(["predict", paths["model"], paths["data"], "--out", paths["pred"], *run, *options]) == 0
        assert main(["evaluate", paths["model"], paths["data"], "--json", *run, *options]) == 0
        metrics = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        outputs[paths is remote] = (fit, metrics)
    (fit_r, metrics_r), (fit_l, metrics_l) = outputs[True], outputs[False]
    assert fit_r["model"] == remote["model"]
    # solver_reason quotes this machine's free memory at the moment of each fit: compare it
    # without its numbers
    varying = ("model", "fit_seconds", "solver_reason")
    assert {k: v for k, v in fit_r.items() if k not in varying} == \
        {k: v for k, v in fit_l.items() if k not in varying}
    assert re.sub(r"[0-9.]+", "#", fit_r["solver_reason"]) == re.sub(r"[0-9.]+", "#", fit_l["solver_reason"])
    assert metrics_r == metrics_l
    group = zarr.open_group(remote["pred"], mode="r", storage_options=s3.options())
    np.testing.assert_array_equal(group["y_pred"][:], zarr.open_group(local["pred"], mode="r")["y_pred"][:])
    assert group.attrs["model"] == remote["model"] and group.attrs["source"] == remote["data"]
    np.testing.assert_array_equal(load_model(remote["model"], storage_options=s3.options()).coef_,
                                  load_model(local["model"]).coef_)


def test_environment_credentials_are_used(s3, bucket, tmp_path, monkeypatch):
    # no key in the storage options: the usual AWS_* variables (passed through to s3fs)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3.key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3.secret)
    so = json.dumps({"endpoint_url": s3.endpoint})
    url = f"s3://{bucket}/env.zarr"
    assert main(["ingest", str(_csv(tmp_path, 50)), "--out", url, "--target", "t", "-q",
                 "--storage-options", so]) == 0
    assert open_dataset(url, storage_options=json.loads(so)).n_samples == 50


def test_memory_and_file_urls(tmp_path):
    import dask

    X = np.arange(40.0).reshape(20, 2)
    y = X.sum(axis=1)
    url = f"memory://dkrr-{secrets.token_hex(4)}/d.zarr"
    with dask.config.set(scheduler="threads"):
        write_dataset(X, y, url)
        ds = open_dataset(url)
        np.testing.assert_array_equal(ds.X.compute(), X)
        est = _estimator().fit(ds.X, ds.y)
        save_model(est, url.replace("d.zarr", "m"))
        np.testing.assert_array_equal(load_model(url.replace("d.zarr", "m")).coef_, est.coef_)
    # file:// names a local path, handled as one (atomic rename, flock)
    out = write_dataset(X, y, f"file://{tmp_path}/f.zarr")
    assert out == str(tmp_path / "f.zarr") and open_dataset(tmp_path / "f.zarr").n_samples == 20


def test_a_memory_store_is_refused_where_worker_processes_would_miss_it(local_cluster):
    import dask.array as da
    import distributed

    url = f"memory://dkrr-{secrets.token_hex(4)}/d.zarr"
    write_dataset(np.arange(40.0).reshape(20, 2), np.ones(20), url)
    ds = open_dataset(url)
    with distributed.Client(local_cluster):
        # each worker process has its own (empty) memory: never zeros read, never a
        # store committed without its blocks
        with pytest.raises(StoreError, match=r"is a memory:// store, which lives in the process"):
            ds.X.sum().compute()
        with pytest.raises(StoreError, match=r"blocks written to memory://.* are not all there \(a memory"):
            write_predictions(da.ones(20, chunks=5), url.replace("d.zarr", "p.zarr"))
    import fsspec

    assert not fsspec.filesystem("memory").exists(url.replace("d.zarr", "p.zarr"))


@pytest.mark.parametrize("url, message", [
    ("gs://bucket/d.zarr", r"gs://.* not installed: .*gcsfs"),
    ("az://container/d.zarr", r"az://.* not installed: .*adlfs"),
    ("https://host/d.zarr", r"HTTPS URL: dkrr reads and writes stores it can list and write"),
    ("nosuch://b/d.zarr", r"unknown scheme nosuch://"),
    ("s3://bucket", r"names a bucket, not a store in it"),
    # a script's s3://bucket/$DIR/d.zarr with DIR empty: the store was written under the
    # key "/d.zarr", its commit then found "nothing written" and left it there, unmarked
    ("s3://bucket//d.zarr", r"has an empty path segment"),
    ("s3:///bucket/d.zarr", r"has an empty path segment"),
    ("s3://bucket/a//d.zarr", r"has an empty path segment"),
])
def test_urls_dkrr_cannot_use_are_refused_with_the_fix(tmp_path, url, message):
    calls = [lambda: open_dataset(url), lambda: write_dataset(np.ones((4, 2)), np.ones(4), url),
             lambda: load_model(url), lambda: atomic_output(url).__enter__()]
    for call in calls:
        with pytest.raises(InvalidParameterError, match=message):
            call()
    assert main(["ingest", str(_csv(tmp_path, 10)), "--out", url, "--target", "t", "-q"]) == 1


def test_an_upper_case_scheme_is_the_scheme(s3, bucket):
    """S3://bucket/key is s3://bucket/key (a URL's scheme is case-insensitive): it was
    read as the bucket "S3:"."""
    so = s3.options()
    write_dataset(np.arange(8.0).reshape(4, 2), np.ones(4), f"S3://{bucket}/d.zarr", storage_options=so)
    assert _keys(s3, bucket)[0].startswith("d.zarr/")
    np.testing.assert_array_equal(open_dataset(f"s3://{bucket}/d.zarr", storage_options=so).X.compute(),
                                  np.arange(8.0).reshape(4, 2))


def test_storage_options_the_filesystem_refuses_are_one_line(s3, bucket, tmp_path, capsys):
    """s3fs builds its client at the first request: an endpoint without http:// or an
    unknown option was a 40-line TypeError/ValueError traceback, mid-command."""
    data = f"s3://{bucket}/d.zarr"
    write_dataset(np.ones((4, 2)), np.ones(4), data, storage_options=s3.options())
    for options, message in [({"endpoint_url": s3.endpoint.removeprefix("http://")},
                              r"Invalid endpoint: .*endpoint_url takes a scheme: http://host:port"),
                             ({"bogus": 1}, "unexpected keyword argument 'bogus'"),
                             ({"config_kwargs": {"retry": 1}}, "unexpected keyword argument 'retry'")]:
        so = {**s3.options(), **options}
        with pytest.raises(InvalidParameterError, match=rf"the s3:// filesystem refused the storage options .*{message}"):
            open_dataset(data, storage_options=so)
        code = main(["ingest", str(_csv(tmp_path, 10)), "--out", f"s3://{bucket}/new.zarr", "--target", "t",
                     "--storage-options", json.dumps(so), "-q"])
        err = capsys.readouterr().err
        assert code == 1 and "refused the storage options" in err and "Traceback" not in err, err
    assert _keys(s3, bucket) == sorted(k for k in _keys(s3, bucket) if k.startswith("d.zarr/"))


def test_the_like_store_on_s3_is_an_input_of_ingest(s3, bucket, tmp_path, capsys):
    """ingest --like URL --out URL --overwrite replaced the training store (its y lost)."""
    so = s3.options()
    train = f"s3://{bucket}/train.zarr"
    ingest(_csv(tmp_path), train, target="t", storage_options=so)
    before = {k: s3.fs().cat_file(f"{bucket}/{k}") for k in _keys(s3, bucket)}
    test_csv = tmp_path / "test.csv"
    test_csv.write_text("\n".join(",".join(line.split(",")[:5]) for line in _csv(tmp_path).read_text().splitlines()))
    with pytest.raises(OutputExistsError, match=f"refusing to write {train}: it is an input of this command"):
        ingest(test_csv, train, target=[], like=train, overwrite=True, storage_options=so)
    code = main(["ingest", str(test_csv), "--out", train, "--no-target", "--like", train, "--overwrite",
                 "--storage-options", json.dumps(so), "-q"])
    err = capsys.readouterr().err
    assert code == 1 and "it is an input of this command" in err, err
    assert {k: s3.fs().cat_file(f"{bucket}/{k}") for k in _keys(s3, bucket)} == before


def test_ingest_reads_a_local_file_only(tmp_path, s3, bucket):
    with pytest.raises(InvalidParameterError, match="ingest reads a local file"):
        ingest(f"s3://{bucket}/d.csv", tmp_path / "d.zarr", storage_options=s3.options())


# ------------------------------------------------------------------ failures


def test_a_missing_bucket_is_named_and_nothing_is_created(s3, tmp_path, capsys):
    so = s3.options()
    url = "s3://no-such-bucket-dkrr/d.zarr"
    with pytest.raises(StoreNotFoundError, match=r"s3://no-such-bucket-dkrr/d.zarr does not exist: "
                                                 r"the bucket 'no-such-bucket-dkrr' does not exist"):
        open_dataset(url, storage_options=so)
    with pytest.raises(ModelFormatError, match="the bucket 'no-such-bucket-dkrr' does not exist"):
        load_model("s3://no-such-bucket-dkrr/m", storage_options=so)
    with pytest.raises(OutputNotWritableError, match=r"cannot write s3://no-such-bucket-dkrr/d.zarr: "
                                                     r"the bucket does not exist"):
        ingest(_csv(tmp_path, 20), url, target="t", storage_options=so)
    code = main(["fit", str(tmp_path / "x.zarr"), "--out", "s3://no-such-bucket-dkrr/m",
                 "--storage-options", json.dumps(so), "--scheduler", "tcp://127.0.0.1:9"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1 and "the bucket does not exist" in err[0], err
    assert not s3.fs().exists("no-such-bucket-dkrr")


def test_bad_credentials_are_refused_clearly_and_leave_nothing(s3, bucket, tmp_path, capsys):
    good = s3.options()
    url = f"s3://{bucket}/d.zarr"
    write_dataset(np.ones((8, 2)), np.ones(8), url, storage_options=good)
    before = _keys(s3, bucket)
    bad = {**good, "key": "AKIAWRONGWRONGWRONG0", "secret": "nope"}
    with pytest.raises(ObjectStoreError, match=rf"cannot read {url}: access denied .*check the credentials"):
        open_dataset(url, storage_options=bad)
    with pytest.raises(OutputNotWritableError, match=rf"cannot write s3://{bucket}/e.zarr: access denied"):
        ingest(_csv(tmp_path, 20), f"s3://{bucket}/e.zarr", target="t", storage_options=bad)
    with pytest.raises(ObjectStoreError, match=r"access denied"):
        load_model(f"s3://{bucket}/m", storage_options=bad)
    save_model(_estimator().fit(np.ones((8, 2)), np.ones(8)), tmp_path / "m")
    code = main(["predict", str(tmp_path / "m"), url, "--out", str(tmp_path / "p.zarr"),
                 "--storage-options", json.dumps(bad), "--scheduler", "tcp://127.0.0.1:9"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1 and "access denied" in err[0], err
    assert _keys(s3, bucket) == before and not (tmp_path / "p.zarr").exists()


def test_a_server_that_dies_mid_read_is_a_clear_error_and_leaves_no_output(s3, bucket, dying):
    import dask

    server, endpoint = dying
    url = f"s3://{bucket}/d.zarr"
    rng = np.random.default_rng(1)
    import dask.array as da

    write_dataset(da.from_array(rng.normal(size=(400, 3)), chunks=(100, 3)), rng.normal(size=400), url,
                  storage_options=s3.options())
    est = _estimator().fit(rng.normal(size=(50, 3)), rng.normal(size=50))
    with dask.config.set(scheduler="threads"):
        ds = open_dataset(url, storage_options=s3.options(endpoint))  # through the second server
        assert ds.X.numblocks[0] > 1 and ds.X[:100].compute().shape == (100, 3)  # a first block read
        server.stop()  # the store goes away after the first reads
        with pytest.raises(ObjectStoreError, match=rf"cannot read rows .* of array 'X' of {url}: the "
                                                   r"object store cannot be reached"):
            write_predictions(est.predict(ds.X), f"s3://{bucket}/p.zarr", storage_options=s3.options())
        with pytest.raises(ObjectStoreError, match=rf"of {url}: the object store cannot be reached"):
            _estimator().fit(ds.X, ds.y)
    assert [k for k in _keys(s3, bucket) if not k.startswith("d.zarr/")] == []


def test_a_server_that_dies_mid_write_leaves_an_output_readers_refuse(s3, bucket, dying):
    import dask
    from dask.callbacks import Callback

    server, endpoint = dying
    url = f"s3://{bucket}/p.zarr"
    writes = []

    class StopAfterFirstBlock(Callback):
        def _posttask(self, key, result, dsk, state, id):
            name = key[0] if isinstance(key, tuple) else key
            # the write tasks (dkrr.io._drain.store_tasks): dkrr-store-<token>, or named by
            # dask after its block_info wrapper with dask's array query planning
            if str(name).startswith(("dkrr-store-", "pass_extra_kwargs-")) and not writes:
                writes.append(key)
                server.stop()

    y_pred = np.arange(400.0)
    with dask.config.set(scheduler="sync"), StopAfterFirstBlock(), pytest.raises(
            ObjectStoreError, match=rf"{url}: the object store cannot be reached"):
        import dask.array as da

        write_predictions(da.from_array(y_pred, chunks=100), url, storage_options=s3.options(endpoint))
    keys = _keys(s3, bucket)
    assert ".p.zarr.incomplete" in keys and any(k.startswith("p.zarr/") for k in keys), keys
    # a reader refuses it, saying why
    with pytest.raises(StoreError, match=rf"Zarr store {url} is incomplete: a dkrr run \(pid {os.getpid()}"):
        open_dataset(url, require_y=False, storage_options=s3.options())
    # without --overwrite the remains are kept; with it they are replaced (the lock left
    # by this process's failed write is known to be free)
    with pytest.raises(OutputExistsError, match="exists already"):
        write_predictions(y_pred, url, storage_options=s3.options())
    write_predictions(y_pred, url, overwrite=True, storage_options=s3.options())
    import zarr

    np.testing.assert_array_equal(zarr.open_group(url, mode="r", storage_options=s3.options())["y_pred"][:],
                                  y_pred)
    assert not [k for k in _keys(s3, bucket) if k.startswith(".")], _keys(s3, bucket)


def test_a_failed_write_leaves_nothing_and_a_failed_replacement_the_old_output(s3, bucket, tmp_path):
    import dask
    import dask.array as da

    so = s3.options()
    url = f"s3://{bucket}/d.zarr"

    def failing(block):
        if block[0, 0] >= 200:
            raise RuntimeError("boom in block 2")
        return block

    X = da.from_array(np.arange(800.0).reshape(400, 2), chunks=(100, 2)).map_blocks(failing)
    bad = tmp_path / "bad.csv"  # ingest writes from this process: a bad cell in the third chunk
    bad.write_text("a,t\n" + "".join(f"{i},{i}\n" for i in range(250)) + "x,1\n")
    from dkrr.errors import InputValidationError

    with pytest.raises(InputValidationError, match="line 252"):
        ingest(bad, url, target="t", chunk_rows=100, storage_options=so)
    assert _keys(s3, bucket) == []
    with dask.config.set(scheduler="threads"):
        with pytest.raises(RuntimeError, match="boom"):
            write_dataset(X, np.ones(400), url, storage_options=so)
        assert _keys(s3, bucket) == []
        write_dataset(np.ones((10, 2)), np.zeros(10), url, storage_options=so)
        before = _keys(s3, bucket)
        with pytest.raises(RuntimeError, match="boom"):
            write_dataset(X, np.ones(400), url, overwrite=True, storage_options=so)
        assert _keys(s3, bucket) == before
        assert open_dataset(url, storage_options=so).n_samples == 10
        write_dataset(np.ones((30, 2)), np.zeros(30), url, overwrite=True, storage_options=so)
        assert open_dataset(url, storage_options=so).n_samples == 30
    assert not [k for k in _keys(s3, bucket) if k.startswith(".")]


def test_overwrite_replaces_only_dkrr_outputs_of_the_same_kind(s3, bucket, tmp_path):
    so = s3.options()
    fs = s3.fs()
    est = _estimator().fit(np.ones((8, 2)) * np.arange(8)[:, None], np.arange(8.0))
    data, model = f"s3://{bucket}/d.zarr", f"s3://{bucket}/m"
    write_dataset(np.ones((8, 2)), np.ones(8), data, storage_options=so)
    save_model(est, model, storage_options=so)
    fs.pipe_file(f"{bucket}/plain.txt", b"not ours")
    fs.pipe_file(f"{bucket}/folder/notes.txt", b"not ours")
    import zarr

    zarr.open_group(f"s3://{bucket}/other.zarr", mode="w-", storage_options=so).create_array(
        "X", shape=(4, 2), dtype="f8")
    with pytest.raises(OutputExistsError, match="exists already"):
        save_model(est, model, storage_options=so)
    cases = [
        (lambda u: save_model(est, u, overwrite=True, storage_options=so), data, "not a dkrr model directory"),
        (lambda u: write_dataset(np.ones((4, 2)), None, u, overwrite=True, storage_options=so), model,
         "not a Zarr store"),
        (lambda u: write_predictions(np.ones(4), u, overwrite=True, storage_options=so), data,
         "predictions replace only predictions"),
        (lambda u: ingest(_csv(tmp_path, 10), u, target="t", overwrite=True, storage_options=so),
         f"s3://{bucket}/plain.txt", "an object \\(a file\\)"),
        (lambda u: save_model(est, u, overwrite=True, storage_options=so), f"s3://{bucket}/folder",
         "not a dkrr model directory \\(no model.json\\)"),
        (lambda u: write_dataset(np.ones((4, 2)), None, u, overwrite=True, storage_options=so),
         f"s3://{bucket}/other.zarr", "no dkrr_layout attribute"),
    ]
    before = _keys(s3, bucket)
    for write, url, reason in cases:
        with pytest.raises(OutputExistsError, match=rf"refusing to overwrite {url}: .*{reason}"):
            write(url)
    assert _keys(s3, bucket) == before
    # a file dkrr did not write, inside a model, stops the replacement too
    fs.pipe_file(f"{bucket}/m/README", b"mine")
    with pytest.raises(OutputExistsError, match=r"not part of the dkrr model: \['README'\]"):
        save_model(est, model, overwrite=True, storage_options=so)
    fs.rm_file(f"{bucket}/m/README")
    assert save_model(est, model, overwrite=True, storage_options=so) == model
    np.testing.assert_array_equal(load_model(model, storage_options=so).coef_, est.coef_)
    # an output inside a store, or overlapping an input, is refused
    with pytest.raises(OutputExistsError, match="lies inside the Zarr store"):
        write_dataset(np.ones((4, 2)), None, f"{data}/inner", storage_options=so)
    with pytest.raises(OutputExistsError, match="it is an input of this command"):
        write_predictions(np.ones(4), data, overwrite=True, inputs=[data], storage_options=so)


def test_a_second_writer_is_refused_or_detected(s3, bucket, tmp_path, capsys):
    so = s3.options()
    fs = s3.fs()
    url = f"s3://{bucket}/p.zarr"
    with atomic_output(url, storage_options=so) as tmp:
        fs.pipe_file(f"{tmp.path}/zarr.json", b"{}")
        with pytest.raises(OutputBusyError, match=rf"another process \(pid {os.getpid()} on .*\) is "
                                                  rf"writing {url} right now"):
            write_predictions(np.ones(4), url, storage_options=so)
        code = main(["predict", str(tmp_path / "m"), str(tmp_path / "d.zarr"), "--out", url,
                     "--storage-options", json.dumps(so), "--scheduler", "tcp://127.0.0.1:9"])
        err = capsys.readouterr().err
        assert code == 1 and "is writing" in err and ".p.zarr.lock" in err, err
        # a reader refuses the output while it is written
        with pytest.raises(StoreError, match="is incomplete"):
            open_dataset(url, storage_options=so)
    fs.invalidate_cache()
    assert not fs.exists(f"{bucket}/.p.zarr.lock") and not fs.exists(f"{bucket}/.p.zarr.incomplete")
    # a writer whose lock was taken over does not commit
    with pytest.raises(OutputBusyError, match="is writing"):
        with atomic_output(f"s3://{bucket}/q.zarr", storage_options=so) as tmp:
            fs.pipe_file(f"{tmp.path}/zarr.json", b"{}")
            fs.pipe_file(f"{bucket}/.q.zarr.lock", json.dumps(
                {"pid": 1, "host": "elsewhere", "token": "theirs", "since": "now"}).encode())
    fs.invalidate_cache()
    assert not fs.exists(f"{bucket}/q.zarr")
    # a lock from another host is reported with the object to delete; one left by a
    # process of this host that has ended is taken over
    with pytest.raises(OutputBusyError, match=rf"pid 1 on elsewhere.*delete s3://{bucket}/.q.zarr.lock"):
        write_predictions(np.ones(4), f"s3://{bucket}/q.zarr", storage_options=so)
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    import socket

    fs.pipe_file(f"{bucket}/.q.zarr.lock", json.dumps(
        {"pid": int(done.stdout), "host": socket.gethostname(), "started": 0.0, "token": "dead"}).encode())
    write_predictions(np.ones(4), f"s3://{bucket}/q.zarr", storage_options=so)
    assert not [k for k in _keys(s3, bucket) if k.startswith(".")]


@pytest.mark.slow
def test_cli_predict_whose_server_dies_mid_run(s3, bucket, dying):
    # end to end: `dkrr predict` with its own LocalCluster, the input and the output on a
    # server that is stopped once the first output chunk is stored
    import time

    import dask.array as da

    server, endpoint = dying
    so = s3.options()
    rng = np.random.default_rng(2)
    data, model, out = (f"s3://{bucket}/{n}" for n in ("d.zarr", "m", "p.zarr"))
    write_dataset(da.from_array(rng.normal(size=(40_000, 4)), chunks=(100, 4)), None, data,
                  storage_options=so)
    save_model(_estimator().fit(rng.normal(size=(64, 4)), rng.normal(size=64)), model, storage_options=so)
    env = {k: v for k, v in os.environ.items() if k != "DASK_LOGGING"}
    proc = subprocess.Popen([sys.executable, "-m", "dkrr.cli", "predict", model, data, "--out", out,
                             "--storage-options", json.dumps(s3.options(endpoint)), "--workers", "1",
                             "--threads-per-worker", "1", "-q"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    fs = s3.fs()
    deadline = time.monotonic() + 300
    while not any(k.startswith("p.zarr/y_pred/c/") for k in _keys(s3, bucket)):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    server.stop()
    _, err = proc.communicate(timeout=300)
    lines = err.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1, err
    assert re.match(rf"dkrr predict: error: cannot (read|write) .*{bucket}/.*: the object store cannot be "
                    r"reached", lines[0]), lines
    # the output could not be cleaned up (its store was gone): refused, then replaced
    with pytest.raises(StoreError, match="is incomplete"):
        open_dataset(out, require_y=False, storage_options=so)
    assert fs.exists(f"{bucket}/.p.zarr.lock")  # the killed-off writer's lock: its pid has ended
    write_predictions(np.ones(10), out, overwrite=True, storage_options=so)
    assert not [k for k in _keys(s3, bucket) if k.startswith(".")]
