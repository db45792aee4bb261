"""The nemesis: randomized kills, pauses, bursts and idle periods against real `feedctl run` processes and
the movr workload, each run ending with `feedctl verify` of every feed (`bench/nemesis.py`)."""
