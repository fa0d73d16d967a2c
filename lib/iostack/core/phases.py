"""Where a command's time goes: each phase's wall-clock seconds and the CPU seconds of the
processes it ran (Spack, Lmod, ...), printed as it ends and kept for release.json.
CPU time is the figure to compare on a shared machine; wall time is what an admin waits."""
from __future__ import annotations

import logging
import contextlib
import resource
import time

log = logging.getLogger(__name__)


def _cpu() -> float:
    own, children = (resource.getrusage(who) for who in (resource.RUSAGE_SELF,
                                                         resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


class Timer:
    def __init__(self):
        self.phases: dict[str, dict[str, float]] = {}

    @contextlib.contextmanager
    def __call__(self, name: str):
        wall, cpu = time.monotonic(), _cpu()
        try:
            yield
        finally:
            spent = {"wall_s": round(time.monotonic() - wall, 3), "cpu_s": round(_cpu() - cpu, 3)}
            self.phases[name] = spent
            log.info(f"phase {name}: {spent['wall_s']:.1f} s wall, {spent['cpu_s']:.1f} s CPU")

    def record(self) -> dict[str, dict[str, float]]:
        return dict(self.phases)
