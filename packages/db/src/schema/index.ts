export * from './projects';
export * from './contacts';
export * from './templates';
export * from './domains';
export * from './emails';
