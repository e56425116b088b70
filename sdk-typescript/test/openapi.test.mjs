// @ts-check
// The library's description of the contract (src/schema.ts), which its TypeScript types are held
// to when it compiles, against edge-api/openapi.json: they must agree member for member, both
// ways. The second half shows the check failing for each kind of drift, on edited copies of the
// document.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

// The package's own description (src/schema.ts, built), by the package's private import name.
import * as library from '#internal/schema.js';
import { conformance, loadDocument } from './support/conformance.mjs';

const document = loadDocument();

describe('the library and edge-api/openapi.json', () => {
  test('agree on every model, operation and enum', () => {
    assert.deepEqual(conformance(document, library), []);
  });

  test('cover what a partner reads: the resources, the lists, the errors, the token and the sandbox', () => {
    assert.deepEqual(Object.keys(library.MODELS).sort(), [
      'Amount',
      'CheckoutOptions',
      'CheckoutSession',
      'Error',
      'Event',
      'EventList',
      'MerchantList',
      'Merchant',
      'Networks',
      'TokenResponse',
      'Transaction',
      'TransactionList',
      'TxHashes',
    ].sort());
    // Every partner operation of the document (the portal's are the admins', not the library's).
    const partner = Object.entries(document.paths)
      .filter(([path]) => !path.startsWith('/portal/') && path !== '/checkout/{id}/status')
      .flatMap(([path, item]) => Object.keys(/** @type {object} */ (item)).filter((m) => m !== 'parameters').map((m) => `${m} ${path}`))
      .sort();
    const called = Object.values(library.OPERATIONS).map((op) => `${op.method} ${op.path}`).sort();
    assert.deepEqual(called, partner);
  });
});

describe('the check fails when the two drift apart', () => {
  /**
   * The problems the check finds in a copy of the document changed by `edit`.
   * @param {(doc: any) => void} edit
   */
  function drift(edit) {
    const copy = structuredClone(document);
    edit(copy);
    return conformance(copy, library);
  }

  /** @type {Array<[string, (doc: any) => void, RegExp]>} */
  const cases = [
    ['a member added to the document', (d) => {
      d.components.schemas.Transaction.properties.fee_currency = { type: 'string' };
      d.components.schemas.Transaction.required.push('fee_currency');
    }, /^Transaction\.fee_currency: in the document, not in the library$/],
    ['a member gone from the document', (d) => {
      delete d.components.schemas.Merchant.properties.legal_name;
    }, /^Merchant\.legal_name: in the library, not in the document$/],
    ['a member no longer required', (d) => {
      d.components.schemas.Transaction.required = d.components.schemas.Transaction.required.filter((/** @type {string} */ m) => m !== 'paid_at');
    }, /^Transaction\.paid_at: optional in the document, required in the library$/],
    ['a member made nullable', (d) => {
      d.components.schemas.Merchant.properties.email = { type: ['string', 'null'] };
    }, /^Merchant\.email: nullable in the document, not nullable in the library$/],
    ['a nullable member made required', (d) => {
      d.components.schemas.Transaction.properties.currency = { type: 'string' };
    }, /^Transaction\.currency: not nullable in the document, nullable in the library$/],
    ['an amount turned into a number', (d) => {
      d.components.schemas.Amount.properties.gross = { type: ['number', 'null'] };
    }, /^Amount\.gross: number in the document, decimal in the library$/],
    ['a value added to a named enum', (d) => {
      d.components.schemas.Status.enum.push('disputed');
    }, /^Transaction\.status: the value "disputed" is in the document, not in the library$/],
    ['a value gone from an inline enum', (d) => {
      d.components.schemas.Merchant.properties.onboarding_status.enum.pop();
    }, /^Merchant\.onboarding_status: the value "rejected" is in the library, not in the document$/],
    ['an enum given to a plain string (assets)', (d) => {
      d.components.schemas.Transaction.properties.asset = { enum: ['USDC', 'USDT', null] };
    }, /^Transaction\.asset: enum in the document, string in the library$/],
    ['a new event type', (d) => {
      d.components.schemas.Event.properties.type.enum.push('payout.paid');
    }, /^Event\.type: the value "payout\.paid" is in the document, not in the library$/],
    ['a new error code', (d) => {
      d.components.schemas.Error.properties.error.enum.push('teapot');
    }, /^Error\.error: the value "teapot" is in the document, not in the library$/],
    ['a cursor of another type', (d) => {
      d.components.schemas.EventList.properties.next_cursor = { type: ['integer', 'null'] };
    }, /^EventList\.next_cursor: integer in the document, string in the library$/],
    ['a list of another model', (d) => {
      d.components.schemas.MerchantList.properties.data.items = { $ref: '#/components/schemas/Transaction' };
    }, /^MerchantList\.data: Transaction in the document, Merchant in the library$/],
    ['a filter added to the transactions list', (d) => {
      d.paths['/v1/transactions'].get.parameters.push({ name: 'currency', in: 'query', schema: { type: 'string' } });
    }, /^GET \/v1\/transactions query\.currency: in the document, not in the library$/],
    ['a filter gone from the merchants list', (d) => {
      const op = d.paths['/v1/merchants'].get;
      op.parameters = op.parameters.filter((/** @type {any} */ p) => p.name !== 'psp_reference_id');
    }, /^GET \/v1\/merchants query\.psp_reference_id: in the library, not in the document$/],
    ['a filter of another type', (d) => {
      const op = d.paths['/v1/events'].get;
      op.parameters.find((/** @type {any} */ p) => p.name === 'transaction_id').schema = { type: 'string' };
    }, /^GET \/v1\/events query\.transaction_id: string in the document, integer in the library$/],
    ['a value added to a filter enum', (d) => {
      const op = d.paths['/v1/events'].get;
      op.parameters.find((/** @type {any} */ p) => p.name === 'type').schema.enum.push('webhook.test');
    }, /^GET \/v1\/events query\.type: the value "webhook\.test" is in the document, not in the library$/],
    ['the bookmark header gone', (d) => {
      const op = d.paths['/v1/transactions'].get;
      op.parameters = op.parameters.filter((/** @type {any} */ p) => p.$ref !== '#/components/parameters/Bookmark');
    }, /^GET \/v1\/transactions: the header payrail-bookmark is in the library, not in the document$/],
    ['a sandbox action added', (d) => {
      d.paths['/sandbox/transactions/{id}/{action}'].post.parameters[1].schema.enum.push('dispute');
    }, /^POST \/sandbox\/transactions\/\{id\}\/\{action\} path\.action: the value "dispute" is in the document/],
    ['another scope', (d) => {
      d.paths['/v1/merchants'].get.security = [{ oauth2: ['transactions:read'] }];
    }, /^GET \/v1\/merchants: needs the token \(transactions:read\) in the document, merchants:read in the library$/],
    ['a new scope', (d) => {
      d.components.securitySchemes.oauth2.flows.clientCredentials.scopes['refunds:write'] = 'Refund';
    }, /^the OAuth scopes: the value "refunds:write" is in the document, not in the library$/],
    ['another answer', (d) => {
      d.paths['/v1/merchants/{id}'].get.responses['200'].content['application/json'].schema = { $ref: '#/components/schemas/PortalMerchant' };
    }, /^GET \/v1\/merchants\/\{id\}: answers PortalMerchant in the document, Merchant in the library$/],
    ['an operation gone', (d) => {
      delete d.paths['/v1/events'];
    }, /^GET \/v1\/events \(listEvents\): called by the library, not in the document$/],
    ['a checkout option added', (d) => {
      d.components.schemas.CheckoutOptions.properties.customerEmail = { type: 'string' };
    }, /^CheckoutOptions\.customerEmail: in the document, not in the library$/],
    ['a token answer member changed', (d) => {
      d.components.schemas.TokenResponse.properties.expires_in = { const: 7200 };
    }, /^TokenResponse\.expires_in: the constant 7200 in the document, 3600 in the library$/],
  ];

  for (const [what, edit, expected] of cases) {
    test(what, () => {
      const problems = drift(edit);
      assert.ok(
        problems.some((p) => expected.test(p)),
        `expected a problem matching ${expected}, got:\n${problems.join('\n') || '(none)'}`,
      );
    });
  }
});
