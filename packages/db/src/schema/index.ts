export * from './projects';
export * from './contacts';
export * from './templates';
export * from './domains';
export * from './emails';
export * from './events';
export * from './imports';
export * from './idempotency';
