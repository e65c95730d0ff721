-- Campaign emails in append order (a campaign's fan-out and cancel sweep no slower than before partitioning:
-- docs/decisions/0009-campaign-emails-in-append-order.md).
--
-- Since 0018 one email per (campaign, contact) was the primary key: a campaign email's id was
-- mailroom_uuid_v7_keyed(campaign start, 'campaign-email:<campaign>:<contact>'), whose 74 low bits are a hash, so
-- every fan-out batch inserted at random places of the month partition's `emails_pkey`, `emails_project_id_idx` and
-- `emails_pending_idx` (and the cancel sweep's non-HOT updates did it again), through `ON CONFLICT (id)`, computing
-- a SHA-256 per row. Measured on a 1,000,000-contact campaign: 1.5× the fan-out's and the sweep's time before 0018.
--
-- Now the guarantee is a unique index on (campaign_id, contact_id) of each month partition
-- (`emails_campaign_contact_key_<partition>`, partial: campaign emails only). A partitioned table cannot hold a unique
-- index without its partition key, but every email of a campaign has the millisecond of the campaign's start in its
-- id, so all of them sit in one partition and the partition's index sees them all. It replaces the plain
-- `emails_campaign_contact_idx` (same columns), so a row enters as many indexes as before. The id is
-- mailroom_uuid_v7_ordered(campaign start, nextval('mailroom_campaign_email_seq')): one campaign's emails follow
-- each other in the indexes, in fan-out order. Ids made before (keyed) stay as they are; the unique index holds
-- for them too (they were unique per (campaign, contact) by the primary key).
CREATE SEQUENCE "mailroom_campaign_email_seq" AS bigint;
--> statement-breakpoint
-- A UUIDv7 of the millisecond of `ts` whose 74 other bits are `n` (0 ≤ n < 2^62; the 12 bits after the version
-- are zero): ids of one `ts` sort by `n`. One expression of immutable functions only (the epoch of the UTC
-- timestamp: `extract` from a timestamptz is merely stable), so the planner inlines it: no function call per row.
CREATE FUNCTION mailroom_uuid_v7_ordered(ts timestamptz, n bigint) RETURNS uuid LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT encode(substring(int8send(floor(extract(epoch FROM (ts AT TIME ZONE 'UTC')) * 1000)::bigint) FROM 3) || '\x7000'::bytea
    || int8send(n | (-9223372036854775807 - 1)), 'hex')::uuid
$$;
--> statement-breakpoint
-- The unique index of one partition of `emails` (month or default) on (campaign_id, contact_id).
CREATE FUNCTION mailroom_campaign_contact_key(part text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE format('CREATE UNIQUE INDEX IF NOT EXISTS %I ON %I (campaign_id, contact_id) WHERE campaign_id IS NOT NULL',
    'emails_campaign_contact_key_' || substring(part FROM length('emails') + 2), part);
END $$;
--> statement-breakpoint
SELECT mailroom_campaign_contact_key(c.relname) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
WHERE i.inhparent = 'emails'::regclass;
--> statement-breakpoint
DROP INDEX "emails_campaign_contact_idx";
--> statement-breakpoint
-- As in 0022, and a new month of `emails` gets its unique index on (campaign_id, contact_id) before it is attached.
CREATE OR REPLACE FUNCTION mailroom_month_partition(parent text, month date) RETURNS text LANGUAGE plpgsql AS $$
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
  IF strays AND (EXISTS (SELECT 1 FROM pg_constraint WHERE contype = 'f' AND confrelid = parent::regclass)
      OR EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = parent::regclass AND tgfoid = 'mailroom_reference_cascade'::regproc)) THEN
    RETURN 'blocked';
  END IF;
  EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', part, parent);
  IF parent = 'emails' THEN PERFORM mailroom_campaign_contact_key(part); END IF;
  IF strays THEN
    -- No write to the default partition between the copy and the delete (the ATTACH below locks it wholly anyway).
    EXECUTE format('LOCK TABLE %I IN EXCLUSIVE MODE', dflt);
    -- Straight into the partitions: the parent's statement triggers (event counters, workflow inbox) do not fire.
    EXECUTE format('INSERT INTO %I SELECT * FROM %I WHERE id >= %L AND id < %L', part, dflt, lo, hi);
    EXECUTE format('DELETE FROM %I WHERE id >= %L AND id < %L', dflt, lo, hi);
  END IF;
  EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', parent, part, lo, hi);
  PERFORM mailroom_name_partition_indexes(parent);
  RETURN CASE WHEN strays THEN 'moved' ELSE 'created' END;
END $$;
