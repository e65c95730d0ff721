ALTER TABLE "campaigns" ADD COLUMN "skipped_snoozed" bigint DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "contacts" ADD COLUMN "snoozed_until" timestamp with time zone;--> statement-breakpoint
CREATE INDEX "contacts_snoozed_until_idx" ON "contacts" USING btree ("snoozed_until") WHERE "contacts"."snoozed_until" is not null;