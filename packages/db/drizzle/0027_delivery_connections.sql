ALTER TABLE "domains" ADD COLUMN "ses_connection" text;--> statement-breakpoint
ALTER TABLE "emails" ADD COLUMN "ses_connection" text;--> statement-breakpoint
ALTER TABLE "projects" ADD COLUMN "ses_connection" text;