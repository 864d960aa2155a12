"""Starting or joining Ray: a local Ray listens on 127.0.0.1 only unless an address is given; Ray
itself is imported lazily so that ``import rlcore.distributed`` works without it."""


from __future__ import annotations

import os
from typing import Any

from rlcore.errors import ApiUsageError


def _ray() -> Any:
    """The ``ray`` module, or an ImportError that says how to install it."""
    try:
        import ray
    except ImportError as e:
        raise ImportError(
            "rlcore.distributed needs Ray: pip install -e '.[ray]'  (or pip install 'ray==2.60.0')"
        ) from e
    return ray


def _remote(cls: type, **options: Any) -> Any:
    """``ray.remote(cls)`` with ``options``, created once per class."""
    key = (cls, tuple(sorted(options.items())))
    if key not in _REMOTE_CLASSES:
        _REMOTE_CLASSES[key] = _ray().remote(**options)(cls) if options else _ray().remote(cls)
    return _REMOTE_CLASSES[key]


_REMOTE_CLASSES: dict[Any, Any] = {}


_LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
"""Ray's switch (``ray._private.ray_constants``) that keeps a node on the loopback address: unset,
Ray on Linux turns a requested ``127.0.0.1`` into the machine's routable address and its servers
listen there."""


def init_ray(address: str | None = None, *, num_cpus: int | None = None, **kwargs: Any) -> None:
    """Start or join Ray unless it is already initialised.

    Args:
        address: ``None`` starts a local Ray whose every server listens on 127.0.0.1 only (no
            dashboard, nothing reachable from other machines); ``"auto"`` or ``"HOST:PORT"`` joins
            an existing cluster as Ray would (see docs/distributed.md on token authentication).
        num_cpus: logical CPUs of a local Ray (ignored when joining a cluster).
        kwargs: passed to ``ray.init``.

    Raises:
        ImportError: Ray is not installed.
        ApiUsageError: a local Ray came up on another address than the loopback (it is shut down).
    """
    if address is not None:
        ray = _ray()
        if not ray.is_initialized():
            ray.init(address=address, **kwargs)
        return
    # Ray resolves "127.0.0.1" to the routable address unless this switch is off when it starts;
    # the raylet and workers it spawns inherit it from the environment. Ray reads it into a module
    # constant at import, so a Ray imported earlier gets the constant set for the call too.
    previous = os.environ.get(_LOOPBACK_ENV)
    os.environ[_LOOPBACK_ENV] = "0"
    ray = _ray()
    if ray.is_initialized():
        _restore_env(_LOOPBACK_ENV, previous)
        return
    constants = getattr(getattr(ray, "_private", None), "ray_constants", None)
    saved = getattr(constants, "ENABLE_RAY_CLUSTER", None)
    if constants is not None and saved is not None:
        constants.ENABLE_RAY_CLUSTER = False
    try:
        ray.init(
            address="local",
            num_cpus=num_cpus,
            include_dashboard=False,
            _node_ip_address="127.0.0.1",
            configure_logging=False,
            **kwargs,
        )
    finally:
        if constants is not None and saved is not None:
            constants.ENABLE_RAY_CLUSTER = saved
        _restore_env(_LOOPBACK_ENV, previous)
    host = str(ray.get_runtime_context().gcs_address).rsplit(":", 1)[0].strip("[]")
    if host not in ("127.0.0.1", "::1", "localhost"):
        ray.shutdown()
        raise ApiUsageError(
            f"the local Ray started on {host}, not on the loopback address; start Ray yourself "
            f"(ray.init) or set {_LOOPBACK_ENV}=0 in the environment before Python starts"
        )


def _restore_env(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value
