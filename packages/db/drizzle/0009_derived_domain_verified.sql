ALTER TABLE "domains" ALTER COLUMN "verified" DROP DEFAULT;--> statement-breakpoint
ALTER TABLE "domains" drop column "verified";--> statement-breakpoint
ALTER TABLE "domains" ADD COLUMN "verified" boolean GENERATED ALWAYS AS (status = 'verified') STORED NOT NULL;