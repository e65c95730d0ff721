-- Maintained counters, so lists never count millions of rows:
--   contact_stats (total and subscribed contacts per project) from statement-level triggers on contacts;
--   event_names (count, first and last seen per event name) from statement-level triggers on events.
-- Statement-level triggers with transition tables add one aggregated UPDATE per statement (a 5,000-row import
-- batch touches its project's counter once). Counter rows are taken in project order, so concurrent statements
-- cannot deadlock on them.

CREATE FUNCTION contact_stats_after_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO contact_stats AS s (project_id, total, subscribed)
  SELECT project_id, count(*), count(*) FILTER (WHERE subscribed) FROM new_rows GROUP BY project_id ORDER BY project_id
  ON CONFLICT (project_id) DO UPDATE SET total = s.total + excluded.total, subscribed = s.subscribed + excluded.subscribed;
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE FUNCTION contact_stats_after_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE contact_stats s SET subscribed = s.subscribed + d.delta
  FROM (
    SELECT n.project_id, sum(CASE WHEN n.subscribed THEN 1 ELSE -1 END) AS delta
    FROM new_rows n JOIN old_rows o ON o.id = n.id
    WHERE n.subscribed IS DISTINCT FROM o.subscribed
    GROUP BY n.project_id ORDER BY n.project_id
  ) d
  WHERE s.project_id = d.project_id AND d.delta <> 0;
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE FUNCTION contact_stats_after_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE contact_stats s SET total = s.total - d.n, subscribed = s.subscribed - d.subs
  FROM (
    SELECT project_id, count(*) AS n, count(*) FILTER (WHERE subscribed) AS subs
    FROM old_rows GROUP BY project_id ORDER BY project_id
  ) d
  WHERE s.project_id = d.project_id;
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE TRIGGER contacts_stats_insert AFTER INSERT ON contacts REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION contact_stats_after_insert();
--> statement-breakpoint
CREATE TRIGGER contacts_stats_update AFTER UPDATE ON contacts REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION contact_stats_after_update();
--> statement-breakpoint
CREATE TRIGGER contacts_stats_delete AFTER DELETE ON contacts REFERENCING OLD TABLE AS old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION contact_stats_after_delete();
--> statement-breakpoint
INSERT INTO contact_stats (project_id, total, subscribed)
SELECT project_id, count(*), count(*) FILTER (WHERE subscribed) FROM contacts GROUP BY project_id;
--> statement-breakpoint
CREATE FUNCTION event_names_after_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO event_names AS e (project_id, name, count, first_seen_at, last_seen_at)
  SELECT project_id, name, count(*), min(created_at), max(created_at) FROM new_rows
  GROUP BY project_id, name ORDER BY project_id, name
  ON CONFLICT (project_id, name) DO UPDATE SET
    count = e.count + excluded.count,
    first_seen_at = least(e.first_seen_at, excluded.first_seen_at),
    last_seen_at = greatest(e.last_seen_at, excluded.last_seen_at);
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE FUNCTION event_names_after_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE event_names e SET count = e.count - d.n
  FROM (SELECT project_id, name, count(*) AS n FROM old_rows GROUP BY project_id, name ORDER BY project_id, name) d
  WHERE e.project_id = d.project_id AND e.name = d.name;
  DELETE FROM event_names e USING (SELECT DISTINCT project_id, name FROM old_rows) d
  WHERE e.project_id = d.project_id AND e.name = d.name AND e.count <= 0;
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE TRIGGER events_names_insert AFTER INSERT ON events REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION event_names_after_insert();
--> statement-breakpoint
CREATE TRIGGER events_names_delete AFTER DELETE ON events REFERENCING OLD TABLE AS old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION event_names_after_delete();
