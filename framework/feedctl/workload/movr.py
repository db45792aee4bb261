"""The movr demo workload, after CockroachDB's: users, vehicles (regional by row) and rides as Delta tables
with their change data feed on, and a steady mix of inserts, updates, deletes and region moves."""

from __future__ import annotations

import random
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from threading import Event

import pyarrow as pa

from feedctl.diagnostics import UsageError
from feedctl.project.model import Project

REGIONS = {
    "us-east1": ["new york", "boston", "washington dc"],
    "us-west1": ["san francisco", "seattle", "los angeles"],
    "europe-west1": ["amsterdam", "paris", "rome"],
}
CITY_REGION = {city: region for region, cities in REGIONS.items() for city in cities}
CDF_ON = {"delta.enableChangeDataFeed": "true"}
_NS = uuid.UUID("5f0c1a5e-0000-4000-8000-00000000feed")

SCHEMAS = {
    "users": pa.schema(
        [
            ("city", pa.string()),
            ("id", pa.string()),
            ("name", pa.string()),
            ("address", pa.string()),
            ("credit_card", pa.string()),
        ]
    ),
    "vehicles": pa.schema(
        [
            ("crdb_region", pa.string()),
            ("id", pa.string()),
            ("city", pa.string()),
            ("type", pa.string()),
            ("owner_id", pa.string()),
            ("creation_time", pa.timestamp("us", tz="UTC")),
            ("status", pa.string()),
            ("current_location", pa.string()),
            ("current_battery", pa.int32()),
        ]
    ),
    "rides": pa.schema(
        [
            ("city", pa.string()),
            ("id", pa.string()),
            ("vehicle_city", pa.string()),
            ("rider_id", pa.string()),
            ("vehicle_id", pa.string()),
            ("start_address", pa.string()),
            ("end_address", pa.string()),
            ("start_time", pa.timestamp("us", tz="UTC")),
            ("end_time", pa.timestamp("us", tz="UTC")),
            ("revenue", pa.decimal128(10, 2)),
        ]
    ),
}
_NAMES = ["Ada", "Grace", "Edsger", "Barbara", "Donald", "Frances", "Leslie", "Margaret", "Niklaus", "Radia"]
_STREETS = ["Main St", "Oak Ave", "Pine Rd", "Elm St", "Cedar Ln", "Maple Dr", "Lake Blvd", "Hill St"]


def _id(kind: str, n: int) -> str:
    return str(uuid.uuid5(_NS, f"{kind}-{n}"))


def _address(rng: random.Random) -> str:
    return f"{rng.randint(1, 99999)} {rng.choice(_STREETS)}"


def table_paths(project: Project) -> dict[str, tuple[str, dict]]:
    """Where the project wants movr's tables: {table: (location, storage_options)} from source `movr`."""
    found = {
        name: (t.location, t.storage_options)
        for fqn, t in project.tables.items()
        if t.source == "movr" and (name := t.name) in SCHEMAS
    }
    missing = sorted(set(SCHEMAS) - set(found))
    if missing:
        raise UsageError(
            f"project.yml declares no source table movr.{missing[0]}; the movr workload needs "
            "movr.users, movr.vehicles and movr.rides"
        )
    return found


def _table_exists(location: str, storage_options: dict) -> bool:
    from deltalake import DeltaTable

    try:
        DeltaTable(location, storage_options=storage_options or None)
        return True
    except Exception:  # not a Delta table (yet)
        return False


@dataclass
class InitResult:
    created: list[str]
    existing: list[str]
    rows: dict[str, int]


def init_movr(project: Project, rows: int = 100, seed: int = 1) -> InitResult:
    """Create the movr tables that do not exist yet, with `rows` users and vehicles and 2×rows rides."""
    from deltalake import write_deltalake

    rng = random.Random(seed)
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    cities = list(CITY_REGION)
    users = [
        {
            "city": cities[i % len(cities)],
            "id": _id("user", i),
            "name": f"{rng.choice(_NAMES)} {i}",
            "address": _address(rng),
            "credit_card": f"{rng.randint(10**9, 10**10 - 1)}",
        }
        for i in range(rows)
    ]
    vehicles = []
    for i in range(rows):
        city = cities[i % len(cities)]
        vehicles.append(
            {
                "crdb_region": CITY_REGION[city],
                "id": _id("vehicle", i),
                "city": city,
                "type": rng.choice(["scooter", "bike", "skateboard"]),
                "owner_id": users[i]["id"],
                "creation_time": now - timedelta(days=rng.randint(1, 900)),
                "status": rng.choice(["available", "in_use", "lost"]),
                "current_location": _address(rng),
                "current_battery": rng.randint(0, 100),
            }
        )
    rides = []
    for i in range(rows * 2):
        vehicle = vehicles[i % len(vehicles)]
        start = now - timedelta(minutes=rng.randint(60, 100000))
        rides.append(
            {
                "city": vehicle["city"],
                "id": _id("ride", i),
                "vehicle_city": vehicle["city"],
                "rider_id": users[rng.randrange(rows)]["id"],
                "vehicle_id": vehicle["id"],
                "start_address": _address(rng),
                "end_address": _address(rng),
                "start_time": start,
                "end_time": start + timedelta(minutes=rng.randint(2, 90)),
                "revenue": Decimal(rng.randint(100, 9999)) / 100,
            }
        )
    data = {"users": users, "vehicles": vehicles, "rides": rides}
    result = InitResult([], [], {})
    for name, (location, options) in table_paths(project).items():
        if _table_exists(location, options):
            result.existing.append(f"movr.{name}")
            continue
        write_deltalake(
            location,
            pa.Table.from_pylist(data[name], schema=SCHEMAS[name]),
            configuration=CDF_ON,
            storage_options=options or None,
        )
        result.created.append(f"movr.{name}")
        result.rows[f"movr.{name}"] = len(data[name])
    return result


@dataclass
class RunStats:
    commits: int = 0
    by_action: dict | None = None
    seconds: float = 0.0


class _Movr:
    """In-memory knowledge of the tables, so each commit can pick rows that exist."""

    def __init__(self, project: Project, rng: random.Random):
        from deltalake import DeltaTable

        self.rng = rng
        self.tables = {
            name: DeltaTable(loc, storage_options=opts or None) for name, (loc, opts) in table_paths(project).items()
        }
        self.users = self.tables["users"].to_pyarrow_table(columns=["city", "id"]).to_pylist()
        self.vehicles = {
            r["id"]: r
            for r in self.tables["vehicles"].to_pyarrow_table(columns=["crdb_region", "id", "city"]).to_pylist()
        }
        rides = self.tables["rides"].to_pyarrow_table(columns=["id", "end_time"]).to_pylist()
        self.open_rides = [r["id"] for r in rides if r["end_time"] is None]
        self.done_rides = [r["id"] for r in rides if r["end_time"] is not None]
        self.next_ride = len(rides) + rng.randrange(10**9)

    def now(self) -> datetime:
        return datetime.now(timezone.utc).replace(microsecond=0)

    def ride_start(self):
        vehicle = self.vehicles[self.rng.choice(sorted(self.vehicles))]
        ride_id = _id("ride", self.next_ride)
        self.next_ride += 1
        row = {
            "city": vehicle["city"],
            "id": ride_id,
            "vehicle_city": vehicle["city"],
            "rider_id": self.rng.choice(self.users)["id"],
            "vehicle_id": vehicle["id"],
            "start_address": _address(self.rng),
            "end_address": None,
            "start_time": self.now(),
            "end_time": None,
            "revenue": None,
        }
        from deltalake import write_deltalake

        write_deltalake(self.tables["rides"], pa.Table.from_pylist([row], schema=SCHEMAS["rides"]), mode="append")
        self.open_rides.append(ride_id)

    def ride_end(self):
        if not self.open_rides:
            return self.ride_start()
        ride_id = self.open_rides.pop(self.rng.randrange(len(self.open_rides)))
        self.tables["rides"].update(
            predicate=f"id = '{ride_id}'",
            new_values={
                "end_time": self.now(),
                "end_address": _address(self.rng),
                "revenue": round(self.rng.uniform(2, 80), 2),
            },
        )
        self.done_rides.append(ride_id)

    def ride_delete(self):
        if not self.done_rides:
            return self.ride_end()
        ride_id = self.done_rides.pop(self.rng.randrange(len(self.done_rides)))
        self.tables["rides"].delete(predicate=f"id = '{ride_id}'")

    def vehicle_update(self):
        vehicle_id = self.rng.choice(sorted(self.vehicles))
        self.tables["vehicles"].update(
            predicate=f"id = '{vehicle_id}'",
            new_values={
                "status": self.rng.choice(["available", "in_use", "lost"]),
                "current_battery": self.rng.randint(0, 100),
                "current_location": _address(self.rng),
            },
        )

    def vehicle_move(self):
        """A vehicle changes city and region: its primary key changes (a delete and an insert)."""
        vehicle = self.vehicles[self.rng.choice(sorted(self.vehicles))]
        city = self.rng.choice([c for c in CITY_REGION if CITY_REGION[c] != vehicle["crdb_region"]])
        self.tables["vehicles"].update(
            predicate=f"id = '{vehicle['id']}'", new_values={"city": city, "crdb_region": CITY_REGION[city]}
        )
        vehicle.update(city=city, crdb_region=CITY_REGION[city])

    def user_update(self):
        user = self.rng.choice(self.users)
        self.tables["users"].update(predicate=f"id = '{user['id']}'", new_values={"address": _address(self.rng)})


ACTIONS = {
    "ride_start": 30,
    "ride_end": 20,
    "vehicle_update": 25,
    "ride_delete": 10,
    "user_update": 10,
    "vehicle_move": 5,
}


def run_movr(
    project: Project, duration: float, rate: float = 2.0, seed: int | None = None, stop: Event | None = None
) -> RunStats:
    """Commit about `rate` changes per second for `duration` seconds (or until `stop` is set); each change is
    one Delta commit."""
    if rate <= 0:
        raise UsageError("--rate must be positive")
    rng = random.Random(seed)
    movr = _Movr(project, rng)
    stats = RunStats(by_action={name: 0 for name in ACTIONS})
    names, weights = list(ACTIONS), list(ACTIONS.values())
    started = time.monotonic()
    next_at = started
    while time.monotonic() - started < duration and not (stop and stop.is_set()):
        action = rng.choices(names, weights)[0]
        getattr(movr, action)()
        stats.commits += 1
        stats.by_action[action] += 1
        next_at += 1.0 / rate
        time.sleep(max(0.0, next_at - time.monotonic()))
    stats.seconds = time.monotonic() - started
    return stats
