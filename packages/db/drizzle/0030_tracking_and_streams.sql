ALTER TABLE "campaigns" ADD COLUMN "tracking" boolean;--> statement-breakpoint
ALTER TABLE "domains" ADD COLUMN "tracking_domain" text;--> statement-breakpoint
ALTER TABLE "domains" ADD COLUMN "tracking_ready_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "domains" ADD COLUMN "tracking_connection" text;--> statement-breakpoint
ALTER TABLE "emails" ADD COLUMN "tracking" boolean DEFAULT true NOT NULL;--> statement-breakpoint
ALTER TABLE "projects" ADD COLUMN "tracking_mode" text DEFAULT 'ALL' NOT NULL;--> statement-breakpoint
ALTER TABLE "templates" ADD COLUMN "tracking" boolean;--> statement-breakpoint
CREATE INDEX "domains_tracking_pending_idx" ON "domains" USING btree ("checked_at") WHERE "domains"."tracking_domain" is not null and "domains"."tracking_ready_at" is null;--> statement-breakpoint
ALTER TABLE "projects" ADD CONSTRAINT "projects_tracking_mode_check" CHECK (tracking_mode in ('ALL', 'MARKETING_ONLY', 'NONE'));