# One image for api, worker and migrate (target "runtime"); a small one for the local SES emulator ("ses").

FROM node:22-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
COPY packages/audiences/package.json packages/audiences/
COPY packages/campaigns/package.json packages/campaigns/
COPY packages/config/package.json packages/config/
COPY packages/contacts/package.json packages/contacts/
COPY packages/db/package.json packages/db/
COPY packages/feedback/package.json packages/feedback/
COPY packages/mail/package.json packages/mail/
COPY packages/platform/package.json packages/platform/
COPY packages/plunk-import/package.json packages/plunk-import/
COPY packages/projects/package.json packages/projects/
COPY packages/queues/package.json packages/queues/
COPY packages/retention/package.json packages/retention/
COPY packages/sending/package.json packages/sending/
COPY packages/verify/package.json packages/verify/
COPY packages/webhooks/package.json packages/webhooks/
COPY packages/workflows/package.json packages/workflows/
COPY apps/api/package.json apps/api/
COPY apps/worker/package.json apps/worker/
# No install scripts: none is needed to build or run, and free-email-domains' would re-download its list.
RUN npm install --no-audit --no-fund --ignore-scripts

FROM deps AS build
COPY tsconfig.base.json tsconfig.json ./
COPY packages packages
COPY apps apps
RUN npm run build

FROM node:22-bookworm-slim AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
COPY packages/audiences/package.json packages/audiences/
COPY packages/campaigns/package.json packages/campaigns/
COPY packages/config/package.json packages/config/
COPY packages/contacts/package.json packages/contacts/
COPY packages/db/package.json packages/db/
COPY packages/feedback/package.json packages/feedback/
COPY packages/mail/package.json packages/mail/
COPY packages/platform/package.json packages/platform/
COPY packages/plunk-import/package.json packages/plunk-import/
COPY packages/projects/package.json packages/projects/
COPY packages/queues/package.json packages/queues/
COPY packages/retention/package.json packages/retention/
COPY packages/sending/package.json packages/sending/
COPY packages/verify/package.json packages/verify/
COPY packages/webhooks/package.json packages/webhooks/
COPY packages/workflows/package.json packages/workflows/
COPY apps/api/package.json apps/api/
COPY apps/worker/package.json apps/worker/
RUN npm install --omit=dev --no-audit --no-fund --ignore-scripts && npm cache clean --force
COPY --from=build /app/packages/audiences/dist packages/audiences/dist
COPY --from=build /app/packages/campaigns/dist packages/campaigns/dist
COPY --from=build /app/packages/config/dist packages/config/dist
COPY --from=build /app/packages/contacts/dist packages/contacts/dist
COPY --from=build /app/packages/db/dist packages/db/dist
COPY --from=build /app/packages/feedback/dist packages/feedback/dist
COPY --from=build /app/packages/mail/dist packages/mail/dist
COPY --from=build /app/packages/platform/dist packages/platform/dist
COPY --from=build /app/packages/plunk-import/dist packages/plunk-import/dist
COPY --from=build /app/packages/projects/dist packages/projects/dist
COPY --from=build /app/packages/queues/dist packages/queues/dist
COPY --from=build /app/packages/retention/dist packages/retention/dist
COPY --from=build /app/packages/sending/dist packages/sending/dist
COPY --from=build /app/packages/verify/dist packages/verify/dist
COPY --from=build /app/packages/webhooks/dist packages/webhooks/dist
COPY --from=build /app/packages/workflows/dist packages/workflows/dist
COPY packages/db/drizzle packages/db/drizzle
COPY --from=build /app/apps/api/dist apps/api/dist
COPY --from=build /app/apps/worker/dist apps/worker/dist
USER node
EXPOSE 8080 8081
CMD ["node", "apps/api/dist/server.js"]

FROM node:22-bookworm-slim AS ses
RUN npm install -g aws-ses-v2-local@2.10.2 && npm cache clean --force
USER node
EXPOSE 8005
CMD ["aws-ses-v2-local", "--host", "0.0.0.0", "--port", "8005"]
