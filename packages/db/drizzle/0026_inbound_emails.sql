CREATE TABLE "inbound_emails" (
	"id" uuid PRIMARY KEY NOT NULL,
	"project_id" uuid NOT NULL,
	"ses_message_id" text NOT NULL,
	"status" text NOT NULL,
	"error" text,
	"message_id" text,
	"from_email" text,
	"from_name" text,
	"to" jsonb DEFAULT '[]'::jsonb NOT NULL,
	"cc" jsonb DEFAULT '[]'::jsonb NOT NULL,
	"recipients" jsonb DEFAULT '[]'::jsonb NOT NULL,
	"subject" text,
	"text" text,
	"html" text,
	"headers" jsonb DEFAULT '[]'::jsonb NOT NULL,
	"attachments" jsonb DEFAULT '[]'::jsonb NOT NULL,
	"raw" "bytea",
	"size" integer,
	"verdicts" jsonb NOT NULL,
	"contact_id" uuid,
	"in_reply_to_email_id" uuid,
	"received_at" timestamp with time zone NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "inbound_emails_status_check" CHECK (status in ('received', 'failed'))
);
--> statement-breakpoint
ALTER TABLE "domains" ADD COLUMN "inbound_enabled" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "inbound_emails" ADD CONSTRAINT "inbound_emails_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "inbound_emails" ADD CONSTRAINT "inbound_emails_contact_id_contacts_id_fk" FOREIGN KEY ("contact_id") REFERENCES "public"."contacts"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "inbound_emails_ses_message_idx" ON "inbound_emails" USING btree ("project_id","ses_message_id");--> statement-breakpoint
CREATE INDEX "inbound_emails_project_idx" ON "inbound_emails" USING btree ("project_id","id");--> statement-breakpoint
CREATE INDEX "inbound_emails_retention_idx" ON "inbound_emails" USING btree ("project_id","received_at");--> statement-breakpoint
CREATE INDEX "inbound_emails_contact_idx" ON "inbound_emails" USING btree ("contact_id") WHERE "inbound_emails"."contact_id" is not null;