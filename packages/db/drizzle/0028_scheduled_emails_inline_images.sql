-- Scheduled emails (`scheduled` status, `scheduled_at`) and inline attachments (`content_id`, `disposition`).
-- The status check only gains a value: every existing row met the old one, so the new one is added NOT VALID
-- (checked for new and updated rows at once, without reading every month partition under the table's lock).
ALTER TABLE "emails" DROP CONSTRAINT "emails_status_check";--> statement-breakpoint
ALTER TABLE "attachments" ADD COLUMN "content_id" text;--> statement-breakpoint
ALTER TABLE "attachments" ADD COLUMN "disposition" text;--> statement-breakpoint
ALTER TABLE "emails" ADD COLUMN "scheduled_at" timestamp with time zone;--> statement-breakpoint
CREATE INDEX "emails_scheduled_idx" ON "emails" USING btree ("scheduled_at") WHERE "emails"."status" = 'scheduled';--> statement-breakpoint
ALTER TABLE "emails" ADD CONSTRAINT "emails_status_check" CHECK (status in ('scheduled', 'queued', 'sending', 'sent', 'delivered', 'opened', 'clicked', 'bounced', 'complained', 'failed', 'suppressed', 'cancelled')) NOT VALID;--> statement-breakpoint
SELECT mailroom_name_partition_indexes('emails');
