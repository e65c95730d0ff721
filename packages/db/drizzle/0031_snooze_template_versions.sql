CREATE TABLE "template_versions" (
	"id" uuid PRIMARY KEY NOT NULL,
	"project_id" uuid NOT NULL,
	"template_id" uuid NOT NULL,
	"version" integer NOT NULL,
	"subject" text NOT NULL,
	"body" text NOT NULL,
	"from_email" text,
	"from_name" text,
	"reply_to" text,
	"published_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "campaigns" ADD COLUMN "template_id" uuid;--> statement-breakpoint
ALTER TABLE "campaigns" ADD COLUMN "template_version" integer;--> statement-breakpoint
ALTER TABLE "campaigns" ADD COLUMN "content_version" integer;--> statement-breakpoint
ALTER TABLE "campaigns" ADD COLUMN "skipped_snoozed" bigint DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "contacts" ADD COLUMN "snoozed_until" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "emails" ADD COLUMN "template_version" integer;--> statement-breakpoint
ALTER TABLE "templates" ADD COLUMN "version" integer DEFAULT 1 NOT NULL;--> statement-breakpoint
ALTER TABLE "template_versions" ADD CONSTRAINT "template_versions_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "template_versions" ADD CONSTRAINT "template_versions_template_id_templates_id_fk" FOREIGN KEY ("template_id") REFERENCES "public"."templates"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "template_versions_template_version_idx" ON "template_versions" USING btree ("template_id","version");--> statement-breakpoint
CREATE UNIQUE INDEX "template_versions_one_draft_idx" ON "template_versions" USING btree ("template_id") WHERE "template_versions"."published_at" is null;--> statement-breakpoint
ALTER TABLE "campaigns" ADD CONSTRAINT "campaigns_template_id_templates_id_fk" FOREIGN KEY ("template_id") REFERENCES "public"."templates"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "contacts_snoozed_until_idx" ON "contacts" USING btree ("snoozed_until") WHERE "contacts"."snoozed_until" is not null;--> statement-breakpoint
-- Backfill (inserts only; no existing row is rewritten): every template's current content becomes its version 1, published.
INSERT INTO "template_versions" ("id", "project_id", "template_id", "version", "subject", "body", "from_email", "from_name", "reply_to", "published_at", "created_at", "updated_at")
SELECT mailroom_uuid_v7(t."created_at"), t."project_id", t."id", 1, t."subject", t."body", t."from_email", t."from_name", t."reply_to", t."updated_at", t."created_at", t."updated_at"
FROM "templates" t
ON CONFLICT DO NOTHING;
