"""A round of resolved files into local folders (one per feed), written as a node's ticker wrote them (eight
threads of the node, a share each) and as it writes them now (its file writer process, `sinks/local_files.py`),
alone and beside a thread running Python (the node's other work), side by side in one run.

    .venv/bin/python bench/local_files.py [--files 333] [--rounds 3] [--idle-threads 1000]

`--idle-threads` threads wait on an event meanwhile, as a node's coordinators do between wakes. Prints the
seconds of each round and, last, the medians: `local files: N=<n> threads alone=<s> busy=<s> process alone=<s>
busy=<s>`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "framework"))

from feedctl.sinks import local_files  # noqa: E402
from feedctl.sinks.local_files import FileWriter  # noqa: E402

SHARES = 8  # the ticker's workers, as they wrote a round before


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=333)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--idle-threads", type=int, default=1000)
    args = parser.parse_args()
    stop, done = threading.Event(), threading.Event()
    for _ in range(args.idle_threads):
        threading.Thread(target=_wait, args=(done,), daemon=True).start()
    writer, shares = FileWriter(), ThreadPoolExecutor(SHARES)
    seconds: dict[str, list[float]] = {}
    count = iter(range(10**9))
    with tempfile.TemporaryDirectory() as root:
        folders = [f"{root}/f{n}" for n in range(args.files)]

        def files() -> list[tuple[str, bytes]]:
            name = f"{next(count):033d}.RESOLVED"
            return [(f"{folder}/{name}", b'{"resolved":"1796188207200197888.0000000000"}') for folder in folders]

        def threads(round_: list) -> None:
            list(shares.map(local_files.put_once_each, [round_[n::SHARES] for n in range(SHARES)]))

        writer.put_once_each(files())  # its process started, every folder made
        for _ in range(args.rounds):
            for busy in (False, True):
                stop.clear()
                spinner = threading.Thread(target=_spin, args=(stop,)) if busy else None
                if spinner:
                    spinner.start()
                for way, write in (("threads", threads), ("process", writer.put_once_each)):
                    round_ = files()
                    started = time.perf_counter()
                    write(round_)
                    took = time.perf_counter() - started
                    key = f"{way} {'busy' if busy else 'alone'}"
                    seconds.setdefault(key, []).append(took)
                    print(f"{key}: {took:.3f} s")
                stop.set()
                if spinner:
                    spinner.join()
    done.set()
    writer.close()
    shares.shutdown()
    med = {k: statistics.median(v) for k, v in seconds.items()}
    print(
        f"local files: N={args.files} threads alone={med['threads alone']:.3f} busy={med['threads busy']:.3f} "
        f"process alone={med['process alone']:.3f} busy={med['process busy']:.3f}"
    )


def _wait(done: threading.Event) -> None:
    while not done.wait(0.2):
        pass


def _spin(stop: threading.Event) -> None:
    count = 0
    while not stop.is_set():
        count += 1


if __name__ == "__main__":
    main()
