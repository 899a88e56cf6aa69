"""The preload of dkrr's LocalCluster workers (``dkrr._worker_setup``): a Ctrl-C at the
terminal reaches the workers too; they must neither stop nor print what they log while
the command closes the cluster."""

import subprocess
import sys
import textwrap

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
