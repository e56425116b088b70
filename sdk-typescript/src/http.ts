// One request, sent until its answer is final: a time limit per try (the body included), a cap on
// what an answer may weigh, and retries as the policy says. Only the platform's `fetch`.

import {
  PayrailApiError,
  PayrailConnectionError,
  PayrailDecodeError,
  PayrailError,
  PayrailTimeoutError,
} from './errors.js';
import { parseRetryAfter, retryDelay } from './retry.js';
import type { RetryPolicy } from './retry.js';
import { REQUEST_ID_HEADER } from './schema.js';

/** Most bytes of an answer the client reads (8 MiB): a page of 100 transactions is about 200 KB. */
export const MAX_ANSWER_BYTES = 8 * 1024 * 1024;

/** The `fetch` the client calls: the platform's, or one given in the options. */
export type Fetch = (input: string, init: RequestInit) => Promise<Response>;

/** A request to send. */
export interface Outgoing {
  readonly method: 'GET' | 'POST';
  readonly url: URL;
  readonly headers: Readonly<Record<string, string>>;
  readonly body?: string;
  /**
   * Whether sending it twice does no harm: then 5xx, timeouts and every failure to connect are
   * retried. Otherwise only 429 and failures that show nothing was sent.
   */
  readonly idempotent: boolean;
}

/** A complete answer. */
export interface Answer {
  readonly status: number;
  readonly headers: Headers;
  readonly body: Uint8Array;
}

/** What the transport needs to know. */
export interface TransportOptions {
  readonly fetch: Fetch;
  readonly timeoutMs: number;
  readonly retry: RetryPolicy;
  readonly maxAnswerBytes: number;
}

/**
 * Sends until the answer is final. Answers a success (2xx) or a 401 (the caller decides about
 * the token); throws `PayrailApiError` for any other status once it is not retried, and the
 * connection, timeout and decode errors of the last try.
 */
export async function send(options: TransportOptions, request: Outgoing): Promise<Answer> {
  for (let attempt = 0; ; attempt++) {
    let delay: number | undefined;
    try {
      const answer = await once(options, request);
      if ((answer.status >= 200 && answer.status < 300) || answer.status === 401) {
        return answer;
      }
      const retryAfter = parseRetryAfter(answer.headers.get('retry-after'));
      const retryable = answer.status === 429 || (answer.status >= 500 && request.idempotent);
      delay = retryable
        ? retryDelay(options.retry, attempt, retryAfter === undefined ? undefined : retryAfter * 1000)
        : undefined;
      if (delay === undefined) {
        throw errorOf(answer, retryAfter);
      }
    } catch (error) {
      if (!(error instanceof PayrailConnectionError)) {
        throw error;
      }
      const retryable = request.idempotent || (!(error instanceof PayrailTimeoutError) && notSent(error.cause));
      delay = retryable ? retryDelay(options.retry, attempt) : undefined;
      if (delay === undefined) {
        throw error;
      }
    }
    await sleep(delay);
  }
}

/** One try, its body read whole (within the size cap) before the time limit. */
async function once(options: TransportOptions, request: Outgoing): Promise<Answer> {
  const controller = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort();
  }, options.timeoutMs);
  try {
    let response: Response;
    try {
      const init: RequestInit = {
        method: request.method,
        headers: request.headers,
        signal: controller.signal,
        // Redirects are not followed: the credentials and the token go to the base URL only.
        redirect: 'manual',
      };
      if (request.body !== undefined) {
        init.body = request.body;
      }
      response = await options.fetch(request.url.toString(), init);
    } catch (error) {
      throw timedOut
        ? new PayrailTimeoutError(options.timeoutMs)
        : new PayrailConnectionError(`${request.method} ${request.url.pathname} failed: ${reason(error)}`, {
            cause: error,
          });
    }
    try {
      const body = await readLimited(response, options.maxAnswerBytes);
      return { status: response.status, headers: response.headers, body };
    } catch (error) {
      if (error instanceof PayrailError) {
        throw error;
      }
      throw timedOut
        ? new PayrailTimeoutError(options.timeoutMs)
        : new PayrailConnectionError(`the answer to ${request.method} ${request.url.pathname} was cut short: ${reason(error)}`, {
            cause: error,
          });
    }
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The body of an answer, refused as soon as it passes `limit` bytes (by its `Content-Length`, or
 * while it is read), so a broken or hostile server cannot exhaust memory.
 */
async function readLimited(response: Response, limit: number): Promise<Uint8Array> {
  const tooLarge = () => {
    const id = response.headers.get(REQUEST_ID_HEADER) ?? undefined;
    return new PayrailDecodeError(response.status, `the answer is larger than ${limit} bytes`, id);
  };
  const declared = response.headers.get('content-length');
  if (declared !== null && Number(declared) > limit) {
    await response.body?.cancel().catch(() => undefined);
    throw tooLarge();
  }
  if (response.body === null) {
    return new Uint8Array(0);
  }
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) {
      break;
    }
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel().catch(() => undefined);
      throw tooLarge();
    }
    chunks.push(value);
  }
  if (chunks.length === 1) {
    return chunks[0] as Uint8Array;
  }
  const body = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    body.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return body;
}

/** The error an answer that is not a success stands for: the API's error body, or a decode error without one. */
export function errorOf(answer: Answer, retryAfter?: number): PayrailError {
  const requestId = answer.headers.get(REQUEST_ID_HEADER) ?? undefined;
  const text = new TextDecoder().decode(answer.body);
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  if (typeof body === 'object' && body !== null && typeof (body as { error?: unknown }).error === 'string') {
    const { error, error_description: description } = body as { error: string; error_description?: unknown };
    return new PayrailApiError({
      status: answer.status,
      code: error,
      // Nullable in the contract: absent and null read alike.
      description: typeof description === 'string' ? description : '',
      requestId,
      retryAfter,
    });
  }
  const shown = text.length > 200 ? `${text.slice(0, 200)}…` : text;
  return new PayrailDecodeError(answer.status, `an error answer without the error body: ${JSON.stringify(shown)}`, requestId);
}

/** The JSON of a successful answer. */
export function json(answer: Answer): unknown {
  try {
    return JSON.parse(new TextDecoder().decode(answer.body));
  } catch (error) {
    throw new PayrailDecodeError(answer.status, `not JSON: ${reason(error)}`, answer.headers.get(REQUEST_ID_HEADER) ?? undefined);
  }
}

/**
 * Whether a failed `fetch` certainly sent nothing (the connection was refused, the name did not
 * resolve), so that even a request that must not be repeated can be tried again. Only Node's
 * errors say so; elsewhere a failure counts as possibly sent.
 */
function notSent(cause: unknown): boolean {
  const codes = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'ENETUNREACH', 'EHOSTUNREACH', 'UND_ERR_CONNECT_TIMEOUT']);
  const seen = new Set<unknown>();
  const walk = (error: unknown): boolean => {
    if (typeof error !== 'object' || error === null || seen.has(error)) {
      return false;
    }
    seen.add(error);
    const { code, cause: inner, errors } = error as { code?: unknown; cause?: unknown; errors?: unknown };
    if (typeof code === 'string' && codes.has(code)) {
      return true;
    }
    if (Array.isArray(errors) && errors.length > 0 && errors.every(walk)) {
      return true;
    }
    return walk(inner);
  };
  return walk(cause);
}

function reason(error: unknown): string {
  if (error instanceof Error) {
    const cause = (error as { cause?: unknown }).cause;
    const detail = cause instanceof Error && cause.message !== '' ? ` (${cause.message})` : '';
    return `${error.message}${detail}`;
  }
  return String(error);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
