-- Segment previews and counts at scale (docs/decisions/0018-segment-preview-event-index.md): the contacts that performed an event, in contact order, from the
-- index alone. `event.<name> count >= N` is a grouped scan of this index (no hash aggregate of the project's events,
-- which spilled to disk at 1M contacts), `event.<name> exists` / `within` a merge or nested-loop semi-join on it.
CREATE INDEX "events_project_name_contact_idx" ON "events" USING btree ("project_id","name","contact_id","id");
--> statement-breakpoint
-- `events` is partitioned by month (0018): name the new index's partition indexes like the others.
SELECT mailroom_name_partition_indexes('events');
