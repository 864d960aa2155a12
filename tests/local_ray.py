"""A loopback Ray of 2 CPUs for one test module (test_distributed*.py): started by the module's
first test that asks for it, shut down after its last (starting Ray costs seconds)."""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

from rlcore.distributed import init_ray


def local_ray(module: ModuleType) -> Iterator[None]:
    """Start Ray with ``module``'s own functions and classes pickled by value (Ray's workers cannot
    import a test module by name); shut it down when the generator resumes after its one yield."""
    import ray

    ray.cloudpickle.register_pickle_by_value(module)
    init_ray(num_cpus=2, log_to_driver=False)
    yield
    ray.shutdown()
