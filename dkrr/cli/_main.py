"""Dispatch of the ``dkrr`` command: parse (:mod:`._options`), run (:mod:`._commands`),
turn errors and signals into exit statuses."""

from __future__ import annotations

import os
import re
import signal
import sys
import threading

from ._options import build_parser

__all__ = ["build_parser", "main"]


def _drop_interrupted_gather(record) -> bool:
    """Logging filter: hide distributed's ``AllExit`` of a gather cut short by Ctrl-C.

    When a computation is interrupted, the client closes while its gather task is still
    pending; asyncio then logs "Task exception was never retrieved" with a traceback of
    ``distributed.client.AllExit``, which says nothing to the user.
    """
    exc = record.exc_info[1] if record.exc_info else None
    return type(exc).__name__ != "AllExit"


def _drop_interrupted_sync(record) -> bool:
    """Logging filter: hide the ``NameError`` of a distributed call cut short by a signal.

    ``distributed.utils.sync`` answers Ctrl-C or SIGTERM in the waiting main thread by
    scheduling ``cancel()`` on the event loop; when the signal arrives before the call's
    coroutine has started (a busy loop, a loaded machine), ``cancel()`` reads a variable
    not yet assigned and tornado logs ``NameError: cannot access free variable 'future'``
    with a traceback. There is nothing to cancel then, and the call's result is dropped.
    """
    exc = record.exc_info[1] if record.exc_info else None
    if not isinstance(exc, NameError) or exc.__traceback__ is None:
        return True
    tb = exc.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    code = tb.tb_frame.f_code
    return not (code.co_name == "cancel" and code.co_filename.endswith(f"distributed{os.sep}utils.py"))


def _quiet_interrupted_distributed() -> None:
    """Keep distributed's logs of a computation cut short by Ctrl-C or SIGTERM off stderr
    (and an object store client's unclosed session at exit, and the client's log that it
    gave up reconnecting to a lost scheduler, which the command's error says)."""
    import logging

    from .._worker_setup import drop_unclosed_session

    logging.getLogger("asyncio").addFilter(_drop_interrupted_gather)
    logging.getLogger("asyncio").addFilter(drop_unclosed_session)
    logging.getLogger("tornado.application").addFilter(_drop_interrupted_sync)
    logging.getLogger("distributed.client").addFilter(_drop_reconnect_given_up)


def _drop_reconnect_given_up(record) -> bool:
    """distributed's "Failed to reconnect to scheduler after 30.00 seconds, closing client":
    the command's error line says it, with what to do (``dkrr._progress``'s note)."""
    return not record.getMessage().startswith("Failed to reconnect to scheduler")


class _Terminated(KeyboardInterrupt):
    """Raised in the main thread by SIGTERM, so that it cleans up exactly as Ctrl-C."""


#: the signal that interrupted the command, if any: the worker processes share the
#: terminal's process group, so a Ctrl-C also stops them, and their loss can surface in the
#: main thread as the computation's error before its own KeyboardInterrupt does
_SIGNALLED: list[int] = []


def _on_sigterm(signum, frame):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second one must not cut the cleanup
    _SIGNALLED.append(signum)
    raise _Terminated


def _on_sigint(signum, frame):
    _SIGNALLED.append(signum)
    raise KeyboardInterrupt


def _quiet_swallowed_interrupt(previous_hook):
    """A ``sys.unraisablehook`` that says nothing of the KeyboardInterrupt of a signal the
    command recorded: CPython cannot raise an exception out of a weakref callback (its
    import machinery runs some), so it prints it as "Exception ignored in ..." and goes on;
    :func:`main` then stops at its next check of the recorded signal. Anything else goes
    to ``previous_hook``."""
    def hook(unraisable):
        if isinstance(unraisable.exc_value, KeyboardInterrupt) and _SIGNALLED:
            return
        previous_hook(unraisable)
    return hook


def _stop_if_signalled() -> None:
    """Raise the recorded signal's exception: a Ctrl-C (or SIGTERM) whose exception CPython
    swallowed stops the command all the same."""
    if _SIGNALLED:
        raise (_Terminated if _SIGNALLED[0] == signal.SIGTERM else KeyboardInterrupt)()


def _dkrr_notes(exc: BaseException) -> list[str]:
    """The notes dkrr added to a dependency's exception (``dkrr._progress``: the cluster's
    failures, KilledWorker or a lost scheduler): such an exception is a command's error,
    said in its line and the note, not a traceback."""
    return [n for n in getattr(exc, "__notes__", ()) if isinstance(n, str) and n.startswith("dkrr: ")]


def _std_flag_alone(argv: list[str]) -> list[str]:
    """``predict``'s ``--std`` takes an optional value, so ``dkrr predict --std MODEL STORE``
    read MODEL as that value (argparse: "invalid choice"); a ``--std`` followed by anything
    but one of its values or an option is the flag alone, ``--std=observation``."""
    argv = list(argv)
    if argv[:1] == ["predict"]:
        for i, token in enumerate(argv[:-1]):
            if token == "--std" and argv[i + 1] not in ("observation", "latent") and not argv[i + 1].startswith("-"):
                argv[i] = "--std=observation"
    return argv


def _stopped(how: str) -> str:
    """The line of a command stopped by a signal: nothing partial is left, and an output
    put in place before the signal came is named as written in full (it is); when the
    signal stopped the deletion of the output it replaced, what is left of that is named
    to be deleted. On a terminal it starts a line of its own (a progress bar may hold the
    cursor)."""
    paths = sys.modules.get("dkrr.io._paths")  # not imported yet: stopped while the libraries loaded
    committed = paths.COMMITTED if paths is not None else []
    left = paths.LEFT_BEHIND if paths is not None else []
    start = "\n" if sys.stderr.isatty() else ""
    if committed and left:  # stopped deleting the replaced output (or a spare copy)
        return (f"{start}dkrr: {how} after {', '.join(committed)} had been written in full, "
                "while dkrr deleted what the replacement left over: delete "
                f"{', '.join(left)} (nothing reads it)")
    if committed:
        return (f"{start}dkrr: {how} after {', '.join(committed)} had been written in full; "
                "nothing partial was left behind")
    return f"{start}dkrr: {how}; no partial output was left behind"


#: a value that begins with a minus and a digit (``-1,0.1``, ``-.5``): argparse reads
#: any such token but a lone negative number as an option ("expected one argument")
_NEGATIVE_VALUE = re.compile(r"^-\.?\d")


def _negative_values(argv: list[str]) -> list[str]:
    """``--alphas -1,0.1`` is ``--alphas=-1,0.1``: the value reaches the option's own
    check, which names the problem, instead of argparse's "expected one argument"."""
    out = []
    for token in argv:
        if out and _NEGATIVE_VALUE.match(token) and out[-1].startswith("--") and "=" not in out[-1]:
            out[-1] = f"{out[-1]}={token}"
        else:
            out.append(token)
    return out


#: the exit status of a command whose stdout or stderr its reader closed: 128 + SIGPIPE
EXIT_BROKEN_PIPE = 141


def _reader_gone(stream) -> bool:
    """Whether ``stream`` writes to a pipe (or socket) whose reader is gone: its write end
    polls as an error or a hang-up (POLLERR on Linux, POLLHUP on the BSDs). A stream that
    is not a file (a caller's ``io.StringIO``), a terminal or a regular file: False.
    Without ``select.poll`` (Windows) every stream is taken as gone."""
    import select

    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return False
    if not hasattr(select, "poll"):
        return True
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))


def _std_reader_gone() -> bool:
    """Whether a ``BrokenPipeError`` is the command's own: stdout's or stderr's reader is
    gone (another pipe's, a connection's, is an error of the command)."""
    return _reader_gone(sys.stdout) or _reader_gone(sys.stderr)


def _mute_closed_streams() -> None:
    """Point stdout and stderr, where one's reader is gone, at ``os.devnull``: the text
    still buffered for it would raise ``BrokenPipeError`` again at the interpreter's final
    flush ("Exception ignored ...", exit status 120), as Python's documentation of SIGPIPE
    says. A stream whose reader is there is left as it is."""
    for stream in (sys.stdout, sys.stderr):
        if _reader_gone(stream):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, stream.fileno())
            os.close(devnull)


def main(argv: list[str] | None = None) -> int:
    """Run the ``dkrr`` command.

    Returns the exit status: 0 ok, 1 error, 130 interrupted (Ctrl-C), 143 terminated
    (SIGTERM), 141 (:data:`EXIT_BROKEN_PIPE`) stdout or stderr closed by its reader
    (``dkrr evaluate ... | head -1``). Interrupted or terminated, no partial output is
    left behind.

    A closed stdout or stderr ends the command quietly, as it ends ``cat`` or ``grep``:
    no traceback, and 141 = 128 + SIGPIPE, the status a shell gives a tool the signal
    stopped (``set -o pipefail`` sees the same as for those). Not 0: what the command
    meant to print did not all reach its reader, and a stderr closed while the work runs
    (``2>&1 | head``) stops the work at its next progress line. Python ignores SIGPIPE,
    so the write raises ``BrokenPipeError``, which unwinds the command as Ctrl-C's
    ``KeyboardInterrupt`` does: an output being written is removed, none is left
    half-written, and one already in place stays (fit, predict and ingest print their
    line after the output is written in full). The buffered output is flushed here, so
    a closed pipe is met here and not at the interpreter's exit.
    """
    try:
        try:
            return _run(argv)
        finally:
            sys.stdout.flush()
    except BrokenPipeError:
        if not _std_reader_gone():  # another pipe's (a connection's): the command's error
            raise
        _mute_closed_streams()
        return EXIT_BROKEN_PIPE


def _run(argv: list[str] | None) -> int:
    """:func:`main` less the handling of a closed stdout or stderr."""
    try:
        parser = build_parser()
        args = parser.parse_args(_negative_values(_std_flag_alone(sys.argv[1:] if argv is None else list(argv))))
    except KeyboardInterrupt:
        print("dkrr: interrupted", file=sys.stderr)
        return 130
    _quiet_interrupted_distributed()
    previous = previous_int = None
    _SIGNALLED.clear()
    previous_hook = sys.unraisablehook
    sys.unraisablehook = _quiet_swallowed_interrupt(previous_hook)
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not where SIGINT is ignored
            previous_int = signal.signal(signal.SIGINT, _on_sigint)
    try:
        # the libraries are imported here, inside the handlers: a Ctrl-C while they load
        # (a few seconds) is an interruption like any other, not an import traceback
        from .._worker_setup import let_zarr_io_finish_at_exit
        from ..errors import DkrrError
        from ..io._paths import COMMITTED, LEFT_BEHIND
        from . import _commands

        COMMITTED.clear()  # the outputs of this command (main may run again in one process)
        LEFT_BEHIND.clear()

        let_zarr_io_finish_at_exit()  # a read cut short by Ctrl-C ends before Zarr closes its loop
        # a Ctrl-C while the libraries loaded whose exception CPython swallowed (raised in a
        # weakref callback of the import machinery): the command stops before it starts
        _stop_if_signalled()

        handler = getattr(_commands, f"cmd_{args.command}")
        try:
            return int(handler(args) or 0)
        except (DkrrError, FileNotFoundError) as exc:
            if _SIGNALLED:  # the interrupted workers' error came first: it is the interruption
                raise (_Terminated if _SIGNALLED[0] == signal.SIGTERM else KeyboardInterrupt)() from exc
            print(f"dkrr {args.command}: error: {exc}", file=sys.stderr)
            return 1
        except Exception as exc:
            if isinstance(exc, BrokenPipeError) and _std_reader_gone():
                raise  # a reader closed stdout or stderr: main ends quietly
            from .._failures import _cluster_failure_note

            # a step outside dkrr's computes (a client call) that lost the scheduler: the same note
            notes = _dkrr_notes(exc) or [n for n in [_cluster_failure_note(exc, args.command)] if n]
            if _SIGNALLED or not notes:
                raise
            # dask's own words, then the note dkrr added (what it means, what to do)
            print(f"dkrr {args.command}: error: {exc}", *notes, sep="\n", file=sys.stderr)
            return 1
    except _Terminated:
        print(_stopped("terminated"), file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print(_stopped("interrupted"), file=sys.stderr)
        return 130
    finally:
        sys.unraisablehook = previous_hook
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        if previous_int is not None:
            signal.signal(signal.SIGINT, previous_int)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
