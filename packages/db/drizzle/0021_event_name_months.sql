-- Event counts per month partition (docs/decisions/0006-counter-deltas.md), migration 0021. Dropping a month of `events` used to lower the
-- event_names counters by counting the dropped partition's rows per (project, name): a scan of the whole month,
-- so the drop took longer the more events the month held. The same deltas that keep event_names now also carry
-- the month of their events' ids (the month partition the rows sit in), and the fold keeps event_name_months:
-- count per (project, name, month). The drop lowers the counters by that month's rows there (a few per name).
-- Deltas written before this migration carry no month and fold into event_names only; event_name_months is filled
-- here from the events themselves, with writers of events held off (SHARE lock) until the migration commits.
CREATE TABLE "event_name_months" (
	"project_id" uuid NOT NULL,
	"name" text NOT NULL,
	"month" date NOT NULL,
	"count" bigint NOT NULL,
	CONSTRAINT "event_name_months_project_id_name_month_pk" PRIMARY KEY("project_id","name","month")
);
--> statement-breakpoint
ALTER TABLE "event_name_deltas" ADD COLUMN "month" date;--> statement-breakpoint
ALTER TABLE "event_name_months" ADD CONSTRAINT "event_name_months_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "event_name_months_month_idx" ON "event_name_months" USING btree ("month");--> statement-breakpoint
-- The UTC month (its first day) of a UUIDv7 id's time: the month partition of `events` (and of every table
-- partitioned by id, migration 0018) that the row sits in.
CREATE FUNCTION mailroom_uuid_v7_month(id uuid) RETURNS date LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT date_trunc('month', mailroom_uuid_v7_time(id) AT TIME ZONE 'UTC')::date
$$;
--> statement-breakpoint
CREATE OR REPLACE FUNCTION event_names_after_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO event_name_deltas (project_id, name, count, first_seen_at, last_seen_at, month)
  SELECT project_id, name, count(*), min(created_at), max(created_at), mailroom_uuid_v7_month(id)
  FROM new_rows GROUP BY project_id, name, mailroom_uuid_v7_month(id);
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE OR REPLACE FUNCTION event_names_after_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO event_name_deltas (project_id, name, count, month)
  SELECT project_id, name, -count(*), mailroom_uuid_v7_month(id)
  FROM old_rows GROUP BY project_id, name, mailroom_uuid_v7_month(id);
  RETURN NULL;
END $$;
--> statement-breakpoint
LOCK TABLE "events" IN SHARE MODE;
--> statement-breakpoint
INSERT INTO "event_name_months" (project_id, name, month, count)
SELECT project_id, name, mailroom_uuid_v7_month(id), count(*) FROM "events" GROUP BY 1, 2, 3;
--> statement-breakpoint
-- As in 0017, plus event_name_months: deltas with a month also fold into their month's row (taken in key order);
-- a month row whose count reaches zero with no delta of it pending is removed.
CREATE OR REPLACE FUNCTION mailroom_fold_counter_deltas(batch_size integer) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  folded integer := 0;
  n integer;
  touched_projects uuid[];
  touched_names text[];
  zero_projects uuid[];
  zero_names text[];
  zero_months date[];
BEGIN
  WITH d AS (
    DELETE FROM contact_stat_deltas
    WHERE ctid = ANY (ARRAY(SELECT ctid FROM contact_stat_deltas LIMIT batch_size FOR UPDATE SKIP LOCKED))
    RETURNING project_id, total, subscribed
  ), folded_rows AS (
    INSERT INTO contact_stats AS s (project_id, total, subscribed)
    SELECT d.project_id, sum(d.total), sum(d.subscribed) FROM d
    WHERE EXISTS (SELECT 1 FROM projects p WHERE p.id = d.project_id)
    GROUP BY d.project_id ORDER BY d.project_id
    ON CONFLICT (project_id) DO UPDATE SET total = s.total + excluded.total, subscribed = s.subscribed + excluded.subscribed
    RETURNING 1
  )
  SELECT count(*) INTO n FROM d;
  folded := folded + n;

  WITH d AS (
    DELETE FROM event_name_deltas
    WHERE ctid = ANY (ARRAY(SELECT ctid FROM event_name_deltas LIMIT batch_size FOR UPDATE SKIP LOCKED))
    RETURNING project_id, name, count, first_seen_at, last_seen_at, month
  ), live AS (
    SELECT * FROM d WHERE EXISTS (SELECT 1 FROM projects p WHERE p.id = d.project_id)
  ), sums AS (
    SELECT project_id, name, sum(count) AS count,
      coalesce(min(first_seen_at), 'infinity') AS first_seen_at, coalesce(max(last_seen_at), '-infinity') AS last_seen_at
    FROM live GROUP BY project_id, name
  ), up AS (
    INSERT INTO event_names AS e (project_id, name, count, first_seen_at, last_seen_at)
    SELECT project_id, name, count, first_seen_at, last_seen_at FROM sums ORDER BY project_id, name
    ON CONFLICT (project_id, name) DO UPDATE SET
      count = e.count + excluded.count,
      first_seen_at = least(e.first_seen_at, excluded.first_seen_at),
      last_seen_at = greatest(e.last_seen_at, excluded.last_seen_at)
    RETURNING e.project_id, e.name, e.count
  ), up_months AS (
    INSERT INTO event_name_months AS m (project_id, name, month, count)
    SELECT project_id, name, month, sum(count) FROM live WHERE month IS NOT NULL
    GROUP BY project_id, name, month ORDER BY project_id, name, month
    ON CONFLICT (project_id, name, month) DO UPDATE SET count = m.count + excluded.count
    RETURNING m.project_id, m.name, m.month, m.count
  )
  SELECT (SELECT count(*) FROM d),
    (SELECT array_agg(project_id) FROM up WHERE count <= 0), (SELECT array_agg(name) FROM up WHERE count <= 0),
    (SELECT array_agg(project_id) FROM up_months WHERE count <= 0), (SELECT array_agg(name) FROM up_months WHERE count <= 0),
    (SELECT array_agg(month) FROM up_months WHERE count <= 0)
  INTO n, touched_projects, touched_names, zero_projects, zero_names, zero_months;
  folded := folded + n;

  IF touched_projects IS NOT NULL THEN
    DELETE FROM event_names e USING unnest(touched_projects, touched_names) AS f(project_id, name)
    WHERE e.project_id = f.project_id AND e.name = f.name AND e.count <= 0
      AND NOT EXISTS (SELECT 1 FROM event_name_deltas x WHERE x.project_id = e.project_id AND x.name = e.name);
  END IF;
  IF zero_projects IS NOT NULL THEN
    DELETE FROM event_name_months m USING unnest(zero_projects, zero_names, zero_months) AS f(project_id, name, month)
    WHERE m.project_id = f.project_id AND m.name = f.name AND m.month = f.month AND m.count <= 0
      AND NOT EXISTS (SELECT 1 FROM event_name_deltas x WHERE x.project_id = m.project_id AND x.name = m.name AND x.month = m.month);
  END IF;
  RETURN folded;
END $$;
