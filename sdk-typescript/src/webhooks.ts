// Receiving webhooks: the `Payrail-Signature` header checked over the raw body bytes (HMAC-SHA256
// of `<t>.<body>`, compared in constant time, within a tolerance window, under one secret or
// several during a rotation), then the body parsed into a typed event. The rules are the ones
// Payrail signs by (docs/WEBHOOKS.md §1), pinned by the vectors every Payrail library shares
// (shared-types/vectors/webhook-signatures.json). Web Crypto only, so it runs wherever `fetch` does.

import { ShapeError, toEvent } from './check.js';
import { PayrailConfigError, WebhookVerificationError } from './errors.js';
import type { Event } from './models.js';

/** The header carrying the signature. */
export const SIGNATURE_HEADER = 'Payrail-Signature';
/** The header carrying the event id (deduplicate on it). */
export const EVENT_ID_HEADER = 'Payrail-Event-Id';
/** The header carrying the event type. */
export const EVENT_TYPE_HEADER = 'Payrail-Event-Type';
/** How far (seconds) a signature's timestamp may be from the receiver's clock by default: 5 minutes. */
export const DEFAULT_TOLERANCE_SECONDS = 300;

/**
 * A request body exactly as it arrived: bytes (a Node `Buffer` is a `Uint8Array`), or text when
 * the framework gives nothing else. Never a parsed-then-reserialised object: its bytes differ.
 */
export type RawBody = Uint8Array | ArrayBuffer | string;

/**
 * Request headers: a Fetch `Headers` (Workers, Deno, Bun, Next.js), or a plain object such as
 * Node's `req.headers` (Express, Fastify, `node:http`). Names are matched case-insensitively.
 */
export type HeaderSource =
  | { get(name: string): string | null }
  | { readonly [name: string]: string | readonly string[] | undefined };

/** Options of a `Webhook`. */
export interface WebhookOptions {
  /**
   * How far (seconds) the signature's timestamp may be from now, either way (default 300).
   * Deliveries signed earlier are refused as replays.
   */
  toleranceSeconds?: number | undefined;
}

const INSPECT = Symbol.for('nodejs.util.inspect.custom');
const encoder = new TextEncoder();
const I64_MIN = -(2n ** 63n);
const I64_MAX = 2n ** 63n - 1n;

/**
 * Verifies and parses deliveries for one endpoint.
 *
 * ```ts
 * const webhook = new Webhook(process.env.PAYRAIL_WEBHOOK_SECRET!);      // whsec_…
 * const event = await webhook.verify(rawBody, req.headers['payrail-signature']);
 * if (event.type === 'payment.paid') { … event.data.amount.gross … }
 * ```
 *
 * During a rotation, accept the old secret and the new one: `new Webhook([oldSecret, newSecret])`.
 */
export class Webhook {
  readonly #secrets: readonly string[];
  #keys: Promise<CryptoKey[]> | undefined;
  /** The tolerance window, in seconds. */
  readonly toleranceSeconds: number;

  /**
   * @param secret The endpoint's signing secret exactly as the portal shows it (`whsec_` prefix
   *   included), or several: a delivery is accepted when any of its signatures matches any secret.
   */
  constructor(secret: string | readonly string[], options: WebhookOptions = {}) {
    const secrets = typeof secret === 'string' ? [secret] : [...secret];
    if (secrets.length === 0 || secrets.some((s) => typeof s !== 'string' || s === '')) {
      throw new PayrailConfigError('a webhook needs at least one signing secret, none of them empty');
    }
    const tolerance = options.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS;
    if (!Number.isSafeInteger(tolerance) || tolerance < 0) {
      throw new PayrailConfigError(`toleranceSeconds must be a whole number of at least 0, not ${String(tolerance)}`);
    }
    this.#secrets = Object.freeze(secrets);
    this.toleranceSeconds = tolerance;
  }

  /**
   * Checks `signatureHeader` (the `Payrail-Signature` value) over `rawBody` (the bytes as
   * received, before any JSON parsing) at `now` (Unix seconds or a `Date`; default: the clock),
   * then parses the event.
   *
   * @throws WebhookVerificationError with `reason` `malformed_header`,
   *   `timestamp_out_of_tolerance`, `no_matching_signature` or `invalid_payload`: answer 400.
   */
  async verify(rawBody: RawBody, signatureHeader: string | null | undefined, now?: number | Date): Promise<Event> {
    const body = bytesOf(rawBody);
    const { timestamp, candidates } = parseHeader(signatureHeader);
    const clock = BigInt(unixSeconds(now));
    const distance = clock > timestamp ? clock - timestamp : timestamp - clock;
    if (distance > BigInt(this.toleranceSeconds)) {
      throw new WebhookVerificationError('timestamp_out_of_tolerance');
    }
    const keys = await this.#importKeys();
    const expected = await Promise.all(keys.map(async (key) => encoder.encode(await hmacHex(key, timestamp, body))));
    // Every pair is compared, in constant time, whatever matched first.
    let matched = false;
    for (const signature of expected) {
      for (const candidate of candidates) {
        matched = timingSafeEqual(encoder.encode(candidate), signature) || matched;
      }
    }
    if (!matched) {
      throw new WebhookVerificationError('no_matching_signature');
    }
    return parseEvent(body);
  }

  /**
   * `verify` with the signature read from request headers: a Fetch `Headers` or Node's
   * `req.headers`, the name matched case-insensitively.
   *
   * ```ts
   * // Express: the raw body, not express.json()
   * app.post('/webhooks', express.raw({ type: () => true }), async (req, res) => {
   *   const event = await webhook.verifyRequest(req.headers, req.body);
   * });
   * ```
   */
  verifyRequest(headers: HeaderSource, rawBody: RawBody, now?: number | Date): Promise<Event> {
    let header: string | null | undefined;
    try {
      header = headerValue(headers, SIGNATURE_HEADER);
    } catch (error) {
      return Promise.reject(error);
    }
    return this.verify(rawBody, header, now);
  }

  /** The hex HMAC-SHA256 Payrail signs `body` with at `timestamp` (Unix seconds): for tests of your receiver. */
  static async sign(secret: string, timestamp: number | bigint, body: RawBody): Promise<string> {
    const key = await importKey(secret);
    return hmacHex(key, toBigInt(timestamp), bytesOf(body));
  }

  /**
   * A whole `Payrail-Signature` value (`t=…,v1=…`, one `v1` per secret) as Payrail sends it: for
   * tests of your receiver.
   */
  static async signatureHeader(secrets: string | readonly string[], timestamp: number | bigint, body: RawBody): Promise<string> {
    const list = typeof secrets === 'string' ? [secrets] : secrets;
    const signatures = await Promise.all(list.map((secret) => Webhook.sign(secret, timestamp, body)));
    return [`t=${toBigInt(timestamp)}`, ...signatures.map((s) => `v1=${s}`)].join(',');
  }

  #importKeys(): Promise<CryptoKey[]> {
    this.#keys ??= Promise.all(this.#secrets.map(importKey));
    return this.#keys;
  }

  /** What the verifier is, without its secrets. */
  toJSON(): { secrets: number; toleranceSeconds: number } {
    return { secrets: this.#secrets.length, toleranceSeconds: this.toleranceSeconds };
  }

  toString(): string {
    return `Webhook { secrets: ${this.#secrets.length}, toleranceSeconds: ${this.toleranceSeconds} }`;
  }

  [INSPECT](): string {
    return this.toString();
  }
}

/**
 * Verifies one delivery without keeping a `Webhook`: `verifyWebhook(secret, rawBody, header)`.
 * See `Webhook.verify`.
 */
export function verifyWebhook(
  secret: string | readonly string[],
  rawBody: RawBody,
  signatureHeader: string | null | undefined,
  options: WebhookOptions & { now?: number | Date | undefined } = {},
): Promise<Event> {
  let webhook: Webhook;
  try {
    webhook = new Webhook(secret, options);
  } catch (error) {
    return Promise.reject(error);
  }
  return webhook.verify(rawBody, signatureHeader, options.now);
}

/** An event from its JSON (an events feed page's items, a verified body). */
export function parseEvent(body: Uint8Array | string): Event {
  try {
    const text = typeof body === 'string' ? body : new TextDecoder('utf-8', { fatal: true }).decode(body);
    return toEvent(JSON.parse(text), 'event');
  } catch (error) {
    if (error instanceof SyntaxError || error instanceof TypeError || error instanceof ShapeError) {
      throw new WebhookVerificationError('invalid_payload');
    }
    throw error;
  }
}

/** `t` and every `v1` of a header, by the rules Payrail signs by. */
function parseHeader(header: string | null | undefined): { timestamp: bigint; candidates: string[] } {
  if (typeof header !== 'string') {
    throw new WebhookVerificationError('malformed_header');
  }
  let timestamp: bigint | undefined;
  const candidates: string[] = [];
  for (const raw of header.split(',')) {
    const part = trimWhitespace(raw);
    const equals = part.indexOf('=');
    if (equals < 0) {
      throw new WebhookVerificationError('malformed_header');
    }
    const key = part.slice(0, equals);
    const value = part.slice(equals + 1);
    if (key === 't') {
      timestamp = parseI64(value);
    } else if (key === 'v1') {
      candidates.push(value);
    }
    // Other schemes may be added later: ignored.
  }
  if (timestamp === undefined || candidates.length === 0) {
    throw new WebhookVerificationError('malformed_header');
  }
  return { timestamp, candidates };
}

/** A signed 64-bit decimal integer (`+` or `-` allowed), as the signer reads `t`. */
function parseI64(text: string): bigint {
  const match = /^([+-]?)([0-9]+)$/.exec(text);
  if (match === null) {
    throw new WebhookVerificationError('malformed_header');
  }
  const magnitude = BigInt(match[2] as string);
  const value = match[1] === '-' ? -magnitude : magnitude;
  if (value < I64_MIN || value > I64_MAX) {
    throw new WebhookVerificationError('malformed_header');
  }
  return value;
}

// Unicode White_Space, which the signer's parser trims from each part (JavaScript's `trim` differs
// by U+0085 and U+FEFF).
const WHITESPACE = '[\\t\\n\\v\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]';
const TRIM = new RegExp(`^${WHITESPACE}+|${WHITESPACE}+$`, 'g');

function trimWhitespace(text: string): string {
  return text.replace(TRIM, '');
}

async function hmacHex(key: CryptoKey, timestamp: bigint, body: Uint8Array): Promise<string> {
  const prefix = encoder.encode(`${timestamp}.`);
  const message = new Uint8Array(prefix.byteLength + body.byteLength);
  message.set(prefix, 0);
  message.set(body, prefix.byteLength);
  const subtle = await subtleCrypto();
  const mac = new Uint8Array(await subtle.sign('HMAC', key, message));
  let hex = '';
  for (const byte of mac) {
    hex += byte.toString(16).padStart(2, '0');
  }
  return hex;
}

async function importKey(secret: string): Promise<CryptoKey> {
  const subtle = await subtleCrypto();
  return subtle.importKey('raw', encoder.encode(secret), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
}

let subtlePromise: Promise<SubtleCrypto> | undefined;

/** Web Crypto: global everywhere but in Node 18, which keeps it in `node:crypto`. */
function subtleCrypto(): Promise<SubtleCrypto> {
  subtlePromise ??= (async () => {
    const global = (globalThis as { crypto?: { subtle?: SubtleCrypto } }).crypto;
    if (global?.subtle !== undefined) {
      return global.subtle;
    }
    // A specifier in a variable: bundlers for other platforms leave it alone.
    const name = 'node:crypto';
    try {
      const node = (await import(name)) as { webcrypto?: { subtle?: SubtleCrypto } };
      if (node.webcrypto?.subtle !== undefined) {
        return node.webcrypto.subtle;
      }
    } catch {
      // Not Node: no Web Crypto at all.
    }
    throw new PayrailConfigError('Web Crypto (crypto.subtle) is not available on this platform');
  })();
  return subtlePromise;
}

/** Equal bytes, in a time that depends on the lengths only. */
function timingSafeEqual(a: Uint8Array, b: Uint8Array): boolean {
  let difference = a.byteLength ^ b.byteLength;
  const length = Math.max(a.byteLength, b.byteLength);
  for (let i = 0; i < length; i++) {
    difference |= (a[i] ?? 0) ^ (b[i] ?? 0);
  }
  return difference === 0;
}

function bytesOf(body: RawBody): Uint8Array {
  if (typeof body === 'string') {
    return encoder.encode(body);
  }
  if (body instanceof Uint8Array) {
    return body;
  }
  if (body instanceof ArrayBuffer) {
    return new Uint8Array(body);
  }
  const got = body === undefined ? 'undefined' : body === null ? 'null' : typeof body;
  throw new TypeError(
    `the raw request body is needed (a Uint8Array, Buffer, ArrayBuffer or string), not ${got}: ` +
      'read it before any JSON parser runs (Express: express.raw({ type: () => true }) on the webhook route)',
  );
}

function unixSeconds(now: number | Date | undefined): number {
  if (now === undefined) {
    return Math.floor(Date.now() / 1000);
  }
  const seconds = now instanceof Date ? now.getTime() / 1000 : now;
  if (!Number.isFinite(seconds)) {
    throw new RangeError(`now must be a time, not ${String(now)}`);
  }
  return Math.floor(seconds);
}

function toBigInt(timestamp: number | bigint): bigint {
  if (typeof timestamp === 'bigint') {
    return timestamp;
  }
  if (!Number.isSafeInteger(timestamp)) {
    throw new RangeError(`a timestamp must be whole Unix seconds, not ${timestamp}`);
  }
  return BigInt(timestamp);
}

function headerValue(headers: HeaderSource, name: string): string | null | undefined {
  if (typeof headers !== 'object' || headers === null) {
    throw new TypeError('headers must be a Headers object or a plain object of header values');
  }
  if (typeof headers.get === 'function') {
    return (headers as { get(name: string): string | null }).get(name);
  }
  const wanted = name.toLowerCase();
  const values = Object.entries(headers as { readonly [name: string]: unknown })
    .filter(([key]) => key.toLowerCase() === wanted)
    .flatMap(([, value]) => (Array.isArray(value) ? value : [value]))
    .filter((value) => value !== undefined);
  // A signature header sent twice is not Payrail's: refused as malformed, never merged.
  return values.length === 1 && typeof values[0] === 'string' ? values[0] : undefined;
}
