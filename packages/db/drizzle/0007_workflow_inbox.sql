-- Workflow triggers: every inserted event whose name starts an enabled workflow of its project, or that a WAITING
-- execution of its contact waits for, gets a workflow_inbox row in the inserting transaction (so an accepted event
-- never loses its trigger), and the worker is told on commit (NOTIFY, coalesced per transaction). Events no
-- workflow cares about cost one index probe per statement row and write nothing.
CREATE FUNCTION workflow_inbox_after_event_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO workflow_inbox (id, event_id, project_id, created_at)
  SELECT mailroom_uuid_v7(clock_timestamp()), n.id, n.project_id, now()
  FROM new_rows n
  WHERE EXISTS (SELECT 1 FROM workflows w WHERE w.project_id = n.project_id AND w.enabled AND w.trigger_event = n.name)
     OR EXISTS (SELECT 1 FROM workflow_executions x WHERE x.status = 'WAITING' AND x.project_id = n.project_id
                AND x.contact_id = n.contact_id AND x.wait_event = n.name);
  IF FOUND THEN
    PERFORM pg_notify('mailroom_workflow_inbox', '');
  END IF;
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE TRIGGER events_workflow_inbox AFTER INSERT ON events REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION workflow_inbox_after_event_insert();
