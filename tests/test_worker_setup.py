"""The preload of dkrr's LocalCluster workers (``dkrr._worker_setup``): a Ctrl-C at the
terminal reaches the workers too; they must neither stop nor print what they log while
the command closes the cluster."""

import subprocess
import sys
import textwrap

import pytest

# a worker process in miniature: distributed's logging set-up (imported), the preload's
# dask_setup, a logged error with a traceback before and after a real SIGINT
_SCRIPT = textwrap.dedent(
    """
    import logging, os, signal
    import distributed  # noqa: F401  (configures the "distributed" logger's handler)
    from dkrr._worker_setup import dask_setup

    dask_setup(None)
    log = logging.getLogger("distributed.worker.state_machine")  # a child: its own filters are none
    try:
        raise ConnectionError("peer closed")
    except ConnectionError:
        logging.getLogger("distributed.worker").exception("before: failed during get data")
        os.kill(os.getpid(), signal.SIGINT)
        logging.getLogger("distributed.worker").exception("after: failed during get data")
        log.warning("after: async instruction cancelled")
    print("still running")
    """
)


def test_a_worker_takes_sigint_as_news_and_then_logs_nothing():
    out = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "still running"
    # the record before the signal is printed with its traceback: the handler is the one
    # the filter sits on, so the absence below is the filter's doing
    assert "before: failed during get data" in out.stderr and "Traceback" in out.stderr, out.stderr
    assert "after:" not in out.stderr, out.stderr
    assert "KeyboardInterrupt" not in out.stderr, out.stderr


# a real LocalCluster of dkrr (worker processes with the preload, or in-process workers:
# sys.argv[1] "processes" or "threads"): two dkrr tasks fail,
# one with dkrr's own error, one with another exception (a bug); and a task that is not
# dkrr's fails with dkrr's error
_FAILURES = textwrap.dedent(
    """
    import sys
    from dkrr.cluster import local_cluster
    from dkrr.errors import StoreError

    def reported():
        raise StoreError("reported by the caller")

    def bug():
        raise ZeroDivisionError("a bug in the task")

    if __name__ == "__main__":
        with local_cluster(n_workers=1, processes=sys.argv[1] == "processes", dashboard=False, quiet=True,
                           memory_limit="1GB") as client:
            for key, fn in (("dkrr-probe-reported", reported), ("dkrr-probe-bug", bug),
                            ("other-probe-reported", reported)):
                try:
                    client.submit(fn, key=key, pure=False).result()
                except Exception as exc:
                    print(type(exc).__name__, flush=True)
    """
)


@pytest.mark.parametrize("workers", ["processes", "threads"])
def test_a_dkrr_task_failing_with_a_dkrr_error_is_not_logged_by_the_worker_and_others_are(tmp_path, workers):
    script = tmp_path / "failures.py"
    script.write_text(_FAILURES)
    out = subprocess.run([sys.executable, str(script), workers], capture_output=True, text=True, timeout=180,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    # the caller gets every error
    assert out.stdout.split() == ["StoreError", "ZeroDivisionError", "StoreError"], (out.stdout, out.stderr)
    records = out.stderr.split("Compute Failed")[1:]
    logged = sorted(r.split("Key:", 1)[1].split()[0] for r in records)
    # the bug is logged, with its traceback, and so is dkrr's error raised by a task not dkrr's
    assert logged == ["dkrr-probe-bug", "other-probe-reported"], out.stderr
    assert "a bug in the task" in out.stderr and "Traceback" in out.stderr
