export * from './client';
export * from './schema';
export { migrate, ensureDatabase, MIGRATIONS_FOLDER } from './migrate';
export * from './queries/projects';
export * from './queries/contacts';
export * from './queries/templates';
export * from './queries/emails';
