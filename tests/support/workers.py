"""`make test`'s two workers (pytest-xdist): the folders whose tests start several JVMs (node processes, a
cluster, runners killed and started again) run one after another on one worker, as alone with each other as
in one process; unit/, spark/ (one Spark session in the worker), connect/ (one Spark Connect server at a
time), servers/ and operations/ (which mostly wait on servers, a browser or the clock) run beside them on the
other.

xdist's own `--dist loadgroup` would do this from `xdist_group` marks, but pytest-xdist 3.8 records a group by
rewriting `Item._nodeid`, which pytest 9 no longer reads (a node's id is `Item._id`): every test would be its
own group, and the heavy tests would run two at once. So the groups are the scopes of xdist's scope
scheduler, told by folder."""

from __future__ import annotations

from xdist.scheduler import LoadScopeScheduling

SEVERAL_JVMS = ("nodes", "crash", "cluster", "soak")


def cost(nodeid: str) -> str:
    """`jvms` or `beside`, by the test's folder under tests/."""
    parts = nodeid.split("/")
    return "jvms" if len(parts) > 2 and parts[0] == "tests" and parts[1] in SEVERAL_JVMS else "beside"


class ByCost(LoadScopeScheduling):
    def _split_scope(self, nodeid: str) -> str:
        return cost(nodeid)
