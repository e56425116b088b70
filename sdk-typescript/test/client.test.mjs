// @ts-check
// The client's own behaviour (token cache, refresh on 401, retries, timeouts, the size cap,
// paging, the bookmark, filters, secrets kept out of sight) against the scripted local server in
// support/stub.mjs, through the package's ESM entry. The same client against the real worker:
// blackbox/partner.test.mjs.

import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { inspect } from 'node:util';
import { afterEach, describe, test } from 'node:test';

import {
  MAX_ANSWER_BYTES,
  Payrail,
  PayrailApiError,
  PayrailConfigError,
  PayrailConnectionError,
  PayrailDecodeError,
  PayrailError,
  PayrailTimeoutError,
} from 'payrail';

import { error, merchant, page, startStub, transaction } from './support/stub.mjs';

const require = createRequire(import.meta.url);

/** @type {Array<{ close(): Promise<void> }>} */
const stubs = [];

afterEach(async () => {
  await Promise.all(stubs.splice(0).map((stub) => stub.close()));
});

/** @param {Parameters<typeof startStub>[0]} [script] */
async function stub(script) {
  const started = await startStub(script);
  stubs.push(started);
  return started;
}

/**
 * A client of `stub` with quick retries.
 * @param {{ base: string }} stub
 * @param {Partial<import('payrail').PayrailOptions>} [options]
 */
function client(stub, options = {}) {
  return new Payrail({
    baseUrl: stub.base,
    clientId: 'cli_test',
    clientSecret: 'sk_test_secret',
    retry: { initialBackoffMs: 10 },
    ...options,
  });
}

/**
 * The rejection of `promise`, which must reject.
 * @param {Promise<unknown>} promise
 * @returns {Promise<any>}
 */
async function rejection(promise) {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  assert.fail('expected a rejection');
}

describe('the token', () => {
  test('one token serves many calls, and concurrent callers share one fetch', async () => {
    const s = await stub();
    const payrail = client(s);
    await Promise.all(Array.from({ length: 8 }, () => payrail.transactions.page()));
    await payrail.transactions.page();
    assert.equal(s.state.tokensIssued, 1);
    assert.deepEqual(new Set(s.tokens()), new Set(['tok_1']));
    assert.equal(s.tokens().length, 9);
  });

  test('a token about to expire is replaced before use', async () => {
    // A token that lives 0 s is due for refresh at once: every call gets a new one.
    const s = await stub({ expiresIn: 0 });
    const payrail = client(s);
    for (let i = 0; i < 3; i++) {
      await payrail.transactions.page();
    }
    assert.deepEqual(s.tokens(), ['tok_1', 'tok_2', 'tok_3']);
  });

  test('a 401 gets one fresh token and one more try only', async () => {
    let s = await stub({ api: [error(401, 'invalid_client'), page([5], null)] });
    const list = await client(s).transactions.page();
    assert.equal(list.data[0]?.id, 5);
    assert.deepEqual(s.tokens(), ['tok_1', 'tok_2']);

    s = await stub({ api: [error(401, 'invalid_client'), error(401, 'invalid_client')] });
    const err = await rejection(client(s).transactions.page());
    assert.ok(err instanceof PayrailApiError);
    assert.equal(err.status, 401);
    assert.equal(err.code, 'invalid_client');
    assert.equal(s.state.tokensIssued, 2);
    assert.equal(s.state.seen.length, 2);
  });

  test('concurrent calls that meet a 401 together fetch one new token between them', async () => {
    const s = await stub({
      api: [...Array.from({ length: 4 }, () => error(401, 'invalid_client')), ...Array.from({ length: 4 }, () => page([1], null))],
    });
    const payrail = client(s);
    const pages = await Promise.all(Array.from({ length: 4 }, () => payrail.transactions.page()));
    assert.equal(pages.length, 4);
    assert.equal(s.state.tokensIssued, 2);
    assert.deepEqual(s.tokens().slice(4), ['tok_2', 'tok_2', 'tok_2', 'tok_2']);
  });

  test('the token endpoint refusing the credentials is a typed 401 that names no secret', async () => {
    const s = await stub({ token: [error(401, 'invalid_client')] });
    const err = await rejection(client(s).transactions.page());
    assert.ok(err instanceof PayrailApiError);
    assert.deepEqual([err.status, err.code, err.description], [401, 'invalid_client', 'invalid_client on purpose']);
    assert.equal(s.state.seen.length, 0, 'no API request without a token');
    for (const shown of [String(err), err.stack, inspect(err), JSON.stringify(err)]) {
      assert.ok(!String(shown).includes('sk_test_secret'), String(shown));
    }
  });

  test('credentials go as HTTP Basic, each part form-encoded first; the scope is asked for', async () => {
    // RFC 6749 §2.3.1: the server form-decodes each part, so a `+` or `%` in a secret must reach
    // it encoded (Payrail's own secrets have neither; another issuer's might).
    const s = await stub();
    await client(s, { clientId: 'cli_x', clientSecret: 's+c%r t', scope: ['transactions:read', 'events:read'] }).transactions.page();
    const [request] = s.state.tokenRequests;
    assert.ok(request);
    const basic = String(request.headers.authorization).replace(/^Basic /, '');
    assert.equal(Buffer.from(basic, 'base64').toString('utf8'), 'cli_x:s%2Bc%25r+t');
    assert.equal(request.headers['content-type'], 'application/x-www-form-urlencoded');
    assert.deepEqual(Object.fromEntries(new URLSearchParams(request.body)), {
      grant_type: 'client_credentials',
      scope: 'transactions:read events:read',
    });
    assert.ok(!request.body.includes('s+c'), 'the secret is not in the body');
  });

  test('accessToken gives the cached token', async () => {
    const s = await stub();
    const payrail = client(s);
    assert.equal(await payrail.accessToken(), 'tok_1');
    assert.equal(await payrail.accessToken(), 'tok_1');
    assert.equal(s.state.tokensIssued, 1);
  });
});

describe('retries', () => {
  test('a 429 waits for Retry-After, a 5xx backs off, then the answer comes', async () => {
    const s = await stub({
      api: [error(429, 'rate_limited', { 'retry-after': '1' }), error(500, 'server_error'), page([3], null)],
    });
    const started = performance.now();
    const list = await client(s).transactions.page();
    assert.equal(list.data[0]?.id, 3);
    assert.equal(s.state.seen.length, 3);
    assert.ok(performance.now() - started >= 1000, 'Retry-After: 1 was not waited for');
  });

  test('a Retry-After longer than the client waits comes back at once, carrying it', async () => {
    const s = await stub({ api: [error(429, 'rate_limited', { 'retry-after': '120' })] });
    const started = performance.now();
    const err = await rejection(client(s).transactions.page());
    assert.ok(err instanceof PayrailApiError);
    assert.deepEqual([err.status, err.code, err.retryAfter], [429, 'rate_limited', 120]);
    assert.equal(s.state.seen.length, 1);
    assert.ok(performance.now() - started < 1000);
  });

  test('5xx are retried with a growing backoff, then the last error is answered', async () => {
    const s = await stub({ api: Array.from({ length: 6 }, () => error(503, 'server_error')) });
    const started = performance.now();
    const err = await rejection(client(s, { retry: { initialBackoffMs: 40 } }).transactions.page());
    assert.ok(err instanceof PayrailApiError);
    assert.equal(err.status, 503);
    assert.equal(s.state.seen.length, 4, 'the first try and 3 retries');
    // Equal jitter: each wait is at least half its backoff (40, 80, 160 ms).
    assert.ok(performance.now() - started >= 20 + 40 + 80, 'the retries did not back off');
  });

  test('other 4xx are never retried, and carry the API error and the request id', async () => {
    const s = await stub({ api: [error(400, 'invalid_request', { 'payrail-request-id': 'req_3f9a' })] });
    const err = await rejection(client(s).transactions.page());
    assert.ok(err instanceof PayrailApiError && err instanceof PayrailError && err instanceof Error);
    assert.deepEqual(
      [err.status, err.code, err.description, err.requestId, err.retryAfter],
      [400, 'invalid_request', 'invalid_request on purpose', 'req_3f9a', undefined],
    );
    assert.equal(err.message, 'invalid_request (400): invalid_request on purpose (request req_3f9a)');
    assert.equal(err.name, 'PayrailApiError');
    assert.match(String(err.stack), /^PayrailApiError: invalid_request/);
    assert.equal(s.state.seen.length, 1);
  });

  test('an error body with a null description keeps its code; a 404 merchant is null', async () => {
    const s = await stub({ api: [{ status: 404, body: { error: 'not_found', error_description: null } }] });
    assert.equal(await client(s).merchants.retrieve(9), null);
    assert.equal(s.paths()[0], '/v1/merchants/9');
  });

  test('an error answer without the error body is a decode error carrying the status', async () => {
    const s = await stub({ api: [{ status: 502, body: '<html>bad gateway</html>' }] });
    const err = await rejection(client(s, { retry: false }).transactions.page());
    assert.ok(err instanceof PayrailDecodeError);
    assert.equal(err.status, 502);
    assert.match(err.message, /without the error body/);
  });

  test('writes are not repeated on a 5xx, but are on a 429', async () => {
    let s = await stub({ api: [error(500, 'server_error')] });
    const err = await rejection(client(s).sandbox.act(7, 'fail'));
    assert.ok(err instanceof PayrailApiError);
    assert.equal(s.state.seen.length, 1);

    s = await stub({ api: [error(429, 'rate_limited', { 'retry-after': '0' }), { body: transaction(7, { status: 'failed' }) }] });
    const failed = await client(s).sandbox.act(7, 'fail');
    assert.equal(failed.status, 'failed');
    assert.equal(s.state.seen.length, 2);
  });

  test('a connection refused is retried, even for a write; another failure of a write is not', async () => {
    const s = await stub({ api: [{ body: transaction(7) }, { body: transaction(7) }] });
    let calls = 0;
    /**
     * A fetch whose first sandbox call fails as Node's does when `code` happens.
     * @param {string} code
     * @returns {import('payrail').Fetch}
     */
    const flaky = (code) => async (input, init) => {
      if (!input.includes('/sandbox/')) {
        return fetch(input, init);
      }
      calls += 1;
      if (calls === 1) {
        throw new TypeError('fetch failed', { cause: Object.assign(new Error(code), { code }) });
      }
      return fetch(input, init);
    };
    const payrail = client(s, { fetch: flaky('ECONNREFUSED') });
    await payrail.sandbox.act(7, 'pay', { amount: '10.00' });
    assert.equal(calls, 2);

    calls = 0;
    const err = await rejection(client(s, { fetch: flaky('ECONNRESET') }).sandbox.act(7, 'pay', { amount: '10.00' }));
    assert.ok(err instanceof PayrailConnectionError);
    assert.ok(!(err instanceof PayrailTimeoutError));
    assert.match(err.message, /failed: fetch failed \(ECONNRESET\)/);
    assert.equal(calls, 1);
  });

  test('a read that fails to connect ends with a connection error once retries are used up', async () => {
    const s = await stub();
    const base = s.base;
    await s.close();
    const err = await rejection(new Payrail({ baseUrl: base, clientId: 'c', clientSecret: 's', retry: { maxRetries: 1, initialBackoffMs: 1 } }).transactions.page());
    assert.ok(err instanceof PayrailConnectionError, String(err));
  });
});

describe('time and size limits', () => {
  test('an answer that does not come in time is a timeout; a read is tried again', async () => {
    let s = await stub({ api: [{ hang: true }] });
    const started = performance.now();
    const err = await rejection(client(s, { timeoutMs: 150, retry: false }).transactions.page());
    assert.ok(err instanceof PayrailTimeoutError && err instanceof PayrailConnectionError);
    assert.equal(err.timeoutMs, 150);
    assert.ok(performance.now() - started < 5000);

    s = await stub({ api: [{ hang: true }, page([4], null)] });
    const list = await client(s, { timeoutMs: 150 }).transactions.page();
    assert.equal(list.data[0]?.id, 4);
    assert.equal(s.state.seen.length, 2);
  });

  test('a body that stops arriving is a timeout too', async () => {
    const s = await stub({ api: [{ ...page([1], null), hangBody: true }] });
    const err = await rejection(client(s, { timeoutMs: 150, retry: false }).transactions.page());
    assert.ok(err instanceof PayrailTimeoutError, String(err));
  });

  test('a write that times out is not sent again', async () => {
    const s = await stub({ api: [{ hang: true }] });
    const err = await rejection(client(s, { timeoutMs: 150 }).sandbox.act(1, 'fail'));
    assert.ok(err instanceof PayrailTimeoutError);
    assert.equal(s.state.seen.length, 1);
  });

  test('an answer past the size limit is refused, by its length or while it streams', async () => {
    const huge = Buffer.alloc(MAX_ANSWER_BYTES + 1, 'x');
    const s = await stub({
      api: [
        { body: huge },
        {
          raw: (res) => {
            // No Content-Length: the cap must hold while reading.
            res.setHeader('content-type', 'application/json');
            const chunk = Buffer.alloc(1024 * 1024, 'y');
            for (let i = 0; i < 9; i++) res.write(chunk);
            res.end();
          },
        },
      ],
    });
    const payrail = client(s);
    for (let i = 0; i < 2; i++) {
      const err = await rejection(payrail.transactions.page());
      assert.ok(err instanceof PayrailDecodeError, String(err));
      assert.match(err.message, /larger than 8388608 bytes/);
    }
    assert.equal(s.state.seen.length, 2, 'never retried');
  });
});

describe('lists', () => {
  test('a list follows next_cursor until the last page; awaiting it gives the first page', async () => {
    const s = await stub({ api: [page([9, 8], 8), page([7, 6], 6), page([5], null), page([9, 8], 8)] });
    const payrail = client(s);
    const ids = [];
    for await (const t of payrail.transactions.list({ limit: 2, merchantId: 1 })) {
      ids.push(t.id);
    }
    assert.deepEqual(ids, [9, 8, 7, 6, 5]);
    assert.deepEqual(s.paths(), [
      '/v1/transactions?limit=2&merchant_id=1',
      '/v1/transactions?limit=2&merchant_id=1&starting_after=8',
      '/v1/transactions?limit=2&merchant_id=1&starting_after=6',
    ]);
    const list = payrail.transactions.list({ limit: 2 });
    const first = await list;
    assert.deepEqual(first.data.map((t) => t.id), [9, 8]);
    assert.equal((await list).next_cursor, 8, 'awaiting again reuses the page');
    assert.equal(s.state.seen.length, 4);
    assert.equal(Object.prototype.toString.call(list), '[object ListPromise]');
  });

  test('nothing is fetched until a list is awaited or iterated; pages() walks page by page', async () => {
    const s = await stub({ api: [page([3, 2], 2), page([1], null)] });
    const payrail = client(s);
    const list = payrail.transactions.list({ limit: 2 });
    assert.equal(s.state.tokensIssued + s.state.seen.length, 0);
    const sizes = [];
    for await (const p of list.pages()) {
      sizes.push(p.data.length);
    }
    assert.deepEqual(sizes, [2, 1]);
  });

  test('an error mid-list ends it with that error', async () => {
    const s = await stub({ api: [page([9, 8], 8), error(403, 'insufficient_scope')] });
    /** @type {number[]} */
    const seen = [];
    const err = await rejection(
      (async () => {
        for await (const t of client(s).transactions.list()) seen.push(t.id);
      })(),
    );
    assert.deepEqual(seen, [9, 8]);
    assert.ok(err instanceof PayrailApiError);
    assert.equal(err.code, 'insufficient_scope');
  });

  test('a list whose cursor does not move on ends with an error, not a loop', async () => {
    // The same cursor twice, a cycle, has_more on an empty page, has_more with no cursor: each
    // would repeat pages for ever or stop early unnoticed.
    for (const [pages, problem] of /** @type {const} */ ([
      [[page([9, 8], 8), page([7, 6], 8)], 'the same next_cursor twice'],
      [[page([9, 8], 8), page([7, 6], 6), page([5, 4], 8)], 'the same next_cursor twice'],
      [[page([], 8)], 'has_more on an empty page'],
      [[{ body: { object: 'list', data: [transaction(9)], has_more: true, next_cursor: null } }], 'has_more without a next_cursor'],
    ])) {
      const s = await stub({ api: [...pages] });
      const err = await rejection(
        (async () => {
          for await (const t of client(s).transactions.list({ limit: 2 })) void t;
        })(),
      );
      assert.ok(err instanceof PayrailDecodeError, `${problem}: ${err}`);
      assert.ok(err.message.includes(problem), `${problem}: ${err.message}`);
      assert.ok(s.state.seen.length <= pages.length, 'no request past the broken page');
    }
  });

  test('filters become the documented query parameters; unknown ones are refused before sending', async () => {
    const s = await stub({ api: [page([], null), page([], null), page([], null)] });
    const payrail = client(s);
    await payrail.transactions.page({
      status: 'paid',
      merchantId: 3,
      externalReference: 'order 1+2',
      id: undefined,
      createdAfter: new Date(Date.UTC(2026, 10, 21)),
      createdBefore: '2026-11-22T01:00:00+01:00',
      limit: 100,
      startingAfter: 500,
    });
    await payrail.merchants.page({ pspReferenceId: 'ref-1', id: 4 });
    await payrail.events.page({ type: 'payment.paid', transactionId: 7, startingAfter: 'evt_x', createdAfter: new Date(Date.UTC(2026, 10, 21, 4, 35, 27, 250)) });
    assert.deepEqual(s.paths(), [
      '/v1/transactions?status=paid&merchant_id=3&external_reference=order+1%2B2&created_after=2026-11-21T00%3A00%3A00Z' +
        '&created_before=2026-11-22T01%3A00%3A00%2B01%3A00&limit=100&starting_after=500',
      '/v1/merchants?psp_reference_id=ref-1&id=4',
      '/v1/events?type=payment.paid&transaction_id=7&starting_after=evt_x&created_after=2026-11-21T04%3A35%3A27.250Z',
    ]);
    // @ts-expect-error a misspelt filter
    assert.throws(() => payrail.transactions.list({ merchantID: 3 }), /has no filter "merchantID"/);
    // @ts-expect-error a misspelt filter
    await assert.rejects(payrail.merchants.page({ psp_reference_id: 'x' }), TypeError);
    assert.throws(() => payrail.transactions.list({ createdAfter: new Date(NaN) }), RangeError);
    assert.equal(s.state.seen.length, 3);
  });

  test('answers are checked against the contract; new members and new enum values pass', async () => {
    const broken = transaction(5);
    delete (/** @type {Record<string, unknown>} */ (broken).amount);
    const s = await stub({
      api: [
        page([broken], null),
        page([transaction(6, { status: 'on_hold', surprise: { new: true } })], null),
        { body: { ...merchant(3), crypto_enabled: 'yes' } },
      ],
    });
    const payrail = client(s);
    const err = await rejection(payrail.transactions.page());
    assert.ok(err instanceof PayrailDecodeError);
    assert.match(err.message, /TransactionList\.data\[0\]\.amount: missing/);
    const tolerated = await payrail.transactions.page();
    assert.equal(tolerated.data[0]?.status, 'on_hold');
    const bad = await rejection(payrail.merchants.retrieve(3));
    assert.match(bad.message, /Merchant\.crypto_enabled: expected a boolean, got the string "yes"/);
  });

  test('retrieve answers the item or null', async () => {
    const s = await stub({ api: [page([5], null), page([], null), { body: merchant(3) }] });
    const payrail = client(s);
    assert.equal((await payrail.transactions.retrieve(5))?.id, 5);
    assert.equal(await payrail.transactions.retrieve(6), null);
    assert.equal((await payrail.merchants.retrieve(3))?.psp_reference_id, 'm-3');
    assert.deepEqual(s.paths(), ['/v1/transactions?id=5', '/v1/transactions?id=6', '/v1/merchants/3']);
  });

  test('events: typed, newer types kept, and retrieve looks one up by id', async () => {
    /** @param {string} id @param {string} type @param {unknown} data */
    const event = (id, type, data) => ({ id, type, created: 1795000000, data });
    const s = await stub({
      api: [
        page([event('evt_3', 'payment.paid', transaction(1)), event('evt_2', 'payout.created', { x: 1 })], 'evt_2'),
        { body: event('evt_1', 'payment.succeeded', transaction(1)) },
        { body: event('evt_2', 'payout.created', { x: 1 }) },
        { status: 404, body: { error: 'not_found', error_description: 'no such event' } },
        page([event('evt_1', 'payment.paid', { not: 'a transaction' })], null),
      ],
    });
    const payrail = client(s);
    const [, other] = (await payrail.events.list({ transactionId: 1, limit: 100 })).data;
    assert.deepEqual(other, { id: 'evt_2', type: 'other', otherType: 'payout.created', created: 1795000000, data: { x: 1 } });
    const found = await payrail.events.retrieve('evt_1');
    assert.equal(found?.type, 'payment.succeeded');
    if (found?.type === 'payment.succeeded') {
      assert.equal(found.data.amount.gross, '10.00');
    }
    assert.deepEqual(await payrail.events.retrieve('evt_2'), other);
    assert.equal(await payrail.events.retrieve('evt_/..'), null);
    assert.deepEqual(s.paths(), [
      '/v1/events?transaction_id=1&limit=100',
      '/v1/events/evt_1',
      '/v1/events/evt_2',
      '/v1/events/evt_%2F..',
    ]);
    const err = await rejection(payrail.events.page());
    assert.ok(err instanceof PayrailDecodeError);
    assert.match(err.message, /EventList\.data\[0\]\.data\.object: missing/);
  });
});

describe('the bookmark', () => {
  test('the last Payrail-Bookmark is sent with the next read; one not shaped like a bookmark is dropped', async () => {
    const s = await stub({
      api: [
        page([1], null, { 'payrail-bookmark': '0000001d-00000002-00004f95-b2f7' }),
        page([merchant(1)], null),
        page([1], null, { 'payrail-bookmark': 'not a bookmark!' }),
        page([1], null),
      ],
    });
    const payrail = client(s);
    assert.equal(payrail.bookmark, undefined);
    await payrail.transactions.page();
    assert.equal(payrail.bookmark, '0000001d-00000002-00004f95-b2f7');
    await payrail.merchants.page();
    await payrail.events.page().catch(() => undefined);
    await payrail.transactions.page();
    const sent = s.state.seen.map((r) => r.headers['payrail-bookmark']);
    assert.deepEqual(sent, [undefined, '0000001d-00000002-00004f95-b2f7', '0000001d-00000002-00004f95-b2f7', '0000001d-00000002-00004f95-b2f7']);
  });
});

describe('checkout and sandbox', () => {
  test('a checkout is created without the token; with an idempotency key it is retried', async () => {
    const session = { id: 'cs_1', transaction_id: 11, url: 'http://127.0.0.1/checkout/cs_1' };
    let s = await stub({ api: [error(503, 'payments_unavailable'), { status: 201, body: session }] });
    const options = /** @type {const} */ ({
      publicKey: 'pk_test_0123456789abcdef',
      amount: '12.34',
      currency: 'EUR',
      title: 'Order',
      externalReference: 'ORDER-1',
      idempotencyKey: 'ORDER-1',
      redirectUrl: 'https://shop.example/done',
    });
    assert.deepEqual(await client(s).checkout.create(options), session);
    assert.equal(s.state.tokensIssued, 0);
    const [request] = s.state.seen;
    assert.equal(request?.headers.authorization, undefined);
    assert.equal(request?.url, '/checkout/sessions');
    assert.deepEqual(JSON.parse(request?.body ?? ''), { ...options, allowCrypto: true });
    assert.equal(s.state.seen.length, 2);

    s = await stub({ api: [error(503, 'payments_unavailable'), { status: 201, body: session }] });
    const err = await rejection(client(s).checkout.create({ ...options, idempotencyKey: undefined }));
    assert.equal(err.code, 'payments_unavailable');
    assert.equal(s.state.seen.length, 1);
  });

  test('sandbox actions post to their path with the token and answer the transaction', async () => {
    const s = await stub({ api: [{ body: transaction(11) }, { body: transaction(11) }] });
    const payrail = client(s);
    assert.equal((await payrail.sandbox.act(11, 'pay', { amount: '12.34' })).id, 11);
    await payrail.sandbox.act(11, 'settle');
    assert.deepEqual(
      s.state.seen.map((r) => [r.method, r.url, r.headers.authorization, r.body]),
      [
        ['POST', '/sandbox/transactions/11/pay', 'Bearer tok_1', '{"amount":"12.34"}'],
        ['POST', '/sandbox/transactions/11/settle', 'Bearer tok_1', '{}'],
      ],
    );
    // @ts-expect-error not an action
    await assert.rejects(payrail.sandbox.act(11, 'explode'), /a sandbox action is one of pay, settle, refund, fail/);
  });
});

describe('configuration and secrets', () => {
  test('plain http is for this machine only', () => {
    for (const local of ['http://127.0.0.1:8787', 'http://[::1]:8787', 'http://localhost:8787', 'https://api.example.com']) {
      assert.doesNotThrow(() => new Payrail({ baseUrl: local, clientId: 'cli_x', clientSecret: 'sk_live_secret' }), local);
    }
    for (const remote of ['http://api.example.com', 'http://10.0.0.5:8787']) {
      assert.throws(() => new Payrail({ baseUrl: remote, clientId: 'cli_x', clientSecret: 'sk_live_secret' }), (err) => {
        assert.ok(err instanceof PayrailConfigError);
        assert.match(err.message, /use https/);
        return true;
      });
    }
    for (const [options, problem] of /** @type {const} */ ([
      [{ baseUrl: 'not a url', clientId: 'a', clientSecret: 'b' }, /is not a URL/],
      [{ baseUrl: 'ftp://example.com', clientId: 'a', clientSecret: 'b' }, /not http\(s\)/],
      [{ baseUrl: 'https://u:p@example.com', clientId: 'a', clientSecret: 'b' }, /credentials/],
      [{ baseUrl: 'https://example.com', clientId: '', clientSecret: 'b' }, /clientId is required/],
      [{ baseUrl: 'https://example.com', clientId: 'a', clientSecret: '' }, /clientSecret is required/],
      [{ baseUrl: 'https://example.com', clientId: 'a', clientSecret: 'b', timeoutMs: 0 }, /timeoutMs/],
      [{ baseUrl: 'https://example.com', clientId: 'a', clientSecret: 'b', retry: { maxRetries: -1 } }, /retry.maxRetries/],
    ])) {
      assert.throws(() => new Payrail(options), problem);
    }
    assert.equal(new Payrail({ baseUrl: 'https://example.com/api', clientId: 'a', clientSecret: 'b' }).baseUrl, 'https://example.com/api/');
    // A credential typed into the URL is never repeated, whatever else is wrong with it.
    for (const leaky of ['http://cli_1:sk_live_SECRET@api.example.com', 'ftp://u:sk_live_SECRET@x.example', 'sk_live_SECRET']) {
      assert.throws(() => new Payrail({ baseUrl: leaky, clientId: 'a', clientSecret: 'b' }), (err) => {
        assert.ok(err instanceof PayrailConfigError);
        assert.ok(!err.message.includes('sk_live_SECRET'), err.message);
        return true;
      });
    }
  });

  test('a token answer that is no bearer token is refused without repeating it', async () => {
    const s = await stub({ token: [{ body: { access_token: 'tok\nLEAKED', token_type: 'Bearer', expires_in: 3600 } }] });
    const err = await rejection(client(s).transactions.page());
    assert.ok(err instanceof PayrailDecodeError, String(err));
    assert.ok(!String(err.message).includes('LEAKED'), err.message);
    assert.deepEqual(s.paths(), []);
  });

  test('retrieve without a transaction id is refused before any request', async () => {
    const s = await stub();
    for (const id of [undefined, null, 1.5, '7']) {
      // @ts-expect-error: the wrong types on purpose
      await assert.rejects(client(s).transactions.retrieve(id), TypeError);
    }
    assert.deepEqual(s.paths(), []);
  });

  test('the secret and the token are in no string form of the client', async () => {
    const s = await stub();
    const payrail = client(s, { clientSecret: 'sk_live_do_not_show' });
    await payrail.transactions.page();
    for (const shown of [inspect(payrail, { showHidden: true, depth: 10 }), String(payrail), JSON.stringify(payrail), inspect(payrail.transactions)]) {
      assert.ok(shown.includes('cli_test') || !shown.includes('Payrail'), shown);
      assert.ok(!shown.includes('sk_live_do_not_show'), shown);
      assert.ok(!shown.includes('tok_1'), shown);
    }
    assert.deepEqual(JSON.parse(JSON.stringify(payrail)), { baseUrl: `${s.base}/`, clientId: 'cli_test' });
  });

  test('a path below the base URL is kept', async () => {
    const s = await stub();
    await new Payrail({ baseUrl: `${s.base}/prefix`, clientId: 'a', clientSecret: 'b' }).transactions.page();
    assert.equal(s.state.tokenRequests[0]?.url, '/prefix/oauth/token');
    assert.equal(s.paths()[0], '/prefix/v1/transactions');
  });
});

describe('the CommonJS entry', () => {
  test('require("payrail") gives the same client, with its own error classes', async () => {
    /** @type {typeof import('payrail')} */
    const cjs = require('payrail');
    assert.notEqual(cjs.Payrail, Payrail, 'a separate build');
    const s = await stub({ api: [page([2, 1], null), error(404, 'not_found')] });
    const payrail = new cjs.Payrail({ baseUrl: s.base, clientId: 'cli_test', clientSecret: 'sk_test_secret' });
    assert.deepEqual((await payrail.transactions.page()).data.map((t) => t.id), [2, 1]);
    const err = await rejection(payrail.sandbox.act(1, 'fail'));
    assert.ok(err instanceof cjs.PayrailApiError && err instanceof cjs.PayrailError);
    assert.equal(err.code, 'not_found');
  });
});
