CREATE TABLE "campaign_events" (
	"id" uuid PRIMARY KEY NOT NULL,
	"campaign_id" uuid NOT NULL,
	"project_id" uuid NOT NULL,
	"type" text NOT NULL,
	"data" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "reputation_counts" (
	"project_id" uuid NOT NULL,
	"hour" timestamp with time zone NOT NULL,
	"domain" text NOT NULL,
	"campaign_id" uuid NOT NULL,
	"sent" bigint DEFAULT 0 NOT NULL,
	"delivered" bigint DEFAULT 0 NOT NULL,
	"hard_bounces" bigint DEFAULT 0 NOT NULL,
	"soft_bounces" bigint DEFAULT 0 NOT NULL,
	"complaints" bigint DEFAULT 0 NOT NULL,
	CONSTRAINT "reputation_counts_project_id_hour_domain_campaign_id_pk" PRIMARY KEY("project_id","hour","domain","campaign_id")
);
--> statement-breakpoint
CREATE TABLE "test_messages" (
	"email_id" uuid PRIMARY KEY NOT NULL,
	"project_id" uuid NOT NULL,
	"raw" "bytea" NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "campaigns" DROP CONSTRAINT "campaigns_status_check";--> statement-breakpoint
ALTER TABLE "api_keys" ADD COLUMN "mode" text DEFAULT 'live' NOT NULL;--> statement-breakpoint
ALTER TABLE "projects" ADD COLUMN "guardrails" jsonb;--> statement-breakpoint
ALTER TABLE "emails" ADD COLUMN "test" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "emails" ADD COLUMN "bounce_type" text;--> statement-breakpoint
ALTER TABLE "emails" ADD COLUMN "failure_kind" text;--> statement-breakpoint
ALTER TABLE "emails" ADD COLUMN "retried_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "campaigns" ADD COLUMN "paused_reason" text;--> statement-breakpoint
ALTER TABLE "campaigns" ADD COLUMN "paused_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "campaigns" ADD COLUMN "pause_details" jsonb;--> statement-breakpoint
ALTER TABLE "campaigns" ADD COLUMN "test" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "campaigns" ADD COLUMN "retry_failed_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "campaign_events" ADD CONSTRAINT "campaign_events_campaign_id_campaigns_id_fk" FOREIGN KEY ("campaign_id") REFERENCES "public"."campaigns"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "campaign_events" ADD CONSTRAINT "campaign_events_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "reputation_counts" ADD CONSTRAINT "reputation_counts_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "test_messages" ADD CONSTRAINT "test_messages_email_id_emails_id_fk" FOREIGN KEY ("email_id") REFERENCES "public"."emails"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "test_messages" ADD CONSTRAINT "test_messages_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "campaign_events_campaign_idx" ON "campaign_events" USING btree ("campaign_id","id");--> statement-breakpoint
CREATE INDEX "reputation_counts_campaign_idx" ON "reputation_counts" USING btree ("campaign_id") WHERE "reputation_counts"."campaign_id" <> '00000000-0000-0000-0000-000000000000'::uuid;--> statement-breakpoint
CREATE INDEX "reputation_counts_hour_idx" ON "reputation_counts" USING btree ("hour");--> statement-breakpoint
CREATE INDEX "test_messages_project_idx" ON "test_messages" USING btree ("project_id");--> statement-breakpoint
CREATE INDEX "campaigns_paused_idx" ON "campaigns" USING btree ("paused_reason","id") WHERE "campaigns"."status" = 'PAUSED';--> statement-breakpoint
ALTER TABLE "api_keys" ADD CONSTRAINT "api_keys_mode_check" CHECK ("api_keys"."mode" in ('live', 'test'));--> statement-breakpoint
ALTER TABLE "emails" ADD CONSTRAINT "emails_bounce_type_check" CHECK ("emails"."bounce_type" is null or "emails"."bounce_type" in ('hard', 'soft'));--> statement-breakpoint
ALTER TABLE "emails" ADD CONSTRAINT "emails_failure_kind_check" CHECK ("emails"."failure_kind" is null or "emails"."failure_kind" in ('transient', 'permanent'));--> statement-breakpoint
ALTER TABLE "campaigns" ADD CONSTRAINT "campaigns_pause_reason_check" CHECK (paused_reason is null or paused_reason in ('bounce_rate', 'complaint_rate', 'quota'));--> statement-breakpoint
ALTER TABLE "campaigns" ADD CONSTRAINT "campaigns_status_check" CHECK (status in ('DRAFT', 'SCHEDULED', 'SENDING', 'PAUSED', 'SENT', 'CANCELLED', 'FAILED'));