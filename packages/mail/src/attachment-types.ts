/**
 * Which media types an attachment may have. A composite type (RFC 2046 §5: `multipart/*`, `message/*`) is not a
 * file but a container of the message's own structure: nodemailer sends a `message/*` part inline, 8bit (RFC 2046
 * §5.2.1 forbids base64 for `message/rfc822`), where mail readers show it as part of the message, and a
 * `multipart/*` part has no place for the content at all; either way the file does not arrive as an attachment
 * (mailparser counts 0). A request giving one is refused
 * (422); a type inferred from the file name (`.eml`, `.mht`: `message/rfc822`) becomes
 * `application/octet-stream`, so the file arrives under its name.
 *
 * @module
 */
import type { FieldError } from '@mailroom/platform/errors';
import { attachmentContentType } from './mail';

/** `multipart/*` or `message/*`, case-insensitive (RFC 2045 §5.1: type names are case-insensitive). */
const COMPOSITE = /^\s*(multipart|message)\//i;

/** Whether `type` is a composite media type (RFC 2046 §5), which cannot be an attachment's. */
export function isCompositeMediaType(type: string): boolean {
  return COMPOSITE.test(type);
}

/**
 * The errors of attachments whose given `contentType` is composite, each naming `attachments.<i>.contentType`.
 *
 * @param items - the request's attachments, in request order.
 */
export function attachmentTypeErrors(items: readonly { contentType?: string }[]): FieldError[] {
  const errors: FieldError[] = [];
  items.forEach((a, i) => {
    if (a.contentType !== undefined && isCompositeMediaType(a.contentType)) {
      errors.push({
        field: `attachments.${i}.contentType`,
        message: `"${a.contentType}" is a container type (multipart/*, message/*), not a file type; send the file as application/octet-stream (or its own type)`,
        code: 'invalid_string',
      });
    }
  });
  return errors;
}

/**
 * The content type an attachment is sent with: the one given (checked by {@link attachmentTypeErrors}), else the
 * one its file name implies, except that an implied composite type becomes `application/octet-stream`.
 */
export function attachmentType(filename: string, given?: string): string {
  const type = attachmentContentType(filename, given);
  return given === undefined && isCompositeMediaType(type) ? 'application/octet-stream' : type;
}

/**
 * The errors of attachments whose `contentId` (an inline part's Content-ID, RFC 2392) repeats one before it in the
 * request (compared case-insensitively: the domain side of a content id is), naming `attachments.<i>.contentId`.
 * Its characters are checked by the request schema.
 */
export function contentIdErrors(items: readonly { contentId?: string }[]): FieldError[] {
  const seen = new Set<string>();
  const errors: FieldError[] = [];
  items.forEach((a, i) => {
    if (a.contentId === undefined) return;
    const key = a.contentId.toLowerCase();
    if (seen.has(key))
      errors.push({
        field: `attachments.${i}.contentId`,
        message: `"${a.contentId}" is used by another attachment of this email`,
        code: 'custom',
      });
    seen.add(key);
  });
  return errors;
}
