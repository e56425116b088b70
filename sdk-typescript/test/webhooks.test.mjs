// @ts-check
// Webhook verification: the shared vectors through both entries of the package (ESM `import`
// and CommonJS `require`), typed events, the ways a receiver hands over headers and bodies, and
// secrets kept out of sight.

import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { inspect } from 'node:util';
import { describe, test } from 'node:test';

import { PayrailConfigError, verifyWebhook, Webhook, WebhookVerificationError } from 'payrail';

import { checkVectors, loadVectors } from './support/vectors.mjs';

const require = createRequire(import.meta.url);
/** @type {typeof import('payrail')} */
const cjs = require('payrail');

const SECRET = 'whsec_c2VjcmV0';
const NOW = 1795000000;

/**
 * A delivery body of `type`.
 * @param {string} type
 * @param {unknown} [data]
 */
function body(type, data) {
  return JSON.stringify({
    id: 'evt_7',
    type,
    created: NOW,
    data: data ?? {
      object: 'transaction',
      id: 7,
      merchant_id: 1,
      status: 'paid',
      raw_status: 'paid',
      amount_status: 'EXACT',
      asset: 'USDC',
      currency: 'EUR',
      amount: { gross: '40.00', net: '39.60', expected: '40.00', psp_fee: '0.40', gas_fee: '0.00', bridge_fee: null },
      networks: { payment: 'polygon', settlement: 'polygon' },
      tx_hashes: { source: '0x1', bridge: null, settlement: '0x2' },
      customer_email: null,
      external_reference: 'order-7',
      created_at: '2026-11-21T04:35:27Z',
      paid_at: '2026-11-21T04:36:00Z',
    },
  });
}

/**
 * The reason `promise` was refused for.
 * @param {Promise<unknown>} promise
 */
async function reason(promise) {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof WebhookVerificationError, String(error));
    return error.reason;
  }
  return 'accepted';
}

describe('the shared signature vectors', () => {
  const vectors = loadVectors();

  test('every vector gives its pinned answer through the ESM entry', async () => {
    const { problems, accepted } = await checkVectors({ Webhook, WebhookVerificationError }, vectors);
    assert.deepEqual(problems, []);
    assert.ok(vectors.sign.length >= 5 && vectors.verify.length >= 20, 'the whole file was read');
    assert.ok(accepted > 0 && accepted < vectors.verify.length);
  });

  test('and through the CommonJS entry', async () => {
    assert.notEqual(cjs.Webhook, Webhook, 'a separate build');
    const { problems } = await checkVectors(cjs, vectors);
    assert.deepEqual(problems, []);
  });

  test('the check fails when the library disagrees with a vector', async () => {
    // A vector whose pinned answer is flipped, and one whose signature is changed: the check
    // must report both, or it could not catch a broken verifier.
    const [first] = vectors.verify;
    const [pinned] = vectors.sign;
    assert.ok(first && pinned);
    const broken = {
      sign: [{ ...pinned, signature: pinned.signature.replace(/^./, (c) => (c === '0' ? '1' : '0')) }],
      verify: [{ ...first, result: 'no_matching_signature' }],
    };
    const { problems } = await checkVectors({ Webhook, WebhookVerificationError }, broken);
    assert.equal(problems.length, 2, problems.join('\n'));
  });
});

describe('Webhook', () => {
  test('every known type parses into its typed event; newer types are kept', async () => {
    const webhook = new Webhook(SECRET);
    for (const type of ['payment.succeeded', 'payment.paid', 'payment.refunded', 'webhook.test']) {
      const raw = body(type);
      const header = await Webhook.signatureHeader(SECRET, NOW, raw);
      const event = await webhook.verify(Buffer.from(raw), header, NOW);
      assert.equal(event.type, type);
      assert.deepEqual(event, JSON.parse(raw), 'exactly the JSON sent');
      if (event.type === 'payment.paid') {
        // Narrowed to the transaction by the type.
        assert.equal(event.data.amount.gross, '40.00');
      }
    }
    const newer = body('payout.created', { payout: 1 });
    const event = await webhook.verify(newer, await Webhook.signatureHeader(SECRET, NOW, newer), NOW);
    assert.deepEqual(event, { id: 'evt_7', type: 'other', otherType: 'payout.created', created: NOW, data: { payout: 1 } });
  });

  test('a body that verifies but is no event is refused as invalid_payload', async () => {
    const webhook = new Webhook(SECRET);
    for (const raw of ['not json', body('payment.paid', { x: 1 }), '{"id":"evt_1","type":"payment.paid"}', '[1]', '\u00ff']) {
      const header = await Webhook.signatureHeader(SECRET, NOW, raw);
      assert.equal(await reason(webhook.verify(raw, header, NOW)), 'invalid_payload', raw);
    }
    // Bytes that are not UTF-8.
    const bytes = new Uint8Array([0x7b, 0xff, 0x7d]);
    assert.equal(await reason(webhook.verify(bytes, await Webhook.signatureHeader(SECRET, NOW, bytes), NOW)), 'invalid_payload');
  });

  test('forgeries, tampered bodies and stale deliveries are refused', async () => {
    const webhook = new Webhook(SECRET);
    const raw = body('payment.paid');
    const header = await Webhook.signatureHeader(SECRET, NOW, raw);
    assert.equal(await reason(webhook.verify(raw, header, NOW + 300)), 'accepted');
    assert.equal(await reason(webhook.verify(raw, header, NOW + 301)), 'timestamp_out_of_tolerance');
    assert.equal(await reason(webhook.verify(raw, header, new Date((NOW - 301) * 1000))), 'timestamp_out_of_tolerance');
    assert.equal(await reason(webhook.verify(`${raw} `, header, NOW)), 'no_matching_signature');
    assert.equal(await reason(webhook.verify(raw, await Webhook.signatureHeader('whsec_other', NOW, raw), NOW)), 'no_matching_signature');
    assert.equal(await reason(webhook.verify(raw, undefined, NOW)), 'malformed_header');
    assert.equal(await reason(webhook.verify(raw, null, NOW)), 'malformed_header');
    assert.equal(await reason(webhook.verify(raw, `${header},`, NOW)), 'malformed_header');
    // The signer reads `t` as a number: `t=+1795000000` and `t=01795000000` name the same second.
    const v1 = header.split(',v1=')[1];
    assert.equal(await reason(webhook.verify(raw, `t=+${NOW},v1=${v1}`, NOW)), 'accepted');
    assert.equal(await reason(webhook.verify(raw, `t=0${NOW},v1=${v1}`, NOW)), 'accepted');
    assert.equal(await reason(webhook.verify(raw, `t=99999999999999999999,v1=${v1}`, NOW)), 'malformed_header');
    assert.equal(await reason(webhook.verify(raw, `t=${NOW}\u0085,v1=${v1}`, NOW)), 'accepted', 'trimmed as the signer trims');
    assert.equal(await reason(webhook.verify(raw, `t=${NOW}\ufeff,v1=${v1}`, NOW)), 'malformed_header', 'not trimmed by the signer');
  });

  test('without a clock given, now is the system clock', async () => {
    const raw = body('payment.paid');
    const now = Math.floor(Date.now() / 1000);
    assert.equal(await reason(new Webhook(SECRET).verify(raw, await Webhook.signatureHeader(SECRET, now, raw))), 'accepted');
    assert.equal(
      await reason(new Webhook(SECRET).verify(raw, await Webhook.signatureHeader(SECRET, now - 3600, raw))),
      'timestamp_out_of_tolerance',
    );
  });

  test('several secrets during a rotation; the tolerance can be set', async () => {
    const raw = body('payment.paid');
    const header = await Webhook.signatureHeader(['whsec_new'], NOW, raw);
    assert.equal(await reason(new Webhook(['whsec_old', 'whsec_new']).verify(raw, header, NOW)), 'accepted');
    assert.equal(await reason(new Webhook('whsec_old').verify(raw, header, NOW)), 'no_matching_signature');
    assert.equal(await reason(new Webhook('whsec_new', { toleranceSeconds: 10 }).verify(raw, header, NOW + 11)), 'timestamp_out_of_tolerance');
    assert.equal(await reason(verifyWebhook('whsec_new', raw, header, { now: NOW })), 'accepted');
    assert.equal(await reason(verifyWebhook('whsec_new', raw, header, { now: NOW + 20, toleranceSeconds: 10 })), 'timestamp_out_of_tolerance');
  });

  test('verifyRequest reads the header from Fetch Headers or Node headers, in any case', async () => {
    const webhook = new Webhook(SECRET);
    const raw = body('payment.paid');
    const header = await Webhook.signatureHeader(SECRET, NOW, raw);
    const bytes = new TextEncoder().encode(raw);
    assert.equal(await reason(webhook.verifyRequest(new Headers({ 'Payrail-Signature': header }), bytes, NOW)), 'accepted');
    assert.equal(await reason(webhook.verifyRequest({ 'payrail-signature': header, 'content-type': 'application/json' }, Buffer.from(raw), NOW)), 'accepted');
    assert.equal(await reason(webhook.verifyRequest({ 'PAYRAIL-SIGNATURE': header }, bytes.buffer, NOW)), 'accepted');
    assert.equal(await reason(webhook.verifyRequest({ 'payrail-signature': [header] }, raw, NOW)), 'accepted');
    assert.equal(await reason(webhook.verifyRequest({}, raw, NOW)), 'malformed_header');
    assert.equal(await reason(webhook.verifyRequest({ 'payrail-signature': [header, header] }, raw, NOW)), 'malformed_header');
    assert.equal(await reason(webhook.verifyRequest(new Headers(), raw, NOW)), 'malformed_header');
  });

  test('a parsed body is refused with a message that says what to do', async () => {
    const webhook = new Webhook(SECRET);
    const parsed = JSON.parse(body('payment.paid'));
    await assert.rejects(webhook.verify(parsed, 't=1,v1=00', NOW), (error) => {
      assert.ok(error instanceof TypeError);
      assert.match(error.message, /raw request body is needed.*express\.raw/);
      return true;
    });
    await assert.rejects(webhook.verifyRequest({ 'payrail-signature': 't=1,v1=00' }, /** @type {any} */ (undefined), NOW), TypeError);
  });

  test('a webhook needs a secret; its string forms show none', () => {
    assert.throws(() => new Webhook([]), PayrailConfigError);
    assert.throws(() => new Webhook(''), PayrailConfigError);
    assert.throws(() => new Webhook(SECRET, { toleranceSeconds: -1 }), PayrailConfigError);
    const webhook = new Webhook([SECRET, 'whsec_second']);
    for (const shown of [inspect(webhook, { showHidden: true }), String(webhook), JSON.stringify(webhook)]) {
      assert.ok(!shown.includes('whsec_'), shown);
      assert.match(shown, /2/);
    }
  });
});
