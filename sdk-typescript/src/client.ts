// The API client: configuration, the token cache, the bookmark, and the requests the resources
// make. The client secret lives in a private field and is never part of a string form, a JSON
// form or an error.

import { checkModel, ShapeError } from './check.js';
import { PayrailConfigError, PayrailDecodeError } from './errors.js';
import { errorOf, json, MAX_ANSWER_BYTES, send } from './http.js';
import type { Answer, Fetch, Outgoing, TransportOptions } from './http.js';
import type { Scope } from './models.js';
import { retryPolicy } from './retry.js';
import type { RetryOptions } from './retry.js';
import { checkoutResource, eventsResource, merchantsResource, sandboxResource, transactionsResource } from './resources.js';
import type { Api, Checkout, Events, Merchants, Sandbox, Transactions } from './resources.js';
import { BOOKMARK_HEADER, REQUEST_ID_HEADER } from './schema.js';
import type { ModelName } from './schema.js';
import { VERSION } from './version.js';

/** How a `Payrail` client is set up. */
export interface PayrailOptions {
  /**
   * The API's base URL, e.g. `https://api.payrail.example`. Plain `http` only to this machine
   * (`127.0.0.1`, `::1`, `localhost`: a local worker), since the client secret goes to it.
   */
  baseUrl: string;
  /** The API client's id (`cli_…`), from the portal's developer section. */
  clientId: string;
  /** The API client's secret (`sk_…`). Keep it on the server. */
  clientSecret: string;
  /** Scopes to ask for (default: every scope the client was granted). */
  scope?: string | readonly Scope[] | undefined;
  /** Time limit of one request, its answer's body included, in milliseconds (default 30 000). */
  timeoutMs?: number | undefined;
  /** How 429s, 5xx and failures to connect are retried (`false`: never). */
  retry?: RetryOptions | false | undefined;
  /** The `fetch` to send with (default: the platform's). */
  fetch?: Fetch | undefined;
}

/** A token is refreshed this long (ms) before it expires, so no request leaves with a token that dies on the way. */
const REFRESH_MARGIN_MS = 60_000;
const BOOKMARK_SHAPE = /^[A-Za-z0-9-]{1,128}$/;
const INSPECT = Symbol.for('nodejs.util.inspect.custom');

interface CachedToken {
  readonly value: string;
  /** `now()` after which it is refreshed. */
  readonly refreshAt: number;
}

/**
 * A client of the Payrail partner API. One client holds one token cache and one bookmark: make
 * one per API client and share it (it is safe to use from many concurrent tasks).
 *
 * ```ts
 * const payrail = new Payrail({ baseUrl, clientId, clientSecret });
 * for await (const t of payrail.transactions.list({ status: 'paid', createdAfter: today })) { … }
 * ```
 */
export class Payrail {
  /** `GET /v1/transactions`: list, page, retrieve. */
  readonly transactions: Transactions;
  /** `GET /v1/merchants`: list, page, retrieve. */
  readonly merchants: Merchants;
  /** `GET /v1/events`, the events feed: list, page, retrieve. */
  readonly events: Events;
  /** Sandbox: create a checkout session as the browser script does. */
  readonly checkout: Checkout;
  /** Sandbox: drive a transaction through its lifecycle (`sandbox:write`). */
  readonly sandbox: Sandbox;
  /** The base URL, normalized to end in `/`. */
  readonly baseUrl: string;
  /** The API client's id. */
  readonly clientId: string;

  readonly #base: URL;
  readonly #secret: string;
  readonly #scope: string | undefined;
  readonly #transport: TransportOptions;
  #token: CachedToken | undefined;
  #fetchingToken: Promise<CachedToken> | undefined;
  #bookmark: string | undefined;

  constructor(options: PayrailOptions) {
    if (typeof options !== 'object' || options === null) {
      throw new PayrailConfigError('options { baseUrl, clientId, clientSecret } are required');
    }
    this.#base = checkBaseUrl(options.baseUrl);
    this.baseUrl = this.#base.toString();
    if (typeof options.clientId !== 'string' || options.clientId === '') {
      throw new PayrailConfigError('clientId is required');
    }
    if (typeof options.clientSecret !== 'string' || options.clientSecret === '') {
      throw new PayrailConfigError('clientSecret is required');
    }
    this.clientId = options.clientId;
    this.#secret = options.clientSecret;
    const scope = typeof options.scope === 'string' || options.scope === undefined ? options.scope : options.scope.join(' ');
    this.#scope = scope === '' ? undefined : scope;
    const timeoutMs = options.timeoutMs ?? 30_000;
    if (typeof timeoutMs !== 'number' || !Number.isFinite(timeoutMs) || timeoutMs <= 0) {
      throw new PayrailConfigError(`timeoutMs must be a positive number of milliseconds, not ${String(timeoutMs)}`);
    }
    const fetchImpl = options.fetch ?? (globalThis as { fetch?: Fetch }).fetch;
    if (typeof fetchImpl !== 'function') {
      throw new PayrailConfigError('this platform has no global fetch: pass options.fetch');
    }
    this.#transport = Object.freeze({
      // Called as a plain function: the platform's fetch refuses another `this`.
      fetch: (input: string, init: RequestInit) => fetchImpl(input, init),
      timeoutMs,
      retry: retryPolicy(options.retry),
      maxAnswerBytes: MAX_ANSWER_BYTES,
    });

    const api: Api = {
      get: (path, query, model) => this.#read(path, query, model),
      post: (path, body, model, how) => this.#write(path, body, model, how),
    };
    this.transactions = transactionsResource(api);
    this.merchants = merchantsResource(api);
    this.events = eventsResource(api);
    this.checkout = checkoutResource(api);
    this.sandbox = sandboxResource(api);
  }

  /**
   * The last `Payrail-Bookmark` an answer carried. Every list and lookup sends it back, so that
   * a read sees at least what the read before it saw, even when a replica answers it.
   */
  get bookmark(): string | undefined {
    return this.#bookmark;
  }

  /**
   * A valid access token: the cached one, or a new one when there is none or it is about to
   * expire. Concurrent callers share one fetch. For requests the library does not make itself.
   */
  async accessToken(): Promise<string> {
    return (await this.#currentToken()).value;
  }

  #currentToken(): Promise<CachedToken> {
    const cached = this.#token;
    if (cached !== undefined && now() < cached.refreshAt) {
      return Promise.resolve(cached);
    }
    if (this.#fetchingToken === undefined) {
      const fetching = this.#issueToken().then(
        (token) => {
          this.#token = token;
          return token;
        },
      );
      this.#fetchingToken = fetching;
      const clear = () => {
        if (this.#fetchingToken === fetching) {
          this.#fetchingToken = undefined;
        }
      };
      fetching.then(clear, clear);
    }
    return this.#fetchingToken;
  }

  /** Drops the cached token if it is still `used` (another caller may have replaced it already). */
  #forgetToken(used: CachedToken): void {
    if (this.#token === used) {
      this.#token = undefined;
    }
  }

  async #issueToken(): Promise<CachedToken> {
    const form = new URLSearchParams({ grant_type: 'client_credentials' });
    if (this.#scope !== undefined) {
      form.set('scope', this.#scope);
    }
    const answer = await send(this.#transport, {
      method: 'POST',
      url: new URL('oauth/token', this.#base),
      headers: {
        ...this.#headers(),
        // RFC 6749 §2.3.1: the id and the secret are form-encoded before they are joined.
        authorization: `Basic ${base64(`${formEncode(this.clientId)}:${formEncode(this.#secret)}`)}`,
        'content-type': 'application/x-www-form-urlencoded',
      },
      body: form.toString(),
      idempotent: true,
    });
    if (answer.status !== 200) {
      throw errorOf(answer);
    }
    const body = json(answer) as { access_token?: unknown; expires_in?: unknown };
    if (typeof body !== 'object' || body === null || typeof body.access_token !== 'string' || body.access_token === '') {
      throw new PayrailDecodeError(answer.status, 'a token answer without an access_token', requestId(answer));
    }
    // A bearer token's characters (RFC 6750 §2.1): anything else would be refused when the
    // header is built, in a message that repeats it.
    if (!BEARER_TOKEN.test(body.access_token)) {
      throw new PayrailDecodeError(answer.status, 'a token answer whose access_token is not a bearer token', requestId(answer));
    }
    const expiresIn = body.expires_in;
    if (typeof expiresIn !== 'number' || !Number.isFinite(expiresIn) || expiresIn < 0) {
      throw new PayrailDecodeError(answer.status, 'a token answer without a valid expires_in', requestId(answer));
    }
    const lifetime = expiresIn * 1000;
    // A short-lived token is refreshed at half its life rather than never cached.
    return { value: body.access_token, refreshAt: now() + lifetime - Math.min(REFRESH_MARGIN_MS, lifetime / 2) };
  }

  /** A `GET` of the API, with the token and the bookmark; its answer checked against `model`. */
  async #read(path: string, query: URLSearchParams | undefined, model: ModelName): Promise<unknown> {
    const url = new URL(path, this.#base);
    if (query !== undefined) {
      url.search = query.toString();
    }
    const answer = await this.#authorized((token) => ({
      method: 'GET',
      url,
      headers: {
        ...this.#headers(),
        authorization: `Bearer ${token}`,
        ...(this.#bookmark === undefined ? {} : { [BOOKMARK_HEADER.toLowerCase()]: this.#bookmark }),
      },
      idempotent: true,
    }));
    const bookmark = answer.headers.get(BOOKMARK_HEADER);
    // Kept only when shaped like one: a value the API would refuse is never sent back.
    if (bookmark !== null && BOOKMARK_SHAPE.test(bookmark)) {
      this.#bookmark = bookmark;
    }
    return decode(answer, model);
  }

  /** A `POST` of a JSON body, with the token when `how.authorized`. */
  async #write(
    path: string,
    body: unknown,
    model: ModelName,
    how: { authorized: boolean; idempotent: boolean },
  ): Promise<unknown> {
    const url = new URL(path, this.#base);
    const request = (token: string | undefined): Outgoing => ({
      method: 'POST',
      url,
      headers: {
        ...this.#headers(),
        'content-type': 'application/json',
        ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
      },
      body: JSON.stringify(body),
      idempotent: how.idempotent,
    });
    if (!how.authorized) {
      const answer = await send(this.#transport, request(undefined));
      if (answer.status === 401) {
        throw errorOf(answer);
      }
      return decode(answer, model);
    }
    return decode(await this.#authorized(request), model);
  }

  /**
   * Sends with the current token; a 401 gets a fresh token and one more try (a 401 means nothing
   * was done). Answers a success; throws the API's error otherwise.
   */
  async #authorized(build: (token: string) => Outgoing): Promise<Answer> {
    for (let refreshed = false; ; refreshed = true) {
      const token = await this.#currentToken();
      const answer = await send(this.#transport, build(token.value));
      if (answer.status !== 401) {
        return answer;
      }
      if (refreshed) {
        throw errorOf(answer);
      }
      this.#forgetToken(token);
    }
  }

  #headers(): Record<string, string> {
    return { accept: 'application/json', 'user-agent': `payrail-typescript/${VERSION}` };
  }

  /** What the client is, without its secret. */
  toJSON(): { baseUrl: string; clientId: string } {
    return { baseUrl: this.baseUrl, clientId: this.clientId };
  }

  toString(): string {
    return `Payrail { baseUrl: '${this.baseUrl}', clientId: '${this.clientId}' }`;
  }

  [INSPECT](): string {
    return this.toString();
  }
}

/** The answer's JSON, checked against `model`. */
function decode(answer: Answer, model: ModelName): unknown {
  const value = json(answer);
  try {
    checkModel(model, value);
  } catch (error) {
    if (error instanceof ShapeError) {
      throw new PayrailDecodeError(answer.status, error.message, requestId(answer));
    }
    throw error;
  }
  return value;
}

function requestId(answer: Answer): string | undefined {
  return answer.headers.get(REQUEST_ID_HEADER) ?? undefined;
}

/** RFC 6750 §2.1's `b64token`. */
const BEARER_TOKEN = /^[A-Za-z0-9._~+/-]+=*$/;

/** The base URL, checked: https, or http to this machine only; no credentials, query or fragment. */
function checkBaseUrl(text: unknown): URL {
  if (typeof text !== 'string' || text === '') {
    throw new PayrailConfigError('baseUrl is required, e.g. https://api.payrail.example');
  }
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    // The text is not repeated: it may hold a credential typed in the wrong place.
    throw new PayrailConfigError('baseUrl is not a URL, e.g. https://api.payrail.example');
  }
  // Credentials first, and no message ever repeats the URL whole.
  if (url.username !== '' || url.password !== '' || url.search !== '' || url.hash !== '') {
    throw new PayrailConfigError('baseUrl must not carry credentials, a query or a fragment');
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw new PayrailConfigError(`baseUrl is ${url.protocol} to ${url.host}, not http(s)`);
  }
  if (url.protocol === 'http:' && !isLoopback(url.hostname)) {
    throw new PayrailConfigError(
      `baseUrl is plain http to ${url.host}, another machine: use https ` +
        '(http is for 127.0.0.1, ::1 and localhost only)',
    );
  }
  if (!url.pathname.endsWith('/')) {
    url.pathname = `${url.pathname}/`;
  }
  return url;
}

/** Whether a URL's host is this machine. */
function isLoopback(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, '').toLowerCase();
  return (
    host === '::1' ||
    host === 'localhost' ||
    host.endsWith('.localhost') ||
    /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host)
  );
}

/** `text` as `application/x-www-form-urlencoded` encodes it (space as `+`). */
function formEncode(text: string): string {
  return new URLSearchParams({ x: text }).toString().slice(2);
}

function base64(ascii: string): string {
  return btoa(ascii);
}

/** Milliseconds on a clock that does not jump (the wall clock where there is none). */
function now(): number {
  return typeof performance !== 'undefined' ? performance.now() : Date.now();
}
