-- Retention: per-project overrides of the retention settings (projects.retention), the content expiry
-- and erasure marks of emails, and one index per retention predicate so each batch of the worker's `retention`
-- maintenance task reads a project's oldest rows through an index (no table scan). suppressions_source_email_idx
-- and emails_workflow_execution_idx serve the `set null` of deleted emails and executions.
-- emails_content_check now admits an email whose content expired (or was erased). The new check is weaker than the
-- old one, so it is added NOT VALID and validated separately (no ACCESS EXCLUSIVE lock held over the scan).
ALTER TABLE "emails" DROP CONSTRAINT "emails_content_check";--> statement-breakpoint
ALTER TABLE "projects" ADD COLUMN "retention" jsonb;--> statement-breakpoint
ALTER TABLE "emails" ADD COLUMN "content_expired_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "emails" ADD COLUMN "erased_at" timestamp with time zone;--> statement-breakpoint
CREATE INDEX "attachments_retention_idx" ON "attachments" USING btree ("project_id","created_at");--> statement-breakpoint
CREATE INDEX "emails_content_retention_idx" ON "emails" USING btree ("project_id","created_at") WHERE "emails"."content_expired_at" is null;--> statement-breakpoint
CREATE INDEX "emails_retention_idx" ON "emails" USING btree ("project_id","created_at") WHERE "emails"."campaign_id" is null;--> statement-breakpoint
CREATE INDEX "emails_workflow_execution_idx" ON "emails" USING btree ("workflow_execution_id") WHERE "emails"."workflow_execution_id" is not null;--> statement-breakpoint
CREATE INDEX "events_retention_idx" ON "events" USING btree ("project_id","created_at");--> statement-breakpoint
CREATE INDEX "suppressions_source_email_idx" ON "suppressions" USING btree ("source_email_id") WHERE "suppressions"."source_email_id" is not null;--> statement-breakpoint
CREATE INDEX "webhook_deliveries_retention_idx" ON "webhook_deliveries" USING btree ("project_id","created_at") WHERE "webhook_deliveries"."status" <> 'pending';--> statement-breakpoint
CREATE INDEX "workflow_executions_retention_idx" ON "workflow_executions" USING btree ("project_id","finished_at") WHERE "workflow_executions"."status" not in ('RUNNING', 'WAITING');--> statement-breakpoint
ALTER TABLE "emails" ADD CONSTRAINT "emails_content_check" CHECK ("emails"."campaign_id" is not null or "emails"."content_expired_at" is not null or ("emails"."subject" is not null and "emails"."body" is not null and "emails"."body_format" is not null)) NOT VALID;--> statement-breakpoint
ALTER TABLE "emails" VALIDATE CONSTRAINT "emails_content_check";