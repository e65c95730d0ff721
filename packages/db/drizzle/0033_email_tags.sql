CREATE TABLE "reputation_tag_counts" (
	"project_id" uuid NOT NULL,
	"tag_name" text NOT NULL,
	"tag_value" text NOT NULL,
	"hour" timestamp with time zone NOT NULL,
	"domain" text NOT NULL,
	"campaign_id" uuid NOT NULL,
	"sent" bigint DEFAULT 0 NOT NULL,
	"delivered" bigint DEFAULT 0 NOT NULL,
	"hard_bounces" bigint DEFAULT 0 NOT NULL,
	"soft_bounces" bigint DEFAULT 0 NOT NULL,
	"complaints" bigint DEFAULT 0 NOT NULL,
	CONSTRAINT "reputation_tag_counts_pkey" PRIMARY KEY("project_id","tag_name","tag_value","hour","domain","campaign_id")
);
--> statement-breakpoint
ALTER TABLE "campaigns" ADD COLUMN "tags" jsonb;--> statement-breakpoint
ALTER TABLE "emails" ADD COLUMN "tags" jsonb;--> statement-breakpoint
ALTER TABLE "reputation_tag_counts" ADD CONSTRAINT "reputation_tag_counts_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;