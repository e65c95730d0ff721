/**
 * The notice at the top of every generated document.
 *
 * @module
 */

/** The generated-file notice, naming the source the document is generated from. */
export const GENERATED_NOTICE = (source: string): string =>
  `<!-- Generated from ${source} by \`npm run docs:generate\`. Do not edit by hand: change the source and run it again. -->`;
