// @ts-check
// A scripted local Payrail: a `node:http` server on a free loopback port whose token endpoint
// issues `tok_1`, `tok_2`, … and whose API answers come from a queue, so that what a real
// deployment does only under failure (a 401, a 429, a 503, a hang, an answer that never ends)
// happens on cue. It records every request it is sent.

import { createServer } from 'node:http';

/**
 * @typedef {object} Answer
 * @property {number} [status] default 200
 * @property {Record<string, string>} [headers]
 * @property {unknown} [body] JSON-encoded unless a string or a Buffer
 * @property {boolean} [hang] never answer
 * @property {boolean} [hangBody] send the headers and part of the body, then nothing
 * @property {(res: import('node:http').ServerResponse) => void} [raw] answer by hand
 */

/**
 * @typedef {object} Seen
 * @property {string} method
 * @property {string} url path and query
 * @property {import('node:http').IncomingHttpHeaders} headers
 * @property {string} body
 */

/**
 * Starts a stub.
 * @param {{ expiresIn?: number, api?: Answer[], token?: Answer[] }} [script]
 */
export async function startStub(script = {}) {
  const state = {
    expiresIn: script.expiresIn ?? 3600,
    /** @type {Answer[]} */
    api: [...(script.api ?? [])],
    /** Answers of the token endpoint before it starts issuing tokens. @type {Answer[]} */
    token: [...(script.token ?? [])],
    tokensIssued: 0,
    /** @type {Seen[]} */
    tokenRequests: [],
    /** @type {Seen[]} */
    seen: [],
  };
  const server = createServer((req, res) => {
    /** @type {Buffer[]} */
    const chunks = [];
    req.on('data', (chunk) => chunks.push(chunk));
    req.on('end', () => {
      const request = {
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
      };
      if (request.url.endsWith('/oauth/token')) {
        state.tokenRequests.push(request);
        const scripted = state.token.shift();
        if (scripted !== undefined) {
          answer(res, scripted);
          return;
        }
        state.tokensIssued += 1;
        answer(res, {
          body: {
            access_token: `tok_${state.tokensIssued}`,
            token_type: 'Bearer',
            expires_in: state.expiresIn,
            scope: 'transactions:read',
          },
        });
        return;
      }
      state.seen.push(request);
      answer(res, state.api.shift() ?? page([], null));
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(undefined)));
  const address = server.address();
  if (address === null || typeof address === 'string') {
    throw new Error('the stub has no port');
  }
  return {
    base: `http://127.0.0.1:${address.port}`,
    state,
    /** The bearer tokens of the API requests, in order. */
    tokens() {
      return state.seen.map((r) => String(r.headers.authorization ?? '').replace(/^Bearer /, ''));
    },
    /** The paths and queries of the API requests, in order. */
    paths() {
      return state.seen.map((r) => r.url);
    },
    /** Stops the server, cutting any connection still open (a hung answer). */
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(() => resolve(undefined)));
    },
  };
}

/**
 * @param {import('node:http').ServerResponse} res
 * @param {Answer} scripted
 */
function answer(res, scripted) {
  if (scripted.hang) {
    return;
  }
  if (scripted.raw) {
    scripted.raw(res);
    return;
  }
  const body =
    typeof scripted.body === 'string' || Buffer.isBuffer(scripted.body)
      ? scripted.body
      : JSON.stringify(scripted.body ?? {});
  res.statusCode = scripted.status ?? 200;
  res.setHeader('content-type', 'application/json');
  for (const [name, value] of Object.entries(scripted.headers ?? {})) {
    res.setHeader(name, value);
  }
  if (scripted.hangBody) {
    res.setHeader('content-length', String(Buffer.byteLength(body) + 10));
    res.write(body);
    return;
  }
  res.end(body);
}

/**
 * An error answer.
 * @param {number} status
 * @param {string} code
 * @param {Record<string, string>} [headers]
 * @returns {Answer}
 */
export function error(status, code, headers = {}) {
  return { status, headers, body: { error: code, error_description: `${code} on purpose` } };
}

/**
 * A transaction as the API shows it.
 * @param {number} id
 * @param {Record<string, unknown>} [changes]
 */
export function transaction(id, changes = {}) {
  return {
    object: 'transaction',
    id,
    merchant_id: 1,
    status: 'paid',
    raw_status: 'paid',
    amount_status: 'EXACT',
    asset: 'USDC',
    currency: 'EUR',
    amount: { gross: '10.00', net: null, expected: '10.00', psp_fee: null, gas_fee: null, bridge_fee: null },
    networks: { payment: null, settlement: null },
    tx_hashes: { source: null, bridge: null, settlement: null },
    customer_email: null,
    external_reference: `order-${id}`,
    created_at: '2026-11-21T04:35:27Z',
    paid_at: null,
    ...changes,
  };
}

/**
 * A merchant as the API shows it.
 * @param {number} id
 */
export function merchant(id) {
  return {
    object: 'merchant',
    id,
    name: `Shop ${id}`,
    legal_name: `Shop ${id} Ltd`,
    email: `shop${id}@example.com`,
    public_key: 'pk_test_0123456789abcdef',
    psp_reference_id: `m-${id}`,
    status: 'active',
    onboarding_status: 'completed',
    crypto_enabled: true,
    onboarding_complete: true,
    created_at: '2026-11-21T04:35:27Z',
  };
}

/**
 * A page of transactions (or of the given items).
 * @param {Array<number | object>} items ids of transactions, or items
 * @param {number | string | null} next
 * @param {Record<string, string>} [headers]
 * @returns {Answer}
 */
export function page(items, next, headers = {}) {
  return {
    headers,
    body: {
      object: 'list',
      data: items.map((item) => (typeof item === 'number' ? transaction(item) : item)),
      has_more: next !== null,
      next_cursor: next,
    },
  };
}

/**
 * Polls `check` until it holds or `ms` pass.
 * @param {() => boolean} check
 * @param {number} ms
 */
export async function until(check, ms) {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) {
      throw new Error(`not true within ${ms} ms`);
    }
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
