CREATE TABLE "contact_confirmations" (
	"id" uuid PRIMARY KEY NOT NULL,
	"project_id" uuid NOT NULL,
	"contact_id" uuid NOT NULL,
	"topic_ids" jsonb DEFAULT '[]'::jsonb NOT NULL,
	"created_contact" boolean DEFAULT false NOT NULL,
	"email_id" uuid,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"confirmed_at" timestamp with time zone,
	"ip" text,
	"user_agent" text,
	"expired_at" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "contact_topics" (
	"contact_id" uuid NOT NULL,
	"topic_id" uuid NOT NULL,
	"project_id" uuid NOT NULL,
	"subscribed" boolean NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "contact_topics_contact_id_topic_id_pk" PRIMARY KEY("contact_id","topic_id")
);
--> statement-breakpoint
CREATE TABLE "topics" (
	"id" uuid PRIMARY KEY NOT NULL,
	"project_id" uuid NOT NULL,
	"name" text NOT NULL,
	"description" text,
	"default_subscription" text NOT NULL,
	"visibility" text DEFAULT 'public' NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "topics_default_check" CHECK ("topics"."default_subscription" in ('opt_in', 'opt_out')),
	CONSTRAINT "topics_visibility_check" CHECK ("topics"."visibility" in ('public', 'private'))
);
--> statement-breakpoint
ALTER TABLE "campaigns" ADD COLUMN "topic_id" uuid;--> statement-breakpoint
ALTER TABLE "emails" ADD COLUMN "topic_id" uuid;--> statement-breakpoint
ALTER TABLE "contact_confirmations" ADD CONSTRAINT "contact_confirmations_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "contact_confirmations" ADD CONSTRAINT "contact_confirmations_contact_id_contacts_id_fk" FOREIGN KEY ("contact_id") REFERENCES "public"."contacts"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "contact_topics" ADD CONSTRAINT "contact_topics_contact_id_contacts_id_fk" FOREIGN KEY ("contact_id") REFERENCES "public"."contacts"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "contact_topics" ADD CONSTRAINT "contact_topics_topic_id_topics_id_fk" FOREIGN KEY ("topic_id") REFERENCES "public"."topics"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "contact_topics" ADD CONSTRAINT "contact_topics_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "topics" ADD CONSTRAINT "topics_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "contact_confirmations_contact_idx" ON "contact_confirmations" USING btree ("contact_id","id");--> statement-breakpoint
CREATE INDEX "contact_confirmations_pending_idx" ON "contact_confirmations" USING btree ("created_at") WHERE "contact_confirmations"."confirmed_at" is null and "contact_confirmations"."expired_at" is null;--> statement-breakpoint
CREATE INDEX "contact_topics_topic_idx" ON "contact_topics" USING btree ("topic_id","subscribed");--> statement-breakpoint
CREATE INDEX "topics_project_id_idx" ON "topics" USING btree ("project_id","id");--> statement-breakpoint
CREATE UNIQUE INDEX "topics_project_name_idx" ON "topics" USING btree ("project_id",lower("name"));