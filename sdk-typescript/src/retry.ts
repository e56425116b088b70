// When to try again: exponential backoff with jitter, and the server's `Retry-After` when it
// gives one.

import { PayrailConfigError } from './errors.js';

/**
 * How failed requests are retried: 429 (honouring `Retry-After`), 5xx of reads and token
 * requests, failures to connect, and timeouts of reads. Never any other 4xx.
 */
export interface RetryOptions {
  /** Tries after the first (default 3; 0 turns retrying off). */
  maxRetries?: number | undefined;
  /** Backoff before the first retry, in milliseconds (default 250), doubled each time. */
  initialBackoffMs?: number | undefined;
  /** Largest backoff, in milliseconds (default 8000). */
  maxBackoffMs?: number | undefined;
  /**
   * A `Retry-After` longer than this (milliseconds, default 60 000) is not waited for: the
   * `PayrailApiError` comes back at once, carrying it in `retryAfter`.
   */
  maxRetryAfterMs?: number | undefined;
}

/** A complete retry policy. */
export interface RetryPolicy {
  readonly maxRetries: number;
  readonly initialBackoffMs: number;
  readonly maxBackoffMs: number;
  readonly maxRetryAfterMs: number;
}

/** The defaults: 3 retries, 250 ms doubling to 8 s, `Retry-After` waited up to 60 s. */
export const DEFAULT_RETRY: RetryPolicy = Object.freeze({
  maxRetries: 3,
  initialBackoffMs: 250,
  maxBackoffMs: 8_000,
  maxRetryAfterMs: 60_000,
});

/** The policy `options` describe (`false`: no retries), checked. */
export function retryPolicy(options: RetryOptions | false | undefined): RetryPolicy {
  if (options === false) {
    return { ...DEFAULT_RETRY, maxRetries: 0 };
  }
  const policy: RetryPolicy = {
    maxRetries: options?.maxRetries ?? DEFAULT_RETRY.maxRetries,
    initialBackoffMs: options?.initialBackoffMs ?? DEFAULT_RETRY.initialBackoffMs,
    maxBackoffMs: options?.maxBackoffMs ?? DEFAULT_RETRY.maxBackoffMs,
    maxRetryAfterMs: options?.maxRetryAfterMs ?? DEFAULT_RETRY.maxRetryAfterMs,
  };
  for (const [name, value] of Object.entries(policy)) {
    if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
      throw new PayrailConfigError(`retry.${name} must be a number of at least 0, not ${String(value)}`);
    }
  }
  if (!Number.isInteger(policy.maxRetries)) {
    throw new PayrailConfigError(`retry.maxRetries must be a whole number, not ${policy.maxRetries}`);
  }
  return Object.freeze(policy);
}

/**
 * The wait in milliseconds before retry number `attempt + 1`, or `undefined` when no retry is
 * left or the server asks for longer than `maxRetryAfterMs`.
 */
export function retryDelay(policy: RetryPolicy, attempt: number, retryAfterMs?: number): number | undefined {
  if (attempt >= policy.maxRetries) {
    return undefined;
  }
  if (retryAfterMs !== undefined) {
    return retryAfterMs <= policy.maxRetryAfterMs ? retryAfterMs : undefined;
  }
  const backoff = Math.min(policy.initialBackoffMs * 2 ** attempt, policy.maxBackoffMs);
  // "Equal jitter": half fixed, half random, so clients that failed together spread out and no
  // retry comes sooner than half the backoff.
  const half = backoff / 2;
  return half + Math.random() * half;
}

/**
 * `Retry-After` in seconds: the delay-seconds form the API sends, or an HTTP date; `undefined`
 * when absent or unreadable.
 */
export function parseRetryAfter(value: string | null, now: number = Date.now()): number | undefined {
  if (value === null) {
    return undefined;
  }
  const text = value.trim();
  if (/^\d{1,10}$/.test(text)) {
    return Number(text);
  }
  const date = Date.parse(text);
  return Number.isNaN(date) ? undefined : Math.max(0, Math.ceil((date - now) / 1000));
}
