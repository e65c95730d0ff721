-- Time partitioning of workflow_step_runs (docs/decisions/0007-month-partitions.md), migration 0020: like the history tables of 0018, the step
-- runs become partitioned BY RANGE (id), one partition per calendar month (UTC), plus a DEFAULT partition.
--
-- The unique index (execution_id, version) cannot exist on a partitioned table (it lacks the partition key), so it
-- becomes a plain index and its guarantee moves into the primary key: a step run's id is derived from its
-- execution, mailroom_uuid_v7_keyed(<time of the execution's id>, 'step-run:<execution>:<version>') (same as
-- @mailroom/workflows/queries/workflow-engine stepRunId), so every run of an execution sits in the month the
-- execution started and a retried job's insert conflicts on `id` and finds the run it began. Rows already here
-- keep their ids (UUIDv7s of when they ran).
--
-- The move works on a populated database, in the migration's transaction, as 0018 did: rename, a partitioned copy
-- with months since the oldest step run or live execution (at most 24 months back; older rows go to the default
-- partition) and three months ahead, rows copied before any index exists, the old table dropped (with the
-- emails.workflow_step_run_id foreign key), then key, indexes and foreign keys under their old names.

-- The time (ms precision) in the first 48 bits of a UUIDv7 `id`: mailroom_uuid_v7_keyed(mailroom_uuid_v7_time(id), k)
-- keeps `id`'s millisecond (same as @mailroom/platform/ids idTimestampMs).
CREATE FUNCTION mailroom_uuid_v7_time(id uuid) RETURNS timestamptz LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT to_timestamp(('x' || substr(replace(id::text, '-', ''), 1, 12))::bit(48)::bigint / 1000.0)
$$;
--> statement-breakpoint
ALTER TABLE "workflow_step_runs" RENAME TO "workflow_step_runs_unpartitioned";
--> statement-breakpoint
CREATE TABLE "workflow_step_runs" (LIKE "workflow_step_runs_unpartitioned" INCLUDING DEFAULTS INCLUDING CONSTRAINTS) PARTITION BY RANGE ("id");
--> statement-breakpoint
CREATE TABLE "workflow_step_runs_default" PARTITION OF "workflow_step_runs" DEFAULT;
--> statement-breakpoint
SELECT mailroom_ensure_month_partitions('workflow_step_runs', greatest(least(
    (SELECT min(started_at) FROM "workflow_step_runs_unpartitioned"),
    (SELECT min(created_at) FROM "workflow_executions" WHERE status IN ('RUNNING', 'WAITING')),
    now()), now() - interval '24 months'), now() + interval '3 months');
--> statement-breakpoint
INSERT INTO "workflow_step_runs" SELECT * FROM "workflow_step_runs_unpartitioned";
--> statement-breakpoint
DROP TABLE "workflow_step_runs_unpartitioned" CASCADE;
--> statement-breakpoint
ALTER TABLE "workflow_step_runs" ADD CONSTRAINT "workflow_step_runs_pkey" PRIMARY KEY ("id");
--> statement-breakpoint
CREATE INDEX "workflow_step_runs_version_idx" ON "workflow_step_runs" USING btree ("execution_id","version");
--> statement-breakpoint
SELECT mailroom_name_partition_indexes('workflow_step_runs');
--> statement-breakpoint
ALTER TABLE "workflow_step_runs" ADD CONSTRAINT "workflow_step_runs_execution_id_workflow_executions_id_fk" FOREIGN KEY ("execution_id") REFERENCES "workflow_executions"("id") ON DELETE cascade ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "workflow_step_runs" ADD CONSTRAINT "workflow_step_runs_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "projects"("id") ON DELETE cascade ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "workflow_step_runs" ADD CONSTRAINT "workflow_step_runs_step_id_workflow_steps_id_fk" FOREIGN KEY ("step_id") REFERENCES "workflow_steps"("id") ON DELETE set null ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "emails" ADD CONSTRAINT "emails_workflow_step_run_id_workflow_step_runs_id_fk" FOREIGN KEY ("workflow_step_run_id") REFERENCES "workflow_step_runs"("id") ON DELETE set null ON UPDATE no action;
--> statement-breakpoint
ANALYZE "workflow_step_runs";
