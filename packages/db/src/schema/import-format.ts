/**
 * The file formats of a contact import (stored in `contact_imports.format`).
 *
 * @module
 */

/** Import file formats. */
export type ImportFormat = 'csv' | 'ndjson' | 'json';
