DROP INDEX "domains_project_idx";--> statement-breakpoint
ALTER TABLE "domains" ADD COLUMN "status" text DEFAULT 'pending' NOT NULL;--> statement-breakpoint
ALTER TABLE "domains" ADD COLUMN "dkim_tokens" text[] DEFAULT '{}'::text[] NOT NULL;--> statement-breakpoint
ALTER TABLE "domains" ADD COLUMN "mail_from_domain" text;--> statement-breakpoint
ALTER TABLE "domains" ADD COLUMN "records" jsonb DEFAULT '[]'::jsonb NOT NULL;--> statement-breakpoint
ALTER TABLE "domains" ADD COLUMN "checked_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "domains" ADD COLUMN "failed_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "domains" ADD COLUMN "failure_reason" text;--> statement-breakpoint
-- Domains registered before identities existed (operator CLI / admin API) keep their state.
UPDATE "domains" SET "status" = 'verified' WHERE "verified";--> statement-breakpoint
CREATE INDEX "domains_pending_idx" ON "domains" USING btree ("checked_at") WHERE "domains"."status" = 'pending';--> statement-breakpoint
CREATE INDEX "domains_project_idx" ON "domains" USING btree ("project_id","id");--> statement-breakpoint
ALTER TABLE "domains" ADD CONSTRAINT "domains_status_check" CHECK (status in ('pending', 'verified', 'failed'));