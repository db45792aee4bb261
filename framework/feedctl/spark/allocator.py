"""How long polars' allocator keeps freed memory, set before polars is first imported.

polars gives freed pages back to the system after half a second. The coordinator stages batch after batch and
a Spark task encodes one Arrow batch after another: each frees a batch's frames and allocates the next ones a
moment later, so every batch paid for its pages again in page faults (a sixth of a scan task's CPU). Ten
seconds keeps them for the next batch and still hands them back once a job goes idle.
"""

import os

KEEP_FREED_PAGES = "dirty_decay_ms:10000,muzzy_decay_ms:10000"


def keep_freed_pages() -> None:
    """polars adds these settings to its own, and a setting of the user's environment wins."""
    os.environ.setdefault("_RJEM_MALLOC_CONF", KEEP_FREED_PAGES)
