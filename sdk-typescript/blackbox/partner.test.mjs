// @ts-check
// The library against the real worker under `wrangler dev`, started with its demo data by
// tests/tests/it/partner_tools/libraries.rs, which passes the credentials in the environment
// (see REQUIRED below). Covers: the token; every filter of the transactions list, each result
// checked against its filter and against a raw walk of the same pages over plain HTTP; merchants
// (list, by id, by psp_reference_id); the events feed (list, by id); pagination to the end over
// several pages; the Payrail-Bookmark carried to the next call; 403 for a missing scope; 401
// after the secret is rotated; typed errors for bad filters; and a webhook delivered by the
// worker to a receiver in this file, verified by the library, with forgeries refused.
//
// Run by the harness from the repository root, after `npm run build` in sdk-typescript:
//   node --test sdk-typescript/blackbox/partner.test.mjs

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createServer } from 'node:http';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { before, after, describe, test } from 'node:test';

import {
  Payrail,
  PayrailApiError,
  STATUSES,
  Webhook,
  WebhookVerificationError,
} from 'payrail';

const REQUIRED = [
  'PAYRAIL_API_URL',
  'PAYRAIL_CLIENT_ID',
  'PAYRAIL_CLIENT_SECRET',
  'PAYRAIL_NARROW_CLIENT_ID',
  'PAYRAIL_NARROW_CLIENT_SECRET',
  'PAYRAIL_ROTATE_CLIENT_ID',
  'PAYRAIL_ROTATE_CLIENT_SECRET',
  'PAYRAIL_PORTAL_COOKIE',
  'PAYRAIL_PORTAL_CSRF',
  'PAYRAIL_PUBLISHABLE_KEY',
  'PAYRAIL_WEBHOOK_PORT',
  'PAYRAIL_WEBHOOK_SECRET',
];

const missing = REQUIRED.filter((name) => !process.env[name]);
const run = promisify(execFile);

if (missing.length > 0) {
  test('the black-box environment', () => {
    assert.fail(
      `missing ${missing.join(', ')}: these tests run against a live worker, started with the ` +
        'credentials they need by the harness: cargo test -p payrail-tests --test it partner_tools::libraries',
    );
  });
} else {
  blackBox();
}

/** @param {string} name */
function env(name) {
  return /** @type {string} */ (process.env[name]);
}

/**
 * A `fetch` that records, for every request, what was sent and what came back.
 */
function recordingFetch() {
  /** @type {Array<{ method: string, path: string, status: number, sentBookmark: string | null, bookmark: string | null, requestId: string | null }>} */
  const log = [];
  /** @type {import('payrail').Fetch} */
  const recording = async (input, init) => {
    const response = await fetch(input, init);
    const url = new URL(input);
    log.push({
      method: String(init.method ?? 'GET'),
      path: url.pathname,
      status: response.status,
      sentBookmark: new Headers(init.headers).get('payrail-bookmark'),
      bookmark: response.headers.get('payrail-bookmark'),
      requestId: response.headers.get('payrail-request-id'),
    });
    return response;
  };
  return { fetch: recording, log };
}

/**
 * The rejection of `promise`, which must reject.
 * @param {Promise<unknown>} promise
 * @returns {Promise<any>}
 */
async function rejection(promise) {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  assert.fail('expected a rejection');
}

/**
 * Every item of a list.
 * @template T
 * @param {AsyncIterable<T>} list
 */
async function all(list) {
  /** @type {T[]} */
  const items = [];
  for await (const item of list) items.push(item);
  return items;
}

/**
 * Polls `check` until it answers something or `ms` pass.
 * @template T
 * @param {() => T | undefined} check
 * @param {number} ms
 * @param {string} what
 * @returns {Promise<T>}
 */
async function waitFor(check, ms, what) {
  const deadline = Date.now() + ms;
  for (;;) {
    const found = check();
    if (found !== undefined) return found;
    if (Date.now() > deadline) assert.fail(`${what}: not within ${ms / 1000} s`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

function blackBox() {
  const baseUrl = env('PAYRAIL_API_URL');
  // Transactions made while these tests run (this file's, and other tests' sharing the worker)
  // are left out of the walks by bounding them here: created_at has whole seconds, so every
  // transaction created from now on has created_at >= bound.
  const bound = new Date(Math.floor(Date.now() / 1000) * 1000);
  const boundText = bound.toISOString().replace('.000Z', 'Z');

  const recorded = recordingFetch();
  const payrail = new Payrail({ baseUrl, clientId: env('PAYRAIL_CLIENT_ID'), clientSecret: env('PAYRAIL_CLIENT_SECRET'), fetch: recorded.fetch });

  /** A token fetched over plain HTTP, for the raw walks. @type {string} */
  let rawToken = '';

  /**
   * A raw GET of the API with `rawToken`.
   * @param {string} path
   */
  async function rawGet(path) {
    const response = await fetch(new URL(path, baseUrl), { headers: { authorization: `Bearer ${rawToken}` } });
    assert.equal(response.status, 200, `${path}: ${await response.clone().text()}`);
    return /** @type {any} */ (await response.json());
  }

  /**
   * Every item of a list walked by hand, 100 a page, following next_cursor.
   * @param {string} path with its query
   * @returns {Promise<any[]>}
   */
  async function rawWalk(path) {
    const items = [];
    let cursor = null;
    for (;;) {
      const page = await rawGet(`${path}${path.includes('?') ? '&' : '?'}limit=100${cursor === null ? '' : `&starting_after=${cursor}`}`);
      items.push(...page.data);
      if (!page.has_more) return items;
      cursor = page.next_cursor;
    }
  }

  /** Every Northwind transaction created before `bound`, by the raw walk. @type {any[]} */
  let raw = [];

  before(async () => {
    const response = await fetch(new URL('/oauth/token', baseUrl), {
      method: 'POST',
      headers: {
        authorization: `Basic ${Buffer.from(`${env('PAYRAIL_CLIENT_ID')}:${env('PAYRAIL_CLIENT_SECRET')}`).toString('base64')}`,
        'content-type': 'application/x-www-form-urlencoded',
      },
      body: 'grant_type=client_credentials',
    });
    assert.equal(response.status, 200, await response.clone().text());
    rawToken = /** @type {any} */ (await response.json()).access_token;
    raw = await rawWalk(`/v1/transactions?created_before=${encodeURIComponent(boundText)}`);
  });

  /**
   * The ids of `items`.
   * @param {Array<{ id: number }>} items
   */
  const ids = (items) => items.map((item) => item.id);

  describe('the token', () => {
    test('is fetched with the client credentials and cached', async () => {
      const token = await payrail.accessToken();
      assert.match(token, /^prt_/);
      await payrail.transactions.page({ limit: 1 });
      assert.equal(await payrail.accessToken(), token);
      assert.equal(recorded.log.filter((r) => r.path === '/oauth/token').length, 1);
    });
  });

  describe('transactions', () => {
    test('a list follows every page to the end, exactly as a raw walk of the same pages', async () => {
      assert.ok(raw.length > 100, `more than one page of 100: ${raw.length}`);
      const before = recorded.log.length;
      const walked = await all(payrail.transactions.list({ createdBefore: bound, limit: 100 }));
      assert.deepEqual(walked, raw);
      assert.ok(ids(walked).every((id, i, all) => i === 0 || all[i - 1] > id), 'newest first');
      const pages = recorded.log.slice(before).filter((r) => r.path === '/v1/transactions');
      assert.equal(pages.length, Math.ceil(raw.length / 100) + (raw.length % 100 === 0 ? 1 : 0));
    });

    test('status: each normalized status selects exactly its transactions', async () => {
      let nonEmpty = 0;
      for (const status of STATUSES) {
        const got = await all(payrail.transactions.list({ status, createdBefore: bound, limit: 100 }));
        assert.ok(got.every((t) => t.status === status), status);
        assert.deepEqual(ids(got), ids(raw.filter((t) => t.status === status)), status);
        if (got.length > 0) nonEmpty += 1;
      }
      assert.ok(nonEmpty >= 4, 'the demo data has most statuses');
    });

    test('merchantId, and filters combined with AND', async () => {
      const counts = new Map();
      for (const t of raw) counts.set(t.merchant_id, (counts.get(t.merchant_id) ?? 0) + 1);
      const [merchantId] = [...counts.entries()].sort((a, b) => b[1] - a[1])[0];
      const got = await all(payrail.transactions.list({ merchantId, createdBefore: bound, limit: 100 }));
      assert.ok(got.length > 0 && got.every((t) => t.merchant_id === merchantId));
      assert.deepEqual(ids(got), ids(raw.filter((t) => t.merchant_id === merchantId)));
      const paid = await all(payrail.transactions.list({ merchantId, status: 'paid', createdBefore: bound }));
      assert.deepEqual(ids(paid), ids(raw.filter((t) => t.merchant_id === merchantId && t.status === 'paid')));
    });

    test('externalReference: an exact match on the order id', async () => {
      const sample = raw.find((t) => t.external_reference !== null);
      assert.ok(sample, 'a transaction with a reference');
      const got = await all(payrail.transactions.list({ externalReference: sample.external_reference }));
      assert.ok(got.length > 0 && got.every((t) => t.external_reference === sample.external_reference));
      assert.ok(ids(got).includes(sample.id));
      assert.deepEqual(await payrail.transactions.page({ externalReference: `${sample.external_reference}-no-such` }), {
        object: 'list',
        data: [],
        has_more: false,
        next_cursor: null,
      });
    });

    test('id, and retrieve: one transaction or null', async () => {
      const sample = raw[Math.floor(raw.length / 2)];
      assert.deepEqual((await payrail.transactions.page({ id: sample.id })).data, [sample]);
      assert.deepEqual(await payrail.transactions.retrieve(sample.id), sample);
      assert.equal(await payrail.transactions.retrieve(9_007_199_254_740_991), null);
    });

    test('createdAfter is inclusive and createdBefore exclusive, as Dates, date-times or dates', async () => {
      const pivot = raw[Math.floor(raw.length / 3)].created_at;
      const after = await all(payrail.transactions.list({ createdAfter: pivot, createdBefore: bound, limit: 100 }));
      assert.ok(after.length > 0 && after.every((t) => String(t.created_at) >= pivot));
      assert.deepEqual(ids(after), ids(raw.filter((t) => t.created_at >= pivot)));
      const earlier = await all(payrail.transactions.list({ createdBefore: new Date(pivot), limit: 100 }));
      assert.ok(earlier.length > 0 && earlier.every((t) => String(t.created_at) < pivot));
      assert.deepEqual(ids(earlier), ids(raw.filter((t) => t.created_at < pivot)));
      const day = pivot.slice(0, 10);
      const sinceDay = await all(payrail.transactions.list({ createdAfter: day, createdBefore: bound, limit: 100 }));
      assert.deepEqual(ids(sinceDay), ids(raw.filter((t) => t.created_at >= `${day}T00:00:00Z`)));
      // An offset other than Z names the same instant (the library sends its `+` encoded).
      const local = new Date(Date.parse(pivot) + 3_600_000).toISOString().replace('.000Z', '+01:00');
      const viaOffset = await all(payrail.transactions.list({ createdAfter: local, createdBefore: bound, limit: 100 }));
      assert.deepEqual(ids(viaOffset), ids(after), local);
    });

    test('limit and startingAfter: one page, and the page after a cursor', async () => {
      const first = await payrail.transactions.page({ limit: 7, createdBefore: bound });
      assert.deepEqual(ids(first.data), ids(raw.slice(0, 7)));
      assert.equal(first.has_more, true);
      assert.equal(first.next_cursor, raw[6].id);
      const next = await payrail.transactions.page({ limit: 10, startingAfter: raw[50].id, createdBefore: bound });
      assert.deepEqual(ids(next.data), ids(raw.slice(51, 61)));
      assert.ok(next.data.every((t) => t.id < raw[50].id));
    });

    test('awaiting a list gives its first page', async () => {
      const page = await payrail.transactions.list({ limit: 3, createdBefore: bound });
      assert.deepEqual(ids(page.data), ids(raw.slice(0, 3)));
    });
  });

  describe('merchants', () => {
    test('list (a page at a time), retrieve by id, and by psp_reference_id', async () => {
      const rawMerchants = await rawWalk('/v1/merchants');
      assert.ok(rawMerchants.length > 0);
      const merchants = await all(payrail.merchants.list({ limit: 1 }));
      assert.deepEqual(merchants, rawMerchants);
      for (const merchant of merchants) {
        assert.deepEqual(await payrail.merchants.retrieve(merchant.id), merchant);
        assert.deepEqual((await payrail.merchants.page({ pspReferenceId: merchant.psp_reference_id })).data, [merchant]);
      }
      const [one] = merchants;
      assert.deepEqual(await all(payrail.merchants.list({ id: one.id })), [one]);
      assert.equal(await payrail.merchants.retrieve(9_007_199_254_740_991), null);
    });
  });

  describe('the bookmark', () => {
    test('each answer’s Payrail-Bookmark is sent with the next read', async () => {
      const mark = recorded.log.length;
      await payrail.transactions.page({ limit: 1 });
      await payrail.merchants.page({ limit: 1 });
      await payrail.events.page({ limit: 1 });
      const reads = recorded.log.slice(mark).filter((r) => r.path.startsWith('/v1/'));
      assert.equal(reads.length, 3);
      for (const read of reads) {
        assert.match(String(read.bookmark), /^[A-Za-z0-9-]{1,128}$/, `${read.path} answers a bookmark`);
      }
      assert.equal(reads[1].sentBookmark, reads[0].bookmark);
      assert.equal(reads[2].sentBookmark, reads[1].bookmark);
      assert.equal(payrail.bookmark, reads[2].bookmark);
    });
  });

  describe('errors', () => {
    test('a bad filter value is a typed 400 naming the parameter, with the request id', async (t) => {
      for (const [params, parameter] of /** @type {Array<[import('payrail').TransactionListParams, string]>} */ ([
        [{ createdAfter: 'yesterday' }, 'created_after'],
        [{ limit: 0 }, 'limit'],
        [{ limit: 101 }, 'limit'],
        [{ status: /** @type {any} */ ('bogus') }, 'status'],
        [{ createdBefore: '2026-11-21T00:00:00' }, 'created_before'],
      ])) {
        const err = await rejection(payrail.transactions.page(params));
        assert.ok(err instanceof PayrailApiError, String(err));
        assert.equal(err.status, 400);
        assert.equal(err.code, 'invalid_request');
        assert.ok(err.description.includes(parameter), `${parameter}: ${err.description}`);
        const answer = recorded.log.at(-1);
        assert.equal(answer?.status, 400);
        assert.match(String(err.requestId), /^req_/, 'the worker names every answer');
        assert.equal(err.requestId, answer?.requestId);
        if (parameter === 'created_after') t.diagnostic(`request id of the 400: ${err.requestId}`);
      }
      // A filter the API does not have is refused before any request.
      const count = recorded.log.length;
      // @ts-expect-error a misspelt filter
      assert.throws(() => payrail.transactions.list({ merchantID: 1 }), TypeError);
      assert.equal(recorded.log.length, count);
    });

    test('a token without the scope gets a typed 403 insufficient_scope', async () => {
      const narrow = new Payrail({ baseUrl, clientId: env('PAYRAIL_NARROW_CLIENT_ID'), clientSecret: env('PAYRAIL_NARROW_CLIENT_SECRET') });
      assert.ok((await narrow.transactions.page({ limit: 1 })).data.length === 1);
      for (const call of [() => narrow.merchants.page(), () => narrow.merchants.retrieve(1), () => narrow.events.page()]) {
        const err = await rejection(call());
        assert.ok(err instanceof PayrailApiError, String(err));
        assert.deepEqual([err.status, err.code], [403, 'insufficient_scope']);
      }
    });

    test('after the secret is rotated: a 401, one token refetch with the old secret, a typed 401 invalid_client', async () => {
      const log = recordingFetch();
      const clientId = env('PAYRAIL_ROTATE_CLIENT_ID');
      const before = new Payrail({ baseUrl, clientId, clientSecret: env('PAYRAIL_ROTATE_CLIENT_SECRET'), fetch: log.fetch });
      const [sample] = (await before.transactions.page({ limit: 1 })).data;
      assert.ok(sample);

      const rotated = await fetch(new URL(`/portal/api/clients/${encodeURIComponent(clientId)}/rotate`, baseUrl), {
        method: 'POST',
        headers: { cookie: `payrail_portal=${env('PAYRAIL_PORTAL_COOKIE')}`, 'x-csrf-token': env('PAYRAIL_PORTAL_CSRF') },
      });
      assert.equal(rotated.status, 200, await rotated.clone().text());
      const { client_secret: newSecret } = /** @type {any} */ (await rotated.json());
      assert.match(newSecret, /^sk_/);

      const mark = log.log.length;
      // A lookup by id, which the primary answers: the revoked token fails at once.
      const err = await rejection(before.transactions.retrieve(sample.id));
      assert.ok(err instanceof PayrailApiError, String(err));
      assert.deepEqual([err.status, err.code], [401, 'invalid_client']);
      assert.deepEqual(
        log.log.slice(mark).map((r) => `${r.method} ${r.path} ${r.status}`),
        ['GET /v1/transactions 401', 'POST /oauth/token 401'],
      );

      const after = new Payrail({ baseUrl, clientId, clientSecret: newSecret });
      assert.deepEqual(await after.transactions.retrieve(sample.id), sample);
    });
  });

  describe('checkout, sandbox, events and a webhook', () => {
    const secret = env('PAYRAIL_WEBHOOK_SECRET');
    const port = Number(env('PAYRAIL_WEBHOOK_PORT'));
    const webhook = new Webhook(secret);
    /** Events the receiver verified. @type {import('payrail').Event[]} */
    const verified = [];
    /** Why the receiver refused requests. @type {string[]} */
    const refused = [];

    // The receiver a partner would write: the raw body (at most 64 KiB), verified by the
    // library, 2xx at once when it holds, 400 when it does not.
    const server = createServer((req, res) => {
      /** @type {Buffer[]} */
      const chunks = [];
      let size = 0;
      req.on('data', (chunk) => {
        size += chunk.length;
        if (size > 64 * 1024) {
          res.writeHead(413).end();
          req.destroy();
          return;
        }
        chunks.push(chunk);
      });
      req.on('end', () => {
        if (req.method !== 'POST' || req.url !== '/webhooks') {
          res.writeHead(404).end();
          return;
        }
        webhook.verifyRequest(req.headers, Buffer.concat(chunks)).then(
          (event) => {
            verified.push(event);
            res.writeHead(204).end();
          },
          (error) => {
            refused.push(error instanceof WebhookVerificationError ? error.reason : String(error));
            res.writeHead(error instanceof WebhookVerificationError ? 400 : 500).end();
          },
        );
      });
    });

    before(async () => {
      await new Promise((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, '127.0.0.1', () => resolve(undefined));
      });
    });

    after(async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(() => resolve(undefined)));
    });

    /** @type {number} */
    let transactionId = 0;
    const reference = `ts-library-${Date.now()}`;

    test('a checkout is created with the publishable key and driven to paid in the sandbox', async () => {
      const options = /** @type {const} */ ({
        publicKey: env('PAYRAIL_PUBLISHABLE_KEY'),
        amount: '12.34',
        currency: 'EUR',
        title: 'TypeScript library order',
        externalReference: reference,
        idempotencyKey: reference,
        redirectUrl: 'https://shop.example/done',
      });
      const session = await payrail.checkout.create(options);
      assert.match(session.id, /^cs_/);
      assert.deepEqual(await payrail.checkout.create(options), session, 'the same key and options: the same session');
      transactionId = session.transaction_id;

      const pending = await payrail.transactions.retrieve(transactionId);
      assert.equal(pending?.status, 'pending');
      assert.equal(pending?.external_reference, reference);

      const paid = await payrail.sandbox.act(transactionId, 'pay', { amount: '12.34' });
      assert.deepEqual([paid.id, paid.status, paid.raw_status, paid.amount.gross], [transactionId, 'paid', 'succeeded', '12.34']);
      const settled = await payrail.sandbox.act(transactionId, 'settle');
      assert.deepEqual([settled.status, settled.raw_status], ['paid', 'paid']);
      const again = await rejection(payrail.sandbox.act(transactionId, 'settle'));
      assert.ok(again instanceof PayrailApiError);
      assert.deepEqual([again.status, again.code], [409, 'conflict']);

      assert.deepEqual(ids(await all(payrail.transactions.list({ externalReference: reference }))), [transactionId]);
    });

    test('the worker delivers its events to the receiver, which the library verifies', async () => {
      assert.ok(transactionId > 0, 'the checkout test ran');
      const event = await waitFor(
        () => verified.find((e) => e.type.startsWith('payment.') && /** @type {any} */ (e.data).id === transactionId),
        60_000,
        `a verified payment event of transaction ${transactionId}`,
      );
      assert.equal(event.type === 'payment.succeeded' || event.type === 'payment.paid', true, event.type);
      if (event.type === 'payment.succeeded' || event.type === 'payment.paid') {
        assert.equal(event.data.external_reference, reference);
        assert.equal(event.data.amount.gross, '12.34');
      }
      assert.deepEqual(refused, [], 'the worker’s deliveries all verify');
    });

    test('forged and tampered deliveries are refused with 400; a genuine one is taken', async () => {
      const body = JSON.stringify({
        id: 'evt_forged',
        type: 'payment.paid',
        created: Math.floor(Date.now() / 1000),
        data: await payrail.transactions.retrieve(transactionId),
      });
      const now = Math.floor(Date.now() / 1000);
      /**
       * @param {string} payload
       * @param {string | undefined} signature
       */
      const post = async (payload, signature) => {
        /** @type {Record<string, string>} */
        const headers = { 'content-type': 'application/json' };
        if (signature !== undefined) headers['payrail-signature'] = signature;
        const response = await fetch(`http://127.0.0.1:${port}/webhooks`, { method: 'POST', headers, body: payload });
        return response.status;
      };
      const genuine = await Webhook.signatureHeader(secret, now, body);
      assert.equal(await post(body, await Webhook.signatureHeader('whsec_not_the_secret', now, body)), 400, 'another secret');
      assert.equal(await post(body.replace('"evt_forged"', '"evt_tampered"'), genuine), 400, 'a tampered body');
      assert.equal(await post(body, await Webhook.signatureHeader(secret, now - 3600, body)), 400, 'an old timestamp');
      assert.equal(await post(body, undefined), 400, 'no signature');
      assert.deepEqual(refused.slice(-4), ['no_matching_signature', 'no_matching_signature', 'timestamp_out_of_tolerance', 'malformed_header']);
      assert.equal(await post(body, genuine), 204, 'the genuine one');
      assert.ok(verified.some((e) => e.id === 'evt_forged'));
    });

    test('the events feed lists the transaction’s events; retrieve finds one by id', async () => {
      const events = await all(payrail.events.list({ transactionId }));
      assert.deepEqual(events.map((e) => e.type), ['payment.paid', 'payment.succeeded'], 'newest first');
      const [paid] = events;
      if (paid?.type !== 'payment.paid') assert.fail('a payment.paid event');
      assert.equal(paid.data.id, transactionId);
      assert.equal(paid.data.amount.gross, '12.34');
      assert.deepEqual(await payrail.events.retrieve(paid.id), paid);
      assert.equal(await payrail.events.retrieve('evt_no_such_event'), null);

      const ofType = await payrail.events.page({ type: 'payment.succeeded', limit: 5 });
      assert.ok(ofType.data.length > 0 && ofType.data.every((e) => e.type === 'payment.succeeded'));
      const since = await all(payrail.events.list({ transactionId, createdAfter: new Date((paid.created + 1) * 1000) }));
      assert.ok(since.every((e) => e.created >= paid.created + 1));

      // The webhook delivered the same event the feed lists.
      const delivered = await waitFor(() => verified.find((e) => e.id === paid.id), 60_000, `the delivery of ${paid.id}`);
      assert.deepEqual(delivered, paid);
    });

    test('the quick start example lists today’s paid transactions, this one among them', async () => {
      const example = fileURLToPath(new URL('../examples/paid-today.mjs', import.meta.url));
      const { stdout } = await run(process.execPath, [example], {
        env: { ...process.env, PAYRAIL_CLIENT_ID: env('PAYRAIL_CLIENT_ID'), PAYRAIL_CLIENT_SECRET: env('PAYRAIL_CLIENT_SECRET') },
        timeout: 60_000,
      });
      const lines = stdout.trim().split('\n');
      assert.ok(lines.some((line) => line.includes(reference) && line.includes('12.34 EUR')), stdout);
      const count = Number(/^(\d+) paid today$/.exec(lines.at(-1) ?? '')?.[1]);
      assert.equal(count, lines.length - 1, stdout);
    });
  });
}
