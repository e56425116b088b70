// @ts-check
// The retry policy's arithmetic: backoff doubling within its jitter up to its cap, Retry-After
// honoured up to its own cap, and Retry-After read in both of HTTP's forms.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { DEFAULT_RETRY, parseRetryAfter, retryDelay, retryPolicy } from '#internal/retry.js';

test('backoff doubles within its jitter and stops after the last retry', () => {
  for (const [attempt, full] of [[0, 250], [1, 500], [2, 1000]]) {
    for (let i = 0; i < 50; i++) {
      const delay = retryDelay(DEFAULT_RETRY, attempt);
      assert.ok(delay !== undefined && delay >= full / 2 && delay <= full, `${attempt}: ${delay}`);
    }
  }
  assert.equal(retryDelay(DEFAULT_RETRY, 3), undefined);
  const long = retryPolicy({ maxRetries: 40 });
  assert.ok(/** @type {number} */ (retryDelay(long, 39)) <= 8000);
});

test('Retry-After is honoured up to its cap', () => {
  assert.equal(retryDelay(DEFAULT_RETRY, 0, 2000), 2000);
  assert.equal(retryDelay(DEFAULT_RETRY, 0, 61_000), undefined);
  assert.equal(retryDelay(retryPolicy(false), 0, 0), undefined);
});

test('Retry-After in seconds or as an HTTP date', () => {
  assert.equal(parseRetryAfter('120'), 120);
  assert.equal(parseRetryAfter(' 3 '), 3);
  assert.equal(parseRetryAfter(null), undefined);
  assert.equal(parseRetryAfter('soon'), undefined);
  const now = Date.UTC(2026, 10, 21, 4, 35, 27);
  assert.equal(parseRetryAfter('Sat, 21 Nov 2026 04:36:27 GMT', now), 60);
  assert.equal(parseRetryAfter('Sat, 21 Nov 2026 04:30:00 GMT', now), 0);
});
