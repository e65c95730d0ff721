/**
 * Serialises a MIME tree compiled by nodemailer's MailComposer into the message bytes in one synchronous pass, with
 * the parts that repeat from message to message (a campaign's HTML and text when they render alike) taken from a
 * bounded cache.
 *
 * nodemailer builds a message by streaming its tree: a PassThrough per part, a `pipeline` with abort signals, a
 * `setImmediate` between parts and a newline transform at the end, which cost more CPU than the encoding itself for
 * an email-sized message. Here the same tree is written by the same nodemailer code (each node's
 * `getTransferEncoding` and `buildHeaders`, its quoted-printable and base64 `Encoder`s fed one chunk, as its stream
 * feeds them) in the order its `stream` writes it, so the bytes are those of `MimeNode.build()`; the tests compare the
 * two over varied messages (`mail-equivalence.test.ts`). A tree this module does not know how to write synchronously
 * (a raw node, a stream or a file as content, a transform) is refused with `undefined`, and the caller streams it.
 *
 * The part cache: a leaf whose content is a string and whose only header is its Content-Type (the text and HTML
 * alternatives) is a pure function of that Content-Type and that string, so its bytes (header block and encoded body)
 * are kept under that pair and reused by the next message with the same content; a part that contains one of the
 * message's own values (its unsubscribe token) is left out, since no other message can have it. Bounded by
 * {@link PART_CACHE_LIMITS} (entries and bytes, least recently used out first); a part larger than the per-part
 * limit is never kept.
 *
 * Two of nodemailer's own steps are made cheaper for every MimeNode of the process, with the same results: header
 * names are spelled once per name (`_normalizeHeaderKey`, a pure function), and the parts MailComposer adds take the
 * root's base boundary instead of drawing random bytes nothing reads (docs/decisions/0176-compose-library-steps-kept-cheap.md).
 *
 * @module
 */
import MimeNode from 'nodemailer/lib/mime-node';
import { Encoder as QpEncoder } from 'nodemailer/lib/qp';
import { Encoder as Base64Encoder } from 'nodemailer/lib/base64';

/**
 * Limits of the process-wide part cache: at most `entries` parts and `bytes` bytes (keys, as UTF-16 string length ×
 * 2, plus the part bytes); a part whose key and bytes exceed `partBytes` is not cached.
 */
export const PART_CACHE_LIMITS = { entries: 256, bytes: 16 * 1024 * 1024, partBytes: 1024 * 1024 } as const;

interface CachedPart {
  bytes: Buffer;
  size: number;
}

const parts = new Map<string, CachedPart>();
let cachedBytes = 0;
let partHits = 0;
let partMisses = 0;
let refused = 0;

/**
 * Counters of the part cache (for the benchmark and tests): entries, bytes held, hits and misses since start, and
 * `refused`: trees {@link serializeTree} left to nodemailer's stream.
 */
export function partCacheStats(): { entries: number; bytes: number; hits: number; misses: number; refused: number } {
  return { entries: parts.size, bytes: cachedBytes, hits: partHits, misses: partMisses, refused };
}

/** Empties the part cache and resets its counters (tests and the benchmark start from a cold cache). */
export function clearPartCache(): void {
  parts.clear();
  cachedBytes = 0;
  partHits = 0;
  partMisses = 0;
  refused = 0;
}

function rememberPart(key: string, bytes: Buffer): void {
  const size = key.length * 2 + bytes.length;
  if (size > PART_CACHE_LIMITS.partBytes) return;
  parts.set(key, { bytes, size });
  cachedBytes += size;
  while (parts.size > PART_CACHE_LIMITS.entries || cachedBytes > PART_CACHE_LIMITS.bytes) {
    const [oldest, part] = parts.entries().next().value!;
    parts.delete(oldest);
    cachedBytes -= part.size;
  }
}

function recallPart(key: string): Buffer | undefined {
  const hit = parts.get(key);
  if (!hit) return undefined;
  // Least recently used out first: a hit moves to the end of the insertion order.
  parts.delete(key);
  parts.set(key, hit);
  return hit.bytes;
}

/**
 * Header names as nodemailer spells them, by the name given: `MimeNode._normalizeHeaderKey` (five regular
 * expressions over the name) runs on every header read and write, a dozen times per part, and was the largest single
 * cost of composing a small email (profiled: about an eighth of it). It is a pure function of its string argument, so
 * its answers are kept (at most {@link HEADER_KEY_MEMO_LIMIT} names; past that, names are normalised as before).
 */
export const HEADER_KEY_MEMO_LIMIT = 512;
const headerKeys = new Map<string, string>();

type NormalizeKey = (this: MimeNode, key: unknown) => string;
type CreateChild = (this: MimeNode, contentType: unknown, options?: unknown) => MimeNode;
const prototype = MimeNode.prototype as unknown as { _normalizeHeaderKey?: NormalizeKey; createChild?: CreateChild };
const normalizeKey = prototype._normalizeHeaderKey;
const createChild = prototype.createChild;
// A nodemailer without this method (a future release) keeps its own behaviour: nothing is replaced.
if (typeof normalizeKey === 'function')
  prototype._normalizeHeaderKey = function memoizedHeaderKey(this: MimeNode, key: unknown): string {
    if (typeof key !== 'string') return normalizeKey.call(this, key);
    const known = headerKeys.get(key);
    if (known !== undefined) return known;
    const normalized = normalizeKey.call(this, key);
    if (headerKeys.size < HEADER_KEY_MEMO_LIMIT) headerKeys.set(key, normalized);
    return normalized;
  };

/*
 * A part MailComposer adds (`createChild` with options) is given the root's `baseBoundary`: without one, MimeNode's
 * constructor draws 8 random bytes for it, which nothing reads (every boundary is made from the root's), and those
 * draws were a tenth of composing a small email.
 */
if (typeof createChild === 'function')
  prototype.createChild = function createChildWithBase(this: MimeNode, contentType: unknown, options?: unknown) {
    const base = (this as unknown as { rootNode?: { baseBoundary?: string } }).rootNode?.baseBoundary;
    if (
      typeof contentType === 'string' &&
      options &&
      typeof options === 'object' &&
      base &&
      !('baseBoundary' in options)
    )
      return createChild.call(this, contentType, { ...options, baseBoundary: base });
    return createChild.call(this, contentType, options);
  };

/** The members of a MimeNode this module reads that nodemailer's typings leave out. */
interface NodeInternals {
  _raw?: unknown;
  _transforms?: unknown[];
  _processFuncs?: unknown[];
  _headers?: { key: string; value: unknown }[];
  newline?: unknown;
  textEncoding?: string;
}

class Unsupported extends Error {}

/** Runs one of nodemailer's encoder streams over `content` as one chunk, synchronously, and returns its output. */
function encodeOnce(encoder: QpEncoder | Base64Encoder, content: Buffer): Buffer {
  encoder.end(content);
  const out = encoder.read() as Buffer | null;
  // A Transform runs `_transform` and `_flush` inside `end()` when nothing is queued; if a Node version deferred them,
  // the output here would be cut short: refuse rather than guess (the caller streams the message instead).
  if (!(encoder as unknown as { _readableState: { ended: boolean } })._readableState.ended) throw new Unsupported();
  return out ?? Buffer.alloc(0);
}

/** The encoded body of a leaf, as `MimeNode.stream` writes it (`createStream`). */
function leafBody(node: MimeNode, transferEncoding: string | false): Buffer {
  const content = node.content;
  if (!content) return Buffer.alloc(0);
  if (typeof content !== 'string' && !Buffer.isBuffer(content)) throw new Unsupported();
  const bytes = typeof content === 'string' ? Buffer.from(content) : content;
  if (transferEncoding === 'base64') return encodeOnce(new Base64Encoder({}), bytes);
  if (transferEncoding === 'quoted-printable')
    // nodemailer's option: outside text a lone CR or LF is data, so it is encoded.
    return encodeOnce(new QpEncoder({ binary: !/^text\//i.test(node.contentType ?? '') }), bytes);
  return bytes;
}

function writeNode(node: MimeNode, out: Buffer[], unique: readonly string[]): void {
  const internals = node as unknown as NodeInternals;
  if (internals._raw) throw new Unsupported();
  const cacheKey =
    node.childNodes.length === 0 &&
    typeof node.content === 'string' &&
    node.content.length > 0 &&
    !unique.some((u) => (node.content as string).includes(u)) &&
    !node.filename &&
    node.rootNode !== node &&
    !node.normalizeHeaderKey &&
    internals._headers?.length === 1 &&
    internals._headers[0].key === 'Content-Type' &&
    typeof internals._headers[0].value === 'string'
      ? `${internals.textEncoding ?? ''}\u0000${internals._headers[0].value}\u0000${node.content}`
      : undefined;
  if (cacheKey !== undefined) {
    const hit = recallPart(cacheKey);
    if (hit) {
      partHits++;
      out.push(hit);
      return;
    }
    partMisses++;
  }
  // As `MimeNode.stream` writes a node: the header block (which decides the Content-Type's boundary and sets the
  // Content-Transfer-Encoding header), the body, then the children between boundaries. `stream` asks for the
  // transfer encoding before the header block; asked after it, the answer is the same (the header it set, or
  // 7bit again) without scanning the content a second time.
  const head = Buffer.from(node.buildHeaders() + '\r\n\r\n');
  const transferEncoding = node.getTransferEncoding();
  const body = leafBody(node, transferEncoding);
  if (cacheKey !== undefined) {
    const bytes = Buffer.concat([head, body]);
    rememberPart(cacheKey, bytes);
    out.push(bytes);
  } else out.push(head, body);
  if (!node.multipart) return;
  node.childNodes.forEach((child, i) => {
    out.push(Buffer.from(`${i > 0 ? '\r\n' : ''}--${String(node.boundary)}\r\n`));
    writeNode(child, out, unique);
  });
  out.push(Buffer.from(`\r\n--${String(node.boundary)}--\r\n`));
}

/**
 * The bytes of a compiled MailComposer tree (`new MailComposer(options).compile()`), the same as its `build()`
 * would give, written synchronously; parts seen before come from the part cache.
 *
 * @param unique - values that occur in one message only (an unsubscribe token): a part that contains one can never
 *   be reused, so it is neither looked up nor kept.
 * @returns the message bytes, or `undefined` when the tree holds something only nodemailer's stream can write
 *   (a raw node, stream or file content, transforms, a newline conversion): then build the message with nodemailer
 *   from a freshly compiled tree (this one may have had some of its header blocks built).
 */
export function serializeTree(root: MimeNode, unique: readonly string[] = []): Buffer | undefined {
  const internals = root as unknown as NodeInternals;
  const out: Buffer[] = [];
  try {
    if (internals._transforms?.length || internals._processFuncs?.length || internals.newline) throw new Unsupported();
    writeNode(root, out, unique);
  } catch (err) {
    if (!(err instanceof Unsupported)) throw err;
    refused++;
    return undefined;
  }
  // nodemailer's last-newline transform: the message ends with a line break.
  const last = out.findLast((b) => b.length > 0);
  const lastByte = last ? last[last.length - 1] : undefined;
  if (lastByte === 0x0d) out.push(Buffer.from('\n'));
  else if (lastByte !== 0x0a) out.push(Buffer.from('\r\n'));
  return Buffer.concat(out);
}
