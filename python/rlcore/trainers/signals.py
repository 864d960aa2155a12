"""Stopping a run cleanly on SIGINT and SIGTERM: :class:`StopSignals` turns the first signal into a
flag that the run loop reads between two iterations (it then writes a checkpoint and raises
:class:`RunInterrupted`); a second signal aborts at once, as if nothing had been caught.

Only the main thread of the main interpreter can install signal handlers; elsewhere (a worker
thread, a Ray actor's thread) :class:`StopSignals` installs nothing and never reports a signal.
"""

from __future__ import annotations

import os
import signal
import threading
from types import FrameType, TracebackType
from typing import Any

__all__ = ["RunInterrupted", "StopSignals"]

SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""The signals a run stops on."""


class RunInterrupted(KeyboardInterrupt):
    """A run stopped by SIGINT or SIGTERM after writing its checkpoint.

    A ``KeyboardInterrupt``, so code that handles Ctrl-C keeps working.

    Attributes:
        signum: the signal's number (``signal.SIGINT`` or ``signal.SIGTERM``).
        checkpoint: the checkpoint directory written before stopping.
        env_steps: training env steps of the checkpoint.
        grad_steps: gradient steps of the checkpoint.
    """

    def __init__(self, signum: int, checkpoint: Any, env_steps: int, grad_steps: int) -> None:
        self.signum = int(signum)
        self.checkpoint = checkpoint
        self.env_steps = int(env_steps)
        self.grad_steps = int(grad_steps)
        super().__init__(
            f"stopped by {signal.Signals(self.signum).name} at {self.env_steps} env steps "
            f"({self.grad_steps} gradient steps); checkpoint in {checkpoint}"
        )


class StopSignals:
    """Context manager: while active, the first SIGINT or SIGTERM sets :attr:`caught` (its number)
    instead of stopping the process; a second one restores the previous handlers and delivers
    itself again (SIGINT: ``KeyboardInterrupt`` at once; SIGTERM: the default, the process ends).
    The previous handlers are restored on exit.

    Args:
        enabled: ``False`` installs nothing (:attr:`caught` stays ``None``).
    """

    def __init__(self, *, enabled: bool = True) -> None:
        self.enabled = enabled and threading.current_thread() is threading.main_thread()
        self.caught: int | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        if self.enabled:
            for signum in SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        del frame
        if self.caught is None:
            self.caught = signum
            return
        self._restore()  # a second signal: abort now, the way the process would without us
        if signum == signal.SIGINT and signal.getsignal(signum) is signal.default_int_handler:
            raise KeyboardInterrupt
        os.kill(os.getpid(), signum)

    def _restore(self) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._restore()
