# Thin aliases of the npm scripts.
.PHONY: install dev test build migrate bench lint start-api start-worker

install:
	npm install
dev:
	npm run dev
test:
	npm test
build:
	npm run build
migrate:
	npm run migrate
bench:
	npm run bench
lint:
	npm run lint
start-api:
	npm run start:api
start-worker:
	npm run start:worker
