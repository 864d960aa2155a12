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
:class:`CheckpointError`   ``OSError``           a trainer checkpoint is refused: a damaged
                           (a ``SaveFileError``) one, a ``trainer.pt`` with objects other
                                                 than tensors and plain values, or a
                                                 checkpoint of another trainer
=========================  ====================  ==============================================

Every failed call leaves the buffer exactly as it was. The classes are defined here, once; the
native module ``rlcore._core`` raises them (and re-exports them under the same names), so this
module must not import ``rlcore._core``.
"""

from __future__ import annotations

__all__ = [
    "ApiUsageError",
    "CheckpointError",
    "DTypeError",
    "EmptyBufferError",
    "InvalidValueError",
    "RlcoreError",
    "SaveFileError",
    "ShapeError",
]


class RlcoreError(Exception):
    """Base class of every rlcore error."""


class ShapeError(RlcoreError, ValueError):
    """An array has the wrong shape."""


class DTypeError(RlcoreError, TypeError):
    """A dtype cannot be stored without loss."""


class InvalidValueError(RlcoreError, ValueError):
    """An argument is out of range."""


class EmptyBufferError(RlcoreError, IndexError):
    """The buffer holds no transition."""


class ApiUsageError(RlcoreError, RuntimeError):
    """A call not allowed in this state."""


class SaveFileError(RlcoreError, OSError):
    """A save is missing, incomplete or corrupt."""


class CheckpointError(SaveFileError):
    """A trainer checkpoint that rlcore refuses to load, because loading it could run code from
    the file, it is damaged, or it is not a checkpoint of this trainer. The message says what was
    found."""
