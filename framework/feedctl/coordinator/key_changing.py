"""A change of a table's key on the coordinator (`KeyChanging`, a part of `JobCoordinator`, whose state it shares):
the change project.yml asks for found at the first version not yet cut from which the table has every column of
the new key, and from the batch cut for it on, the table emitted under that key, in spans laid out for it. The
keys in force are the job's (`JobDefinition.keys_in_force`): a change recorded by any node."""

from __future__ import annotations

from feedctl.job import key_change
from feedctl.job.definition import JobDefinition, definition_of
from feedctl.source.spans import Regions
from feedctl.state import batch_intents, jobs, spans


class KeyChanging:
    """The key changes of a job's tables, on its `JobCoordinator`."""

    def _keys_of(self, definition: JobDefinition) -> None:
        """Each table's key and region column as the job records them (a key change recorded by any node)."""
        self.keys = definition.keys_in_force(self.declared)
        self.regional = {t: k.region_column for t, k in self.keys.items() if k.region_column}

    def _key_change(self, job: jobs.Job, tables: list[str], after: dict[str, int]) -> key_change.KeyChange | None:
        """The change of a table's key that project.yml asks for, at the first version not yet cut from which
        the table has every column of the new key (None: none asked for, or no such version yet)."""
        for table, wanted in sorted(self.declared.items()):
            if table not in tables:  # dropped from the job, or waiting for its scan
                continue
            now = self.keys[table]
            if wanted == now or definition_of(job).key_left(table, wanted):  # the node's project is older
                continue
            source, needed = self.sources[table], wanted.columns()
            first, latest = after[table] + 1, self.latest[table]
            candidates = [first, *(v for v in source.schema_changes(after[table], latest) if v > first)]
            version = next((v for v in candidates if v <= latest and set(needed) <= set(source.schema(v).names)), None)
            if version is not None:
                before = source.schema(version - 1).names if version > 0 else []
                return key_change.KeyChange(table, version, now, wanted, tuple(c for c in needed if c not in before))
        return None

    def _change_key(
        self, conn, change: key_change.KeyChange, intent: batch_intents.Intent, per_region: int, regions: set
    ) -> None:
        """From `intent` on, the table is emitted under its new key, in spans laid out for it (a block per
        region for a regional-by-row table); its old spans emitted every batch before (none was pending)."""
        job = jobs.get_job(conn, self.job_id)
        definition = definition_of(job).with_key_change(change)
        jobs.set_definition(conn, self.job_id, self.epoch, definition)
        old = [s for s in spans.of_job(conn, self.job_id) if s.table == change.table]
        frontier = min((s.frontier for s in old), default=job.high_water)
        spans.retire(conn, self.job_id, change.table)
        column = change.after.region_column
        if column:
            homes = [Regions.home(v) for v in sorted(regions, key=lambda v: (v is None, str(v)))]
            spans.add_regions(conn, self.job_id, change.table, homes, per_region, intent.batch_seq - 1, frontier)
        else:
            spans.ensure(
                conn,
                self.job_id,
                {change.table: per_region},
                intent.batch_seq - 1,
                frontier,
                {change.table: self.homes.get(change.table)},
            )
        self._keys_of(definition)
        self.log(
            f"{self.feed}: {change.describe()} from batch {intent.batch_seq} ({self.options.schema_change_policy})",
            event="key_changed",
            feed=self.feed,
            job_id=self.job_id,
            table=change.table,
            version=change.version,
        )
