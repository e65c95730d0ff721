-- Segment member counts kept by statement-level triggers on segment_members (STATIC segments and tracked
-- DYNAMIC ones), so GET /segments never counts members. Rows of segments are taken in id order, so concurrent
-- statements cannot deadlock on them.

CREATE FUNCTION segment_members_after_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE segments s SET member_count = coalesce(s.member_count, 0) + d.n, member_count_at = now()
  FROM (SELECT segment_id, count(*) AS n FROM new_rows GROUP BY segment_id ORDER BY segment_id) d
  WHERE s.id = d.segment_id;
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE FUNCTION segment_members_after_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE segments s SET member_count = greatest(coalesce(s.member_count, 0) - d.n, 0), member_count_at = now()
  FROM (SELECT segment_id, count(*) AS n FROM old_rows GROUP BY segment_id ORDER BY segment_id) d
  WHERE s.id = d.segment_id;
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE TRIGGER segment_members_count_insert AFTER INSERT ON segment_members REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION segment_members_after_insert();
--> statement-breakpoint
CREATE TRIGGER segment_members_count_delete AFTER DELETE ON segment_members REFERENCING OLD TABLE AS old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION segment_members_after_delete();
--> statement-breakpoint
-- Segment filters compare `data` values given as ISO 8601 strings as timestamps. A stored string that looks like
-- a date but is not one (2024-02-31) must not fail the whole query: it simply does not match.
CREATE FUNCTION mailroom_try_timestamptz(value text) RETURNS timestamptz LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
BEGIN
  IF value !~ '^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}(:?\d{2})?)?)?$' THEN
    RETURN NULL;
  END IF;
  RETURN value::timestamptz;
EXCEPTION WHEN others THEN
  RETURN NULL;
END $$;
--> statement-breakpoint
-- A UUIDv7 (RFC 9562 §5.7) whose timestamp is `ts` (millisecond precision), for system events written in bulk by
-- SQL: event ids are UUIDv7 of their created_at, so time filters on events are id ranges.
CREATE FUNCTION mailroom_uuid_v7(ts timestamptz) RETURNS uuid LANGUAGE sql VOLATILE PARALLEL SAFE AS $$
  SELECT encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
    PLACING substring(int8send(floor(extract(epoch FROM ts) * 1000)::bigint) FROM 3) FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid
$$;
