ALTER TABLE "campaigns" ADD COLUMN "ab_test" jsonb;--> statement-breakpoint
ALTER TABLE "campaigns" ADD COLUMN "ab_phase" text;--> statement-breakpoint
ALTER TABLE "campaigns" ADD COLUMN "ab_decide_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "campaigns" ADD COLUMN "ab_winner" smallint;--> statement-breakpoint
ALTER TABLE "campaigns" ADD COLUMN "ab_decision" jsonb;--> statement-breakpoint
ALTER TABLE "emails" ADD COLUMN "variant" smallint;--> statement-breakpoint
ALTER TABLE "campaigns" ADD CONSTRAINT "campaigns_ab_phase_check" CHECK (ab_phase is null or ab_phase in ('TESTING', 'WAITING', 'WINNER'));