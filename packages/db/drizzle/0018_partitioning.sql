-- Time partitioning (docs/decisions/0007-month-partitions.md), migration 0018: the append-heavy history tables (emails, email_events, events, webhook_deliveries,
-- webhook_attempts) become partitioned BY RANGE (id), one partition per calendar month (UTC). Ids are UUIDv7, so
-- the bounds are the UUIDv7s of the first millisecond of each month (48-bit ms timestamp, the rest zero), the
-- primary key stays (id) and the foreign keys referencing these tables keep working. A DEFAULT partition takes a
-- row whose id falls outside every month partition (the worker's `partitions` maintenance task reports it). The
-- worker creates months ahead (mailroom_ensure_month_partitions); retention detaches and drops whole old months.
--
-- Unique indexes without the partition key cannot exist on a partitioned table, so three become plain indexes and
-- their guarantee moves into the primary key: a campaign email's id is mailroom_uuid_v7_keyed(campaign start,
-- 'campaign-email:<campaign>:<contact>') and a SEND_EMAIL step's email id is derived from its step run id, so a
-- retried fan-out or step conflicts on `id`. SES message ids are unique by SES (lookups only).
--
-- The move works on a populated database, in the migration's transaction: each table is renamed, a partitioned
-- copy is created with partitions covering its rows (months since its oldest created_at, at most 24 months back;
-- older rows go to the default partition) and three months ahead, rows are copied (INSERT … SELECT before any index
-- exists), the old table dropped, then keys, indexes, foreign keys and the statement triggers of `events`
-- (event_names counters, workflow inbox; statement triggers with transition tables are allowed on a partitioned
-- table and see the rows of every partition) are created under their old names.

-- The smallest UUIDv7 of the millisecond of `ts`: `id >= mailroom_uuid_v7_floor(t)` selects rows made at or after t.
CREATE FUNCTION mailroom_uuid_v7_floor(ts timestamptz) RETURNS uuid LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT encode(substring(int8send(floor(extract(epoch FROM ts) * 1000)::bigint) FROM 3) || '\x00000000000000000000'::bytea, 'hex')::uuid
$$;
--> statement-breakpoint
-- A deterministic UUIDv7: timestamp `ts` (ms), the 74 other bits from SHA-256(`key`) (same as
-- @mailroom/platform/ids keyedIdAt). The same (ts, key) always gives the same id.
CREATE FUNCTION mailroom_uuid_v7_keyed(ts timestamptz, key text) RETURNS uuid LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT encode(set_byte(set_byte(b, 6, (get_byte(b, 6) & 15) | 112), 8, (get_byte(b, 8) & 63) | 128), 'hex')::uuid
  FROM (SELECT substring(int8send(floor(extract(epoch FROM ts) * 1000)::bigint) FROM 3)
    || substring(sha256(convert_to(key, 'UTF8')) FROM 1 FOR 10) AS b) s
$$;
--> statement-breakpoint
-- Names every index of `parent`'s partitions after the parent's index: `<parent index>_<partition suffix>`
-- (events_retention_idx_p202611, events_pkey_default), so a plan names the index it uses the same on every partition.
CREATE FUNCTION mailroom_name_partition_indexes(parent text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
  FOR r IN
    SELECT ci.relname AS child_index, format('%s_%s', pi.relname, substring(cp.relname FROM length(parent) + 2)) AS wanted
    FROM pg_inherits ti
    JOIN pg_class cp ON cp.oid = ti.inhrelid
    JOIN pg_index x ON x.indrelid = cp.oid
    JOIN pg_class ci ON ci.oid = x.indexrelid
    JOIN pg_inherits ii ON ii.inhrelid = ci.oid
    JOIN pg_class pi ON pi.oid = ii.inhparent
    WHERE ti.inhparent = parent::regclass
  LOOP
    IF r.child_index <> r.wanted AND to_regclass(r.wanted) IS NULL THEN
      EXECUTE format('ALTER INDEX %I RENAME TO %I', r.child_index, r.wanted);
    END IF;
  END LOOP;
END $$;
--> statement-breakpoint
-- Creates the month partition `<parent>_pYYYYMM` of `month` (UTC) unless it exists, as a plain table attached to
-- the parent (ATTACH holds a weaker lock on the parent than CREATE … PARTITION OF). Rows of that month already in
-- the default partition move into it first, unless other tables reference the parent by foreign key (moving would
-- cascade to them): then nothing is created and the answer is 'blocked'.
-- Returns 'exists', 'created', 'moved' (created, rows moved from the default partition) or 'blocked'.
CREATE FUNCTION mailroom_month_partition(parent text, month date) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  m date := date_trunc('month', month)::date;
  part text := format('%s_p%s', parent, to_char(m, 'YYYYMM'));
  dflt text := parent || '_default';
  lo uuid := mailroom_uuid_v7_floor(m::timestamp AT TIME ZONE 'UTC');
  hi uuid := mailroom_uuid_v7_floor((m + interval '1 month')::timestamp AT TIME ZONE 'UTC');
  strays boolean;
BEGIN
  IF to_regclass(part) IS NOT NULL THEN RETURN 'exists'; END IF;
  EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I WHERE id >= %L AND id < %L)', dflt, lo, hi) INTO strays;
  IF strays AND EXISTS (SELECT 1 FROM pg_constraint WHERE contype = 'f' AND confrelid = parent::regclass) THEN
    RETURN 'blocked';
  END IF;
  EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', part, parent);
  IF strays THEN
    -- Straight into the partitions: the parent's statement triggers (event counters, workflow inbox) do not fire.
    EXECUTE format('INSERT INTO %I SELECT * FROM %I WHERE id >= %L AND id < %L', part, dflt, lo, hi);
    EXECUTE format('DELETE FROM %I WHERE id >= %L AND id < %L', dflt, lo, hi);
  END IF;
  EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', parent, part, lo, hi);
  PERFORM mailroom_name_partition_indexes(parent);
  RETURN CASE WHEN strays THEN 'moved' ELSE 'created' END;
END $$;
--> statement-breakpoint
-- Month partitions of `parent` for every month from `since` (null: this month) to `until`. Returns the months it
-- did not create because the default partition holds rows of theirs ('blocked').
CREATE FUNCTION mailroom_ensure_month_partitions(parent text, since timestamptz, until timestamptz) RETURNS date[] LANGUAGE plpgsql AS $$
DECLARE
  m date := date_trunc('month', coalesce(since, now()) AT TIME ZONE 'UTC')::date;
  last date := date_trunc('month', until AT TIME ZONE 'UTC')::date;
  blocked date[] := '{}';
BEGIN
  WHILE m <= last LOOP
    IF mailroom_month_partition(parent, m) = 'blocked' THEN blocked := blocked || m; END IF;
    m := (m + interval '1 month')::date;
  END LOOP;
  RETURN blocked;
END $$;
--> statement-breakpoint
ALTER TABLE "emails" RENAME TO "emails_unpartitioned";
--> statement-breakpoint
ALTER TABLE "email_events" RENAME TO "email_events_unpartitioned";
--> statement-breakpoint
ALTER TABLE "events" RENAME TO "events_unpartitioned";
--> statement-breakpoint
ALTER TABLE "webhook_deliveries" RENAME TO "webhook_deliveries_unpartitioned";
--> statement-breakpoint
ALTER TABLE "webhook_attempts" RENAME TO "webhook_attempts_unpartitioned";
--> statement-breakpoint
CREATE TABLE "emails" (LIKE "emails_unpartitioned" INCLUDING DEFAULTS INCLUDING CONSTRAINTS) PARTITION BY RANGE ("id");
--> statement-breakpoint
CREATE TABLE "emails_default" PARTITION OF "emails" DEFAULT;
--> statement-breakpoint
SELECT mailroom_ensure_month_partitions('emails', greatest(least((SELECT min(created_at) FROM "emails_unpartitioned"), now()), now() - interval '24 months'), now() + interval '3 months');
--> statement-breakpoint
INSERT INTO "emails" SELECT * FROM "emails_unpartitioned";
--> statement-breakpoint
CREATE TABLE "email_events" (LIKE "email_events_unpartitioned" INCLUDING DEFAULTS INCLUDING CONSTRAINTS) PARTITION BY RANGE ("id");
--> statement-breakpoint
CREATE TABLE "email_events_default" PARTITION OF "email_events" DEFAULT;
--> statement-breakpoint
SELECT mailroom_ensure_month_partitions('email_events', greatest(least((SELECT min(created_at) FROM "email_events_unpartitioned"), now()), now() - interval '24 months'), now() + interval '3 months');
--> statement-breakpoint
INSERT INTO "email_events" SELECT * FROM "email_events_unpartitioned";
--> statement-breakpoint
CREATE TABLE "events" (LIKE "events_unpartitioned" INCLUDING DEFAULTS INCLUDING CONSTRAINTS) PARTITION BY RANGE ("id");
--> statement-breakpoint
CREATE TABLE "events_default" PARTITION OF "events" DEFAULT;
--> statement-breakpoint
SELECT mailroom_ensure_month_partitions('events', greatest(least((SELECT min(created_at) FROM "events_unpartitioned"), now()), now() - interval '24 months'), now() + interval '3 months');
--> statement-breakpoint
INSERT INTO "events" SELECT * FROM "events_unpartitioned";
--> statement-breakpoint
CREATE TABLE "webhook_deliveries" (LIKE "webhook_deliveries_unpartitioned" INCLUDING DEFAULTS INCLUDING CONSTRAINTS) PARTITION BY RANGE ("id");
--> statement-breakpoint
CREATE TABLE "webhook_deliveries_default" PARTITION OF "webhook_deliveries" DEFAULT;
--> statement-breakpoint
SELECT mailroom_ensure_month_partitions('webhook_deliveries', greatest(least((SELECT min(created_at) FROM "webhook_deliveries_unpartitioned"), now()), now() - interval '24 months'), now() + interval '3 months');
--> statement-breakpoint
INSERT INTO "webhook_deliveries" SELECT * FROM "webhook_deliveries_unpartitioned";
--> statement-breakpoint
CREATE TABLE "webhook_attempts" (LIKE "webhook_attempts_unpartitioned" INCLUDING DEFAULTS INCLUDING CONSTRAINTS) PARTITION BY RANGE ("id");
--> statement-breakpoint
CREATE TABLE "webhook_attempts_default" PARTITION OF "webhook_attempts" DEFAULT;
--> statement-breakpoint
SELECT mailroom_ensure_month_partitions('webhook_attempts', greatest(least((SELECT min(created_at) FROM "webhook_attempts_unpartitioned"), now()), now() - interval '24 months'), now() + interval '3 months');
--> statement-breakpoint
INSERT INTO "webhook_attempts" SELECT * FROM "webhook_attempts_unpartitioned";
--> statement-breakpoint
DROP TABLE "webhook_attempts_unpartitioned" CASCADE;
--> statement-breakpoint
DROP TABLE "webhook_deliveries_unpartitioned" CASCADE;
--> statement-breakpoint
DROP TABLE "email_events_unpartitioned" CASCADE;
--> statement-breakpoint
DROP TABLE "events_unpartitioned" CASCADE;
--> statement-breakpoint
DROP TABLE "emails_unpartitioned" CASCADE;
--> statement-breakpoint
ALTER TABLE "emails" ADD CONSTRAINT "emails_pkey" PRIMARY KEY ("id");
--> statement-breakpoint
CREATE INDEX "emails_project_id_idx" ON "emails" USING btree ("project_id","id");
--> statement-breakpoint
CREATE INDEX "emails_contact_idx" ON "emails" USING btree ("contact_id");
--> statement-breakpoint
CREATE INDEX "emails_pending_idx" ON "emails" USING btree ("id") WHERE "emails"."status" in ('queued', 'sending');
--> statement-breakpoint
CREATE INDEX "emails_message_id_idx" ON "emails" USING btree ("message_id") WHERE "emails"."message_id" is not null;
--> statement-breakpoint
CREATE INDEX "emails_campaign_contact_idx" ON "emails" USING btree ("campaign_id","contact_id") WHERE "emails"."campaign_id" is not null;
--> statement-breakpoint
CREATE INDEX "emails_workflow_step_run_idx" ON "emails" USING btree ("workflow_step_run_id") WHERE "emails"."workflow_step_run_id" is not null;
--> statement-breakpoint
CREATE INDEX "emails_campaign_status_idx" ON "emails" USING btree ("campaign_id","status","sent_at") WHERE "emails"."campaign_id" is not null;
--> statement-breakpoint
CREATE INDEX "emails_campaign_pending_idx" ON "emails" USING btree ("campaign_id","contact_id") WHERE "emails"."campaign_id" is not null and "emails"."status" in ('queued', 'sending');
--> statement-breakpoint
CREATE INDEX "emails_content_retention_idx" ON "emails" USING btree ("project_id","created_at") WHERE "emails"."content_expired_at" is null;
--> statement-breakpoint
CREATE INDEX "emails_retention_idx" ON "emails" USING btree ("project_id","created_at") WHERE "emails"."campaign_id" is null;
--> statement-breakpoint
CREATE INDEX "emails_workflow_execution_idx" ON "emails" USING btree ("workflow_execution_id") WHERE "emails"."workflow_execution_id" is not null;
--> statement-breakpoint
ALTER TABLE "email_events" ADD CONSTRAINT "email_events_pkey" PRIMARY KEY ("id");
--> statement-breakpoint
CREATE INDEX "email_events_email_idx" ON "email_events" USING btree ("email_id","id");
--> statement-breakpoint
ALTER TABLE "events" ADD CONSTRAINT "events_pkey" PRIMARY KEY ("id");
--> statement-breakpoint
CREATE INDEX "events_project_id_idx" ON "events" USING btree ("project_id","id");
--> statement-breakpoint
CREATE INDEX "events_contact_idx" ON "events" USING btree ("contact_id","id");
--> statement-breakpoint
CREATE INDEX "events_project_name_idx" ON "events" USING btree ("project_id","name","id");
--> statement-breakpoint
CREATE INDEX "events_retention_idx" ON "events" USING btree ("project_id","created_at");
--> statement-breakpoint
ALTER TABLE "webhook_deliveries" ADD CONSTRAINT "webhook_deliveries_pkey" PRIMARY KEY ("id");
--> statement-breakpoint
CREATE INDEX "webhook_deliveries_endpoint_idx" ON "webhook_deliveries" USING btree ("endpoint_id","id");
--> statement-breakpoint
CREATE INDEX "webhook_deliveries_pending_idx" ON "webhook_deliveries" USING btree ("id") WHERE "webhook_deliveries"."status" = 'pending';
--> statement-breakpoint
CREATE INDEX "webhook_deliveries_retention_idx" ON "webhook_deliveries" USING btree ("project_id","created_at") WHERE "webhook_deliveries"."status" <> 'pending';
--> statement-breakpoint
ALTER TABLE "webhook_attempts" ADD CONSTRAINT "webhook_attempts_pkey" PRIMARY KEY ("id");
--> statement-breakpoint
CREATE INDEX "webhook_attempts_delivery_idx" ON "webhook_attempts" USING btree ("delivery_id","id");
--> statement-breakpoint
SELECT mailroom_name_partition_indexes('emails');
--> statement-breakpoint
SELECT mailroom_name_partition_indexes('email_events');
--> statement-breakpoint
SELECT mailroom_name_partition_indexes('events');
--> statement-breakpoint
SELECT mailroom_name_partition_indexes('webhook_deliveries');
--> statement-breakpoint
SELECT mailroom_name_partition_indexes('webhook_attempts');
--> statement-breakpoint
ALTER TABLE "emails" ADD CONSTRAINT "emails_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "projects"("id") ON DELETE cascade ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "emails" ADD CONSTRAINT "emails_contact_id_contacts_id_fk" FOREIGN KEY ("contact_id") REFERENCES "contacts"("id") ON DELETE set null ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "emails" ADD CONSTRAINT "emails_template_id_templates_id_fk" FOREIGN KEY ("template_id") REFERENCES "templates"("id") ON DELETE set null ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "emails" ADD CONSTRAINT "emails_campaign_id_campaigns_id_fk" FOREIGN KEY ("campaign_id") REFERENCES "campaigns"("id") ON DELETE cascade ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "emails" ADD CONSTRAINT "emails_workflow_execution_id_workflow_executions_id_fk" FOREIGN KEY ("workflow_execution_id") REFERENCES "workflow_executions"("id") ON DELETE set null ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "emails" ADD CONSTRAINT "emails_workflow_step_run_id_workflow_step_runs_id_fk" FOREIGN KEY ("workflow_step_run_id") REFERENCES "workflow_step_runs"("id") ON DELETE set null ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "email_events" ADD CONSTRAINT "email_events_email_id_emails_id_fk" FOREIGN KEY ("email_id") REFERENCES "emails"("id") ON DELETE cascade ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "email_events" ADD CONSTRAINT "email_events_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "projects"("id") ON DELETE cascade ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "events" ADD CONSTRAINT "events_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "projects"("id") ON DELETE cascade ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "events" ADD CONSTRAINT "events_contact_id_contacts_id_fk" FOREIGN KEY ("contact_id") REFERENCES "contacts"("id") ON DELETE cascade ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "webhook_deliveries" ADD CONSTRAINT "webhook_deliveries_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "projects"("id") ON DELETE cascade ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "webhook_deliveries" ADD CONSTRAINT "webhook_deliveries_endpoint_id_webhook_endpoints_id_fk" FOREIGN KEY ("endpoint_id") REFERENCES "webhook_endpoints"("id") ON DELETE cascade ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "webhook_attempts" ADD CONSTRAINT "webhook_attempts_delivery_id_webhook_deliveries_id_fk" FOREIGN KEY ("delivery_id") REFERENCES "webhook_deliveries"("id") ON DELETE cascade ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "webhook_attempts" ADD CONSTRAINT "webhook_attempts_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "projects"("id") ON DELETE cascade ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "test_messages" ADD CONSTRAINT "test_messages_email_id_emails_id_fk" FOREIGN KEY ("email_id") REFERENCES "emails"("id") ON DELETE cascade ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "suppressions" ADD CONSTRAINT "suppressions_source_email_id_emails_id_fk" FOREIGN KEY ("source_email_id") REFERENCES "emails"("id") ON DELETE set null ON UPDATE no action;
--> statement-breakpoint
CREATE TRIGGER events_names_insert AFTER INSERT ON events REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION event_names_after_insert();
--> statement-breakpoint
CREATE TRIGGER events_names_delete AFTER DELETE ON events REFERENCING OLD TABLE AS old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION event_names_after_delete();
--> statement-breakpoint
CREATE TRIGGER events_workflow_inbox AFTER INSERT ON events REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION workflow_inbox_after_event_insert();
--> statement-breakpoint
ANALYZE "emails";
--> statement-breakpoint
ANALYZE "email_events";
--> statement-breakpoint
ANALYZE "events";
--> statement-breakpoint
ANALYZE "webhook_deliveries";
--> statement-breakpoint
ANALYZE "webhook_attempts";
