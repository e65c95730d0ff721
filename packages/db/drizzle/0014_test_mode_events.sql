-- Test mode reaches workflows: an event recorded with a test key (or by a test execution, or through a test
-- email's unsubscribe link) has events.test; the executions it starts are test executions (their SEND_EMAIL
-- emails are test emails, delivered to the sink). Both columns default to false: adding them rewrites no table.
ALTER TABLE "events" ADD COLUMN "test" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "workflow_executions" ADD COLUMN "test" boolean DEFAULT false NOT NULL;--> statement-breakpoint
-- The inbox trigger of 0007, with the wake rule: a WAITING execution is woken only by an event of its own mode
-- (test by test, live by live), so an event of the other mode writes no inbox row for it. The drainer reads
-- events.test through the row's event_id.
CREATE OR REPLACE FUNCTION workflow_inbox_after_event_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO workflow_inbox (id, event_id, project_id, created_at)
  SELECT mailroom_uuid_v7(clock_timestamp()), n.id, n.project_id, now()
  FROM new_rows n
  WHERE EXISTS (SELECT 1 FROM workflows w WHERE w.project_id = n.project_id AND w.enabled AND w.trigger_event = n.name)
     OR EXISTS (SELECT 1 FROM workflow_executions x WHERE x.status = 'WAITING' AND x.project_id = n.project_id
                AND x.contact_id = n.contact_id AND x.wait_event = n.name AND x.test = n.test);
  IF FOUND THEN
    PERFORM pg_notify('mailroom_workflow_inbox', '');
  END IF;
  RETURN NULL;
END $$;
