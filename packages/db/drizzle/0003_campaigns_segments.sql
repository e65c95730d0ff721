CREATE TABLE "segment_members" (
	"segment_id" uuid NOT NULL,
	"contact_id" uuid NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "segment_members_segment_id_contact_id_pk" PRIMARY KEY("segment_id","contact_id")
);
--> statement-breakpoint
CREATE TABLE "segments" (
	"id" uuid PRIMARY KEY NOT NULL,
	"project_id" uuid NOT NULL,
	"name" text NOT NULL,
	"description" text,
	"type" text NOT NULL,
	"filter" jsonb,
	"track_membership" boolean DEFAULT false NOT NULL,
	"member_count" bigint,
	"member_count_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "segments_type_check" CHECK ("segments"."type" in ('DYNAMIC', 'STATIC')),
	CONSTRAINT "segments_filter_check" CHECK (("segments"."type" = 'DYNAMIC') = ("segments"."filter" is not null))
);
--> statement-breakpoint
CREATE TABLE "campaigns" (
	"id" uuid PRIMARY KEY NOT NULL,
	"project_id" uuid NOT NULL,
	"name" text NOT NULL,
	"description" text,
	"subject" text NOT NULL,
	"body" text NOT NULL,
	"from_email" text NOT NULL,
	"from_name" text,
	"reply_to" text,
	"audience_type" text NOT NULL,
	"segment_id" uuid,
	"audience_filter" jsonb,
	"status" text DEFAULT 'DRAFT' NOT NULL,
	"scheduled_at" timestamp with time zone,
	"started_at" timestamp with time zone,
	"completed_at" timestamp with time zone,
	"cancelled_at" timestamp with time zone,
	"error" text,
	"recipients" bigint DEFAULT 0 NOT NULL,
	"fanout_cursor" uuid,
	"fanout_done" boolean DEFAULT false NOT NULL,
	"enqueue_cursor" uuid,
	"unsubscribed" bigint DEFAULT 0 NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "campaigns_status_check" CHECK (status in ('DRAFT', 'SCHEDULED', 'SENDING', 'SENT', 'CANCELLED', 'FAILED')),
	CONSTRAINT "campaigns_audience_check" CHECK ("campaigns"."audience_type" in ('ALL', 'SEGMENT', 'FILTERED'))
);
--> statement-breakpoint
ALTER TABLE "emails" ALTER COLUMN "subject" DROP NOT NULL;--> statement-breakpoint
ALTER TABLE "emails" ALTER COLUMN "body" DROP NOT NULL;--> statement-breakpoint
ALTER TABLE "emails" ALTER COLUMN "body_format" DROP NOT NULL;--> statement-breakpoint
ALTER TABLE "projects" ADD COLUMN "signing_key" "bytea" DEFAULT decode(replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''), 'hex') NOT NULL;--> statement-breakpoint
ALTER TABLE "emails" ADD COLUMN "campaign_id" uuid;--> statement-breakpoint
ALTER TABLE "emails" ADD COLUMN "marketing" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "segment_members" ADD CONSTRAINT "segment_members_segment_id_segments_id_fk" FOREIGN KEY ("segment_id") REFERENCES "public"."segments"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "segment_members" ADD CONSTRAINT "segment_members_contact_id_contacts_id_fk" FOREIGN KEY ("contact_id") REFERENCES "public"."contacts"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "segments" ADD CONSTRAINT "segments_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "campaigns" ADD CONSTRAINT "campaigns_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "campaigns" ADD CONSTRAINT "campaigns_segment_id_segments_id_fk" FOREIGN KEY ("segment_id") REFERENCES "public"."segments"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "segment_members_contact_idx" ON "segment_members" USING btree ("contact_id");--> statement-breakpoint
CREATE INDEX "segments_project_id_idx" ON "segments" USING btree ("project_id","id");--> statement-breakpoint
CREATE UNIQUE INDEX "segments_project_name_idx" ON "segments" USING btree ("project_id","name");--> statement-breakpoint
CREATE INDEX "campaigns_project_id_idx" ON "campaigns" USING btree ("project_id","id");--> statement-breakpoint
CREATE INDEX "campaigns_project_status_idx" ON "campaigns" USING btree ("project_id","status","id");--> statement-breakpoint
CREATE INDEX "campaigns_segment_idx" ON "campaigns" USING btree ("segment_id") WHERE "campaigns"."segment_id" is not null;--> statement-breakpoint
CREATE INDEX "campaigns_active_idx" ON "campaigns" USING btree ("id") WHERE "campaigns"."status" in ('SCHEDULED', 'SENDING');--> statement-breakpoint
ALTER TABLE "emails" ADD CONSTRAINT "emails_campaign_id_campaigns_id_fk" FOREIGN KEY ("campaign_id") REFERENCES "public"."campaigns"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "contacts_data_idx" ON "contacts" USING gin ("project_id","data" jsonb_path_ops);--> statement-breakpoint
CREATE UNIQUE INDEX "emails_campaign_contact_idx" ON "emails" USING btree ("campaign_id","contact_id") WHERE "emails"."campaign_id" is not null;--> statement-breakpoint
CREATE INDEX "emails_campaign_status_idx" ON "emails" USING btree ("campaign_id","status","sent_at") WHERE "emails"."campaign_id" is not null;--> statement-breakpoint
CREATE INDEX "emails_campaign_pending_idx" ON "emails" USING btree ("campaign_id","contact_id") WHERE "emails"."campaign_id" is not null and "emails"."status" in ('queued', 'sending');--> statement-breakpoint
ALTER TABLE "emails" ADD CONSTRAINT "emails_content_check" CHECK ("emails"."campaign_id" is not null or ("emails"."subject" is not null and "emails"."body" is not null and "emails"."body_format" is not null));