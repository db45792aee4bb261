"""`feedctl plan`: what the project's changes do to its feeds' jobs, for the reviewer of a pull request.

Each feed is compared with what runs — its newest job in the state store — or with what an earlier build
compiled (`--state DIR`, the folder of its manifest.json and compiled/, as dbt's `--state`), and given one
kind of change, the most disruptive found: `new` (no job yet), `unchanged`, `metadata` (description, tags,
meta: never part of the definition), `in-place` (options the job takes from its next batch, tables a plain
feed adds or drops: the job keeps its id and high-water mark), `backfill` (a table's key changed: a schema
change under its `schema_change_policy`), `new-version` (its contract `version:` changed: a job of the new
version emits into a location of its own while the old version's job runs on), `new-job` (the definition
changed: the command that continues without loss, and why), or `removed` (a job no feed of the project runs
any more). Where a job starts (`cursor`, `initial_scan`) is the job's own, never a change.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from feedctl.compiler import contract
from feedctl.compiler.compile import CompiledFeed, definition_hash, sink_display
from feedctl.compiler.state import compile_selected
from feedctl.diagnostics import UsageError, first_line
from feedctl.job import deployed, schema_effect
from feedctl.job.key_change import Key
from feedctl.job.option_change import show
from feedctl.job.revision import declared_keys
from feedctl.job.start import continue_point
from feedctl.options import IN_PLACE_OPTIONS, NEW_JOB_REASONS, START_OPTIONS, InitialScan
from feedctl.project.model import Project
from feedctl.sinks.versioned import at_version
from feedctl.source.change_cost import ChangeCost, change_cost
from feedctl.source.delta import of_table
from feedctl.state import jobs
from feedctl.state.jobs import JobStatus

KINDS = ("new", "unchanged", "metadata", "in-place", "backfill", "new-version", "new-job", "removed")


@dataclass
class Change:
    name: str
    change: str
    job_id: int | None
    diff: list[str]
    action: str
    command: str = ""  # the shell command `action` begins with, if it does (markdown shows it alone as code)
    contract: list[str] = field(default_factory=list)  # how its messages' contract changes (with --state)
    breaking: bool = False  # a breaking change of an enforced contract, its version not raised


@dataclass
class TableReads:
    """What reading a followed table's changes costs (`source/change_cost.py`), or why it cannot be said."""

    table: str
    text: str
    cost: ChangeCost | None = None


@dataclass
class Plan:
    feeds: list[Change]
    tables: list[TableReads]


def plan(
    project_dir, selectors: list[str] | None = None, state_dir: str | None = None, vars_override: dict | None = None
) -> Plan:
    result = compile_selected(project_dir, selectors, state_dir, vars_override=vars_override, lenient_columns=True)
    opened = {t for t, schema in result.table_schemas.items() if schema is not None and not schema.frozen}
    followed = sorted(  # tables compile opened (not those it took from frozen schemas: CI may not reach them)
        {
            t
            for c in result.feeds.values()
            if c.feed.sink is not None and c.options.initial_scan != InitialScan.ONLY
            for t in c.tables
            if t in opened and t in result.project.tables
        }
    )
    return Plan(_feed_changes(result, selectors, state_dir), [_reads(t, result.project.tables[t]) for t in followed])


def _reads(fqn: str, table) -> TableReads:
    try:
        cost = change_cost(of_table(fqn, table))
    except Exception as exc:  # a table plan cannot read: said, the plan goes on
        return TableReads(fqn, f"{fqn}: changes {table.changes}; its reads cannot be judged: {first_line(exc)}")
    return TableReads(fqn, cost.describe(), cost)


def _feed_changes(result, selectors: list[str] | None, state_dir: str | None) -> list[Change]:
    if state_dir is None:
        befores, stopped = deployed.from_jobs(result.project)
    else:
        befores, stopped = deployed.from_manifest(Path(state_dir)), {}
    out = []
    for name, compiled in sorted(result.feeds.items()):
        if compiled.feed.sink is None:
            continue  # no job ever runs it (`feedctl tail` reads it)
        before = befores.get(name)
        if before is None:
            out.append(_new(compiled, stopped.get(name)))
        else:
            change = (
                _new_version(compiled, before, result.project)
                if compiled.feed.version != before.version
                else _compare(compiled, before, declared_keys(result.project, compiled.tables))
            )
            change = _with_schema_changes(change, compiled, before, result.table_schemas, result.project)
            if state_dir is not None:
                now = contract.of_feed(compiled, result)
                change = _with_contract(change, now, compiled.feed.contract_enforced, Path(state_dir))
            change.diff += [
                f"version {j.version}: job {j.job_id} runs on into {j.sink_uri} until canceled "
                f"(`feedctl cancel {name}@v{j.version}`)"
                for j in before.others
            ]
            out.append(change)
    if not selectors:
        for name, before in sorted(befores.items()):
            if name not in result.feeds:
                job = before.job
                out.append(
                    Change(
                        name,
                        "removed",
                        job.job_id if job else None,
                        [
                            "no longer in the project",
                            *(
                                f"version {j.version}: job {j.job_id} runs on no node either (`feedctl cancel "
                                f"{j.job_id}`)"
                                for j in before.others
                            ),
                        ],
                        f"feedctl cancel {job.job_id}: its job runs on no node"
                        if job
                        else "its job, if any, is canceled by hand: feedctl cancel JOB",
                        f"feedctl cancel {job.job_id}" if job else "",
                    )
                )
    return out


def _with_contract(change: Change, now: contract.Contract, enforced: bool, state: Path) -> Change:
    """The feed's change, with how its contract changes from the build's (`target/contracts/<feed>.json`):
    breaking, for a feed whose contract is enforced and whose version did not rise."""
    path = state / "contracts" / f"{change.name}.json"
    if not path.exists():
        return change
    try:
        was = contract.Contract.from_json(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"--state {state}: {path} is not a contract feedctl compile writes ({exc})") from None
    breaking, other = contract.judge(was, now)
    lines = [f"breaking: {b}" for b in breaking] + other
    if now.version != was.version:
        lines.append(f"version {was.version} → {now.version}")
    return replace(change, contract=lines, breaking=bool(breaking) and enforced and now.version <= was.version)


def _with_schema_changes(
    change: Change, compiled: CompiledFeed, before: deployed.Before, schemas: dict, project: Project
) -> Change:
    """The feed's change, with what each of its tables' schema changes since the build will do to its job
    (a `schemas.yml` changed in the pull request: `job/schema_effect.py`)."""
    effects = []
    for table in compiled.tables:
        was, now = (before.schemas or {}).get(table), schemas.get(table)
        if was is None or now is None:
            continue
        found = schema_effect.effect(
            table,
            was,
            {c: now.types.get(c) for c in now.columns},
            compiled.options,
            (compiled.columns or {}).get(table),
        )
        if found is not None and found.action == "backfill" and not now.frozen:  # a table compile opened
            found = replace(found, rows=_rows(of_table(table, project.tables[table])))
        if found is not None:
            effects.append(found)
    if not effects:
        return change
    kind, action = change.change, change.action
    if kind in ("unchanged", "metadata", "in-place"):
        worst = {e.action for e in effects}
        if worst & {"stop", "fail"}:
            kind, action = (
                "new-job",
                "the job stops at the table's change: "
                + "; ".join(schema_effect.EFFECTS[a] for a in sorted(worst & {"stop", "fail"})),
            )
        elif "backfill" in worst:
            kind, action = "backfill", f"feedctl run takes the table's change: {schema_effect.EFFECTS['backfill']}"
    return replace(change, change=kind, action=action, diff=[*change.diff, *(e.describe() for e in effects)])


def _rows(source) -> int | None:
    """The rows of the table's newest version, by its log's statistics (None: it cannot be read now)."""
    try:
        return source.snapshot_files(source.latest_version()).rows
    except Exception:  # the plan says the backfill without its size
        return None


def _new_version(compiled: CompiledFeed, before: deployed.Before, project: Project) -> Change:
    """The feed's contract version changed: a new job of the version, into a location of its own; the job of
    the version before runs on, from its own definition, until canceled. What changed of the definition is
    told against the sink at the old version's location: the new location is said once, in the action."""
    name, job, version = compiled.feed.name, before.job, compiled.feed.version
    sink = project.sinks.get(compiled.feed.sink) if compiled.feed.sink else None
    there = replace(compiled, sink_display=sink_display(at_version(sink, before.version))) if sink else compiled
    start = (
        f"from cursor {compiled.options.cursor}"
        if compiled.options.cursor
        else ("scanning its tables first" if compiled.options.scans else "from now, without a scan")
    )
    where = (compiled.sink_display or {}).get("uri", "")
    old = f"job {job.job_id} of version {before.version}" if job else f"the job of version {before.version}"
    was = (before.sink_display or {}).get("uri", "its location")
    return Change(
        name,
        "new-version",
        job.job_id if job else None,
        [f"version: {before.version} → {version}", *_definition_diff(there, before)],
        f"feedctl run creates a job of version {version} into {where}, {start}; {old} runs on into {was} "
        f"until canceled (`feedctl cancel {name}@v{before.version}`)",
        "feedctl run",
    )


def _new(compiled: CompiledFeed, stopped: jobs.Job | None) -> Change:
    name, options = compiled.feed.name, compiled.options
    start = (
        f"from cursor {options.cursor}"
        if options.cursor
        else "scanning its tables first"
        if options.scans
        else "from now, without a scan"
    )
    if stopped is None:
        return Change(name, "new", None, [], f"feedctl run creates its job, {start}", "feedctl run")
    point = continue_point(stopped)
    if stopped.status in (JobStatus.CANCELED, JobStatus.FAILED) and point is not None:
        command = f"feedctl run --new-job --continue -s {name}"
        return Change(
            name,
            "new",
            stopped.job_id,
            [f"job {stopped.job_id} {stopped.status}"],
            f"{command} continues from {point}",
            command,
        )
    command = f"feedctl run --new-job -s {name}"
    return Change(
        name,
        "new",
        stopped.job_id,
        [f"job {stopped.job_id} {stopped.status}"],
        f"{command} starts a new job, {start}",
        command,
    )


def _compare(compiled: CompiledFeed, before: deployed.Before, keys: dict[str, Key]) -> Change:
    name, job = compiled.feed.name, before.job
    job_id = job.job_id if job else None
    redefined = _definition_diff(compiled, before)
    old, new = before.options.in_place(), compiled.options.in_place()
    in_place = [f"options.{k}: {show(old[k])} → {show(new[k])}" for k in IN_PLACE_OPTIONS if old[k] != new[k]]
    if compiled.sql is None and compiled.tables != before.tables:  # a plain feed's tables: added and dropped
        added = [t for t in compiled.tables if t not in before.tables]
        dropped = [t for t in before.tables if t not in compiled.tables]
        scan = "scanned alone, then followed" if before.options.initial_scan == InitialScan.YES else "followed"
        in_place.insert(
            0,
            f"tables: {show(before.tables)} → {show(compiled.tables)} ("
            + "; ".join([*(f"{t} {scan}" for t in added), *(f"{t} no longer emitted" for t in dropped)])
            + ")",
        )
    rekeyed = [
        f"{t}: key {was.describe()} → {keys[t].describe()}"
        for t, was in sorted(before.keys.items())
        if t in keys and keys[t] != was
    ]
    metadata = {"description": compiled.feed.description, "tags": compiled.feed.tags, "meta": compiled.feed.meta}
    touched = [
        f"{k}: {show(before.metadata[k])} → {show(v)}"
        for k, v in metadata.items()
        if before.metadata is not None and before.metadata.get(k) != v
    ]
    if redefined or (rekeyed and compiled.sql is not None):
        point = continue_point(job) if job else None
        command = f"feedctl cancel {name} && feedctl run --new-job --continue -s {name}"
        action = command + (f" continues from {point}" if point else " continues where the old job stops")
        if job and point is None:
            command = f"feedctl cancel {name} && feedctl run --new-job --rescan -s {name}"
            action = f"{command} (its job is in its scan)"
        return Change(
            name,
            "new-job",
            job_id,
            redefined + rekeyed + in_place + touched,
            action + ("; a key change under a CDC query is not taken in place" if rekeyed and not redefined else ""),
            command,
        )
    if rekeyed:
        policy = compiled.options.schema_change_policy
        effect = {
            "backfill": "every row emitted again under its new key",
            "nobackfill": "no message for the change itself",
            "stop": "the job stops there; a new job with its cursor continues",
        }[policy]
        return Change(
            name,
            "backfill",
            job_id,
            rekeyed + in_place + touched,
            f"feedctl run takes the new key at the table's first version that has its columns "
            f"(schema_change_policy: {policy}: {effect})",
        )
    if in_place:
        where = f"job {job_id}" if job_id else "the running job"
        return Change(
            name,
            "in-place",
            job_id,
            in_place + touched,
            f"{where} takes it from its next batch once every node running the feed has this project (a "
            "one-off feedctl run alone: at once); the job keeps its id and high-water mark",
        )
    if touched:
        return Change(name, "metadata", job_id, touched, "nothing to emit: feedctl run records it on the job")
    return Change(name, "unchanged", job_id, [], "")


def _definition_diff(compiled: CompiledFeed, before: deployed.Before) -> list[str]:
    """What changed of the definition: tables, query, options (but where a job starts), sink."""
    out = []
    if compiled.sql is not None and compiled.tables != before.tables:
        out.append(f"tables: {show(before.tables)} → {show(compiled.tables)}")
    if (compiled.sql or None) != (before.sql or None):
        out.append("query: changed")
        out += [
            line.rstrip("\n")
            for line in difflib.unified_diff(
                (before.sql or "").splitlines(True), (compiled.sql or "").splitlines(True), "before", "after", n=0
            )
            if not line.startswith(("---", "+++", "@@"))
        ]
    stored_before, stored_now = before.options.to_json(), compiled.options.to_json()
    for option in sorted(stored_now):
        was, now = stored_before[option], stored_now[option]
        if option not in (*START_OPTIONS, *IN_PLACE_OPTIONS) and was != now:
            out.append(
                f"options.{option}: {show(was)} → {show(now)} (a new job: "
                f"{NEW_JOB_REASONS.get(option, 'it changes what the job emits')})"
            )
    if compiled.feed.sink != before.sink:
        out.append(f"sink: {before.sink} → {compiled.feed.sink}")
    elif before.sink_display is not None and before.sink_display != compiled.sink_display:
        out.append(f"sink {compiled.feed.sink}: URI or options changed")
    elif not out and before.definition_hash not in (
        compiled.definition_hash,
        definition_hash(compiled, before.options, before.tables),
    ):
        out.append(f"sink {compiled.feed.sink}: URI or options changed")  # a job created before it kept them
    return out


# -- output ----------------------------------------------------------------------------------------------


def as_json(planned: Plan) -> str:
    tables = [
        {"table": t.table, "text": t.text, **({"reads": _cost_json(t.cost)} if t.cost else {})} for t in planned.tables
    ]
    return json.dumps({"feeds": [asdict(c) for c in planned.feeds], "tables": tables}, indent=2)


def _cost_json(cost: ChangeCost) -> dict:
    return {k: str(v) if k == "changes" else v for k, v in asdict(cost).items() if k != "table"}


def as_text(planned: Plan) -> str:
    lines = []
    for c in planned.feeds:
        lines.append(f"{c.name}: {c.change}" + (f" (job {c.job_id})" if c.job_id else ""))
        lines += [f"    {d}" for d in c.diff]
        lines += [f"    contract: {d}" for d in c.contract]
        if c.breaking:
            lines.append("    ✗ a breaking change of its enforced contract: raise the feed's version")
        if c.action:
            lines.append(f"    → {c.action}")
    if planned.tables:
        lines.append("changes read:")
        lines += [f"    {t.text}" for t in planned.tables]
    lines.append(summary(planned.feeds))
    return "\n".join(lines)


def as_markdown(planned: Plan) -> str:
    """A pull-request comment: a summary line, then one row per feed that changes, then what the followed
    tables' changes cost to read."""

    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", "<br>")

    changes = planned.feeds
    rows = [c for c in changes if c.change != "unchanged"]
    lines = [f"**feedctl plan**: {summary(changes)}", ""]
    if rows:
        lines += ["| feed | change | job | what changed | to apply |", "|---|---|---|---|---|"]
        lines += [
            f"| `{c.name}` | **{c.change}** | {c.job_id or ''} | "
            f"{'<br>'.join([*(f'`{cell(d)}`' for d in c.diff), *(f'contract: `{cell(d)}`' for d in c.contract)])}"
            f"{'<br>**breaking**: raise the version' if c.breaking else ''} | {cell(to_apply(c))} |"
            for c in rows
        ]
    if planned.tables:
        lines += ["", "Changes read:", *(f"- {t.text}" for t in planned.tables)]
    return "\n".join(lines)


def to_apply(change: Change) -> str:
    """The action as markdown: its command alone in code, the prose around it as text."""
    if change.command and change.action.startswith(change.command):
        return f"`{change.command}`{change.action[len(change.command) :]}"
    return change.action


def summary(changes: list[Change]) -> str:
    counts = {k: sum(c.change == k for c in changes) for k in KINDS}
    return ", ".join(f"{n} {k}" for k, n in counts.items() if n) or "no feeds"
