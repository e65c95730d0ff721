-- References to a partitioned table, checked and cascaded per statement instead of per row (docs/decisions/0008-partition-references-by-statement-triggers.md).
--
-- A foreign key whose referenced table is partitioned runs, for every row it checks on insert and every row it
-- cascades to on delete, a query on the partitioned parent whose generic plan starts (and locks) every month
-- partition. Measured on Postgres 15 with 17 month partitions of `emails`: 100,000 timeline rows inserted in 0.70 s
-- without the key, 5.1 s with it (44 µs a row for the check); one statement deleting 5,000 emails and their 28,126
-- timeline rows took 197 ms by the key's cascade.
--
-- The two references written on hot paths become statement-level triggers that do the same work once per
-- statement:
-- - `email_events.email_id` → `emails.id`: every timeline row (send, worker, SES feedback, campaign cancel sweeps);
-- - `webhook_attempts.delivery_id` → `webhook_deliveries.id`: every webhook attempt.
-- The check locks the referenced rows FOR KEY SHARE, as the key's check does, so a concurrent delete of them waits
-- for the inserting transaction and its delete trigger then sees (and removes) the new rows. A missing row raises
-- `foreign_key_violation` (23503). The delete triggers remove the referencing rows of every deleted row in one
-- statement (ON DELETE CASCADE). Statement triggers of a partitioned table fire for statements on the parent only:
-- rows moved between partitions by `mailroom_month_partition` (INSERT into a partition, DELETE from the default)
-- and partitions detached or dropped fire nothing, as before (a month's drop deletes its referencing rows first).
-- The other references to partitioned tables (test messages, a suppression's source email, an email's workflow
-- step run) are written rarely and stay foreign keys.
-- Plans. A plan PL/pgSQL keeps for a statement over the partitioned parent keeps the scan it chose for each month
-- partition when it was planned: a month created ahead is empty then, and a kept plan scanned it whole for every
-- row once it had filled (the history bench's fill of the current month ran for minutes instead of 7 s). So every
-- lookup is planned when it runs, on the partitions as they are: up to 16 referenced rows one by one, each planned
-- for its value and pruned to its month (`plan_cache_mode = force_custom_plan`), as a foreign key checks a row;
-- more in one set-based statement planned by EXECUTE (about 0.3 ms of planning, once per statement). The two
-- references are spelled out (static SQL per table) rather than built from the trigger's arguments: the generic
-- form, each lookup an EXECUTE … USING, measured 66 µs per single-row insert against 52 µs.
CREATE FUNCTION mailroom_reference_check() RETURNS trigger LANGUAGE plpgsql SET plan_cache_mode = force_custom_plan AS $$
DECLARE
  ref uuid;
  wanted bigint;
  present bigint := 0;
BEGIN
  IF TG_TABLE_NAME = 'email_events' THEN
    SELECT count(DISTINCT email_id) INTO wanted FROM new_rows;
    IF wanted <= 16 THEN
      FOR ref IN SELECT DISTINCT email_id FROM new_rows LOOP
        PERFORM 1 FROM emails WHERE id = ref FOR KEY SHARE;
        IF FOUND THEN present := present + 1; END IF;
      END LOOP;
    ELSE
      EXECUTE 'SELECT count(*) FROM (SELECT 1 FROM emails r WHERE r.id IN (SELECT email_id FROM new_rows) FOR KEY SHARE OF r) locked' INTO present;
    END IF;
  ELSIF TG_TABLE_NAME = 'webhook_attempts' THEN
    SELECT count(DISTINCT delivery_id) INTO wanted FROM new_rows;
    IF wanted <= 16 THEN
      FOR ref IN SELECT DISTINCT delivery_id FROM new_rows LOOP
        PERFORM 1 FROM webhook_deliveries WHERE id = ref FOR KEY SHARE;
        IF FOUND THEN present := present + 1; END IF;
      END LOOP;
    ELSE
      EXECUTE 'SELECT count(*) FROM (SELECT 1 FROM webhook_deliveries r WHERE r.id IN (SELECT delivery_id FROM new_rows) FOR KEY SHARE OF r) locked' INTO present;
    END IF;
  ELSE
    RAISE EXCEPTION 'mailroom_reference_check: no reference defined for %', TG_TABLE_NAME;
  END IF;
  IF present < wanted THEN
    RAISE EXCEPTION USING ERRCODE = 'foreign_key_violation', TABLE = TG_TABLE_NAME, COLUMN = TG_ARGV[0],
      MESSAGE = format('insert on table "%s" references %s row(s) not present in table "%s"', TG_TABLE_NAME, wanted - present, TG_ARGV[1]);
  END IF;
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE TRIGGER email_events_reference_check AFTER INSERT ON email_events REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION mailroom_reference_check('email_id', 'emails');
--> statement-breakpoint
CREATE TRIGGER webhook_attempts_reference_check AFTER INSERT ON webhook_attempts REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION mailroom_reference_check('delivery_id', 'webhook_deliveries');
--> statement-breakpoint
-- Planned at every statement (EXECUTE), for the reason above.
CREATE FUNCTION mailroom_reference_cascade() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_TABLE_NAME = 'emails' THEN
    EXECUTE 'DELETE FROM email_events WHERE email_id IN (SELECT id FROM old_rows)';
  ELSIF TG_TABLE_NAME = 'webhook_deliveries' THEN
    EXECUTE 'DELETE FROM webhook_attempts WHERE delivery_id IN (SELECT id FROM old_rows)';
  ELSE
    RAISE EXCEPTION 'mailroom_reference_cascade: no reference defined for %', TG_TABLE_NAME;
  END IF;
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE TRIGGER emails_reference_cascade AFTER DELETE ON emails REFERENCING OLD TABLE AS old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION mailroom_reference_cascade();
--> statement-breakpoint
CREATE TRIGGER webhook_deliveries_reference_cascade AFTER DELETE ON webhook_deliveries REFERENCING OLD TABLE AS old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION mailroom_reference_cascade();
--> statement-breakpoint
ALTER TABLE "email_events" DROP CONSTRAINT "email_events_email_id_emails_id_fk";
--> statement-breakpoint
ALTER TABLE "webhook_attempts" DROP CONSTRAINT "webhook_attempts_delivery_id_webhook_deliveries_id_fk";
--> statement-breakpoint
-- A reference checked per statement is checked on insert only: the referencing column never changes.
CREATE FUNCTION mailroom_reference_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION USING ERRCODE = 'feature_not_supported', TABLE = TG_ARGV[0], COLUMN = TG_ARGV[1],
    MESSAGE = format('%s.%s cannot change', TG_ARGV[0], TG_ARGV[1]);
END $$;
--> statement-breakpoint
CREATE TRIGGER email_events_email_id_immutable BEFORE UPDATE OF email_id ON email_events
  FOR EACH ROW WHEN (OLD.email_id IS DISTINCT FROM NEW.email_id) EXECUTE FUNCTION mailroom_reference_immutable('email_events', 'email_id');
--> statement-breakpoint
CREATE TRIGGER webhook_attempts_delivery_id_immutable BEFORE UPDATE OF delivery_id ON webhook_attempts
  FOR EACH ROW WHEN (OLD.delivery_id IS DISTINCT FROM NEW.delivery_id) EXECUTE FUNCTION mailroom_reference_immutable('webhook_attempts', 'delivery_id');
--> statement-breakpoint
-- A table referenced through these triggers stays unmoved when a month is made over rows waiting in its default
-- partition, as one referenced by a foreign key does: webhook deliveries are updated in place, and a move (copy
-- into the month, then delete from the default partition) would lose an update committed between the two, and an
-- update waiting on a row would find it gone. The default partition is also locked before the copy, so that no row
-- written to it meanwhile (in the tables that still move) is deleted without having been copied.
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
--> statement-breakpoint
-- The referenced key cannot change either (the foreign key refused it: NO ACTION on update).
CREATE TRIGGER emails_id_immutable BEFORE UPDATE OF id ON emails
  FOR EACH ROW WHEN (OLD.id IS DISTINCT FROM NEW.id) EXECUTE FUNCTION mailroom_reference_immutable('emails', 'id');
--> statement-breakpoint
CREATE TRIGGER webhook_deliveries_id_immutable BEFORE UPDATE OF id ON webhook_deliveries
  FOR EACH ROW WHEN (OLD.id IS DISTINCT FROM NEW.id) EXECUTE FUNCTION mailroom_reference_immutable('webhook_deliveries', 'id');
--> statement-breakpoint
-- TRUNCATE of a referenced table leaves no orphans: refused unless the referencing table is truncated with it
-- (`truncate emails, email_events`), as the foreign key refused `truncate emails` without CASCADE.
CREATE FUNCTION mailroom_reference_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  left_over boolean;
BEGIN
  EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I)', TG_ARGV[0]) INTO left_over;
  IF left_over THEN
    RAISE EXCEPTION USING ERRCODE = 'feature_not_supported', TABLE = TG_TABLE_NAME,
      MESSAGE = format('cannot truncate "%s" while "%s" references it: truncate both', TG_TABLE_NAME, TG_ARGV[0]);
  END IF;
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE TRIGGER emails_reference_truncate AFTER TRUNCATE ON emails
  FOR EACH STATEMENT EXECUTE FUNCTION mailroom_reference_truncate('email_events');
--> statement-breakpoint
CREATE TRIGGER webhook_deliveries_reference_truncate AFTER TRUNCATE ON webhook_deliveries
  FOR EACH STATEMENT EXECUTE FUNCTION mailroom_reference_truncate('webhook_attempts');
