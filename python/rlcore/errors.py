"""Typed errors raised by rlcore.

Every error derives from :class:`RlcoreError` and also from the builtin exception a user would
naturally catch, so ``except ValueError`` keeps working:

=========================  ====================  ==============================================
class                      also a                raised when
=========================  ====================  ==============================================
:class:`ShapeError`        ``ValueError``        an array has the wrong shape or leading dim N
:class:`DTypeError`        ``TypeError``         a dtype cannot be stored without loss
:class:`InvalidValueError` ``ValueError``        a scalar argument is out of range
                                                 (batch_size <= 0, n_step < 1, gamma not in
                                                 [0, 1], NaN priority, ...)
:class:`EmptyBufferError`  ``IndexError``        sampling from a buffer with no transition
:class:`ApiUsageError`     ``RuntimeError``      a call that is not allowed in the buffer's
                                                 current state (unknown column, views before
                                                 the first add, ...)
:class:`SaveFileError`     ``OSError``           a save directory is missing, incomplete or
                                                 corrupt
=========================  ====================  ==============================================

Every failed call leaves the buffer exactly as it was.
"""

from __future__ import annotations

from rlcore._core import (
    ApiUsageError,
    DTypeError,
    EmptyBufferError,
    InvalidValueError,
    RlcoreError,
    SaveFileError,
    ShapeError,
)

__all__ = [
    "ApiUsageError",
    "DTypeError",
    "EmptyBufferError",
    "InvalidValueError",
    "RlcoreError",
    "SaveFileError",
    "ShapeError",
]
