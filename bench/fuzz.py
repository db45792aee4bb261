"""Fuzzing feedctl's inputs for minutes: mutants of a small project (`feedctl.testing.fuzz`), each run through
a command in this process and judged. Prints the runs, the answers by exit code, and each kind of failure
once with the mutant that showed it: internal errors, diagnostics outside their files, the planted secret
written or printed, and runs over 10 s.

    .venv/bin/python bench/fuzz.py --minutes 20
"""

from __future__ import annotations

import argparse
import collections
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "framework"))

from click.testing import CliRunner  # noqa: E402
from hypothesis import HealthCheck, Phase, given, seed, settings  # noqa: E402

from feedctl.cli import main as feedctl  # noqa: E402
from feedctl.testing.fuzz import SECRET, SECRET_NAME, Answer, Mutant, arguments, judge, mutants, write  # noqa: E402

SLOW = 10.0  # seconds: a run slower than this counts as a time-out


class TimeUp(KeyboardInterrupt):
    """Ends hypothesis's loop at once, without shrinking."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    until = time.monotonic() + args.minutes * 60
    os.environ[SECRET_NAME] = SECRET
    exits, failures, slowest = collections.Counter(), {}, (0.0, "")
    workdir = Path(tempfile.mkdtemp(prefix="feedctl-fuzz-"))

    @settings(
        max_examples=10**9,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(mutants())
    def one(mutant: Mutant) -> None:
        nonlocal slowest
        if time.monotonic() > until:
            raise TimeUp
        root = write(workdir / "p", mutant.files)
        started = time.monotonic()
        result = CliRunner().invoke(feedctl, arguments(root, mutant.command))
        took = time.monotonic() - started
        wrong = judge(root, Answer(result.exit_code, result.stdout + result.stderr, result.exception))
        exits[result.exit_code] += 1
        if took > slowest[0]:
            slowest = (took, f"{mutant.what}; feedctl {' '.join(mutant.command)}")
        if took > SLOW:
            wrong.append(f"took {took:.1f} s")
        for problem in wrong:
            kind = "took" if problem.startswith("took") else problem.split(":")[0][:60]
            failures.setdefault(kind, (problem, f"{mutant.what}; feedctl {' '.join(mutant.command)}", 0))
            first, what, count = failures[kind]
            failures[kind] = (first, what, count + 1)

    started = time.monotonic()
    try:
        seed(args.seed)(one)()
    except TimeUp:
        pass
    runs = sum(exits.values())
    print(
        f"{runs} runs in {(time.monotonic() - started) / 60:.1f} min; exits "
        + ", ".join(f"{code}: {n}" for code, n in sorted(exits.items()))
    )
    print(
        f"slowest run {slowest[0]:.1f} s ({slowest[1]}); peak RSS "
        f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB"
    )
    for kind, (problem, what, count) in sorted(failures.items()):
        print(f"FAIL ×{count} {problem}\n    {what}")
    print(f"{sum(c for _, _, c in failures.values())} failures of {len(failures)} kinds")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
