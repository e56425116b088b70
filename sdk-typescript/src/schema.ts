// The contract as data: every model and operation the library speaks, described field by field.
// Three things rest on it. A unit test holds it to edge-api/openapi.json (names, required-ness,
// nullability, types and enum values, both ways), so the document and the library cannot drift
// apart unnoticed. The type checks at the end of this file hold the TypeScript types of
// `models.ts` and `params.ts` to it, so the types cannot drift from the description. And answers
// are checked against it at run time (check.ts).

import {
  AMOUNT_STATUSES,
  CURRENCIES,
  ERROR_CODES,
  EVENT_FILTER_TYPES,
  EVENT_TYPES,
  MERCHANT_STATUSES,
  ONBOARDING_STATUSES,
  RAW_STATUSES,
  SANDBOX_ACTIONS,
  SCOPES,
  STATUSES,
} from './models.js';
import type {
  Amount,
  CheckoutOptions,
  CheckoutSession,
  ErrorBody,
  Event,
  EventType,
  Merchant,
  Networks,
  Page,
  TokenResponse,
  Transaction,
  TxHashes,
} from './models.js';
import type { EventListParams, MerchantListParams, TransactionListParams } from './params.js';

/** How one member or parameter is described. */
export interface FieldSpec {
  /**
   * `string`; `integer`; `boolean`; `decimal` (a string, the document's `Decimal`); `timestamp`
   * (a string, `Timestamp`); `timebound` (a query bound, `TimeBound`); `const`; `enum`;
   * `model` (another model); `list` (an array of a model); `number_or_string`.
   */
  readonly kind:
    | 'string'
    | 'integer'
    | 'boolean'
    | 'decimal'
    | 'timestamp'
    | 'timebound'
    | 'const'
    | 'enum'
    | 'model'
    | 'list'
    | 'number_or_string';
  /** `null` is a value (the member is still always present). */
  readonly nullable?: boolean;
  /** The member may be left out (request bodies only). */
  readonly optional?: boolean;
  /** For `const`. */
  readonly value?: string | number | boolean;
  /** For `enum`: every value. */
  readonly values?: readonly string[];
  /** For `enum`: the document's named schema, when the enum is one. */
  readonly ref?: string;
  /** For `model` and `list`. */
  readonly model?: string;
}

/** A model: its members. */
export interface ModelSpec {
  readonly fields: { readonly [name: string]: FieldSpec };
}

/** Every model the library reads or sends, by its name in the document's `components.schemas`. */
export const MODELS = {
  Amount: {
    fields: {
      gross: { kind: 'decimal', nullable: true },
      net: { kind: 'decimal', nullable: true },
      expected: { kind: 'decimal', nullable: true },
      psp_fee: { kind: 'decimal', nullable: true },
      gas_fee: { kind: 'decimal', nullable: true },
      bridge_fee: { kind: 'decimal', nullable: true },
    },
  },
  Networks: {
    fields: {
      payment: { kind: 'string', nullable: true },
      settlement: { kind: 'string', nullable: true },
    },
  },
  TxHashes: {
    fields: {
      source: { kind: 'string', nullable: true },
      bridge: { kind: 'string', nullable: true },
      settlement: { kind: 'string', nullable: true },
    },
  },
  Transaction: {
    fields: {
      object: { kind: 'const', value: 'transaction' },
      id: { kind: 'integer' },
      merchant_id: { kind: 'integer' },
      status: { kind: 'enum', ref: 'Status', values: STATUSES },
      raw_status: { kind: 'enum', ref: 'RawStatus', values: RAW_STATUSES },
      amount_status: { kind: 'enum', ref: 'AmountStatus', values: AMOUNT_STATUSES, nullable: true },
      asset: { kind: 'string', nullable: true },
      currency: { kind: 'string', nullable: true },
      amount: { kind: 'model', model: 'Amount' },
      networks: { kind: 'model', model: 'Networks' },
      tx_hashes: { kind: 'model', model: 'TxHashes' },
      customer_email: { kind: 'string', nullable: true },
      external_reference: { kind: 'string', nullable: true },
      created_at: { kind: 'timestamp', nullable: true },
      paid_at: { kind: 'timestamp', nullable: true },
    },
  },
  Merchant: {
    fields: {
      object: { kind: 'const', value: 'merchant' },
      id: { kind: 'integer' },
      name: { kind: 'string' },
      legal_name: { kind: 'string' },
      email: { kind: 'string' },
      public_key: { kind: 'string' },
      psp_reference_id: { kind: 'string' },
      status: { kind: 'enum', values: MERCHANT_STATUSES },
      onboarding_status: { kind: 'enum', values: ONBOARDING_STATUSES },
      crypto_enabled: { kind: 'boolean' },
      onboarding_complete: { kind: 'boolean' },
      created_at: { kind: 'timestamp' },
    },
  },
  Event: {
    fields: {
      id: { kind: 'string' },
      type: { kind: 'enum', values: EVENT_TYPES },
      created: { kind: 'integer' },
      data: { kind: 'model', model: 'Transaction' },
    },
  },
  TransactionList: {
    fields: {
      object: { kind: 'const', value: 'list' },
      data: { kind: 'list', model: 'Transaction' },
      has_more: { kind: 'boolean' },
      next_cursor: { kind: 'integer', nullable: true },
    },
  },
  MerchantList: {
    fields: {
      object: { kind: 'const', value: 'list' },
      data: { kind: 'list', model: 'Merchant' },
      has_more: { kind: 'boolean' },
      next_cursor: { kind: 'integer', nullable: true },
    },
  },
  EventList: {
    fields: {
      object: { kind: 'const', value: 'list' },
      data: { kind: 'list', model: 'Event' },
      has_more: { kind: 'boolean' },
      next_cursor: { kind: 'string', nullable: true },
    },
  },
  Error: {
    fields: {
      error: { kind: 'enum', values: ERROR_CODES },
      error_description: { kind: 'string', nullable: true },
    },
  },
  TokenResponse: {
    fields: {
      access_token: { kind: 'string' },
      token_type: { kind: 'const', value: 'Bearer' },
      expires_in: { kind: 'const', value: 3600 },
      scope: { kind: 'string' },
    },
  },
  CheckoutSession: {
    fields: {
      id: { kind: 'string' },
      transaction_id: { kind: 'integer' },
      url: { kind: 'string' },
    },
  },
  CheckoutOptions: {
    fields: {
      publicKey: { kind: 'string' },
      amount: { kind: 'number_or_string' },
      currency: { kind: 'enum', values: CURRENCIES },
      title: { kind: 'string' },
      externalReference: { kind: 'string' },
      idempotencyKey: { kind: 'string', nullable: true, optional: true },
      redirectUrl: { kind: 'string' },
      openInNewTab: { kind: 'boolean', optional: true },
      allowCrypto: { kind: 'const', value: true },
      locale: { kind: 'string', optional: true },
    },
  },
} as const satisfies { readonly [name: string]: ModelSpec };

/** A model's name. */
export type ModelName = keyof typeof MODELS;

/** A query parameter: its name on the wire is the key; `option` is its name in the params object. */
export interface ParamSpec extends FieldSpec {
  readonly option: string;
}

/** An operation the library calls. */
export interface OperationSpec {
  readonly method: 'get' | 'post';
  readonly path: string;
  /** The scope it needs (none: public, or the token endpoint). */
  readonly scope?: string;
  /** The model of its success answer. */
  readonly response: ModelName;
  /** Its query parameters. */
  readonly query?: { readonly [name: string]: ParamSpec };
  /** Its request headers. */
  readonly headers?: readonly string[];
  /** The model of its JSON body. */
  readonly body?: ModelName;
  /** The members of its inline JSON body, all optional. */
  readonly bodyFields?: { readonly [name: string]: FieldSpec };
  /** Its form fields (the token endpoint). */
  readonly form?: { readonly [name: string]: FieldSpec };
  /** Its path parameters, and the values of those that are enums. */
  readonly pathParams?: { readonly [name: string]: FieldSpec };
}

/** The header a list's answer carries its bookmark in, sent back to read at least as new. */
export const BOOKMARK_HEADER = 'Payrail-Bookmark';
/** The answer header naming the request, for support. */
export const REQUEST_ID_HEADER = 'Payrail-Request-Id';

/** Every operation the library calls, by a name of ours. */
export const OPERATIONS = {
  issueToken: {
    method: 'post',
    path: '/oauth/token',
    response: 'TokenResponse',
    form: {
      grant_type: { kind: 'const', value: 'client_credentials' },
      client_id: { kind: 'string', optional: true },
      client_secret: { kind: 'string', optional: true },
      scope: { kind: 'string', optional: true },
    },
  },
  listTransactions: {
    method: 'get',
    path: '/v1/transactions',
    scope: 'transactions:read',
    response: 'TransactionList',
    headers: [BOOKMARK_HEADER],
    query: {
      limit: { option: 'limit', kind: 'integer' },
      starting_after: { option: 'startingAfter', kind: 'integer' },
      status: { option: 'status', kind: 'enum', ref: 'Status', values: STATUSES },
      merchant_id: { option: 'merchantId', kind: 'integer' },
      external_reference: { option: 'externalReference', kind: 'string' },
      id: { option: 'id', kind: 'integer' },
      created_after: { option: 'createdAfter', kind: 'timebound' },
      created_before: { option: 'createdBefore', kind: 'timebound' },
    },
  },
  listMerchants: {
    method: 'get',
    path: '/v1/merchants',
    scope: 'merchants:read',
    response: 'MerchantList',
    headers: [BOOKMARK_HEADER],
    query: {
      limit: { option: 'limit', kind: 'integer' },
      starting_after: { option: 'startingAfter', kind: 'integer' },
      id: { option: 'id', kind: 'integer' },
      psp_reference_id: { option: 'pspReferenceId', kind: 'string' },
    },
  },
  retrieveMerchant: {
    method: 'get',
    path: '/v1/merchants/{id}',
    scope: 'merchants:read',
    response: 'Merchant',
    headers: [BOOKMARK_HEADER],
    pathParams: { id: { kind: 'string' } },
  },
  listEvents: {
    method: 'get',
    path: '/v1/events',
    scope: 'events:read',
    response: 'EventList',
    headers: [BOOKMARK_HEADER],
    query: {
      limit: { option: 'limit', kind: 'integer' },
      starting_after: { option: 'startingAfter', kind: 'string' },
      type: { option: 'type', kind: 'enum', values: EVENT_FILTER_TYPES },
      transaction_id: { option: 'transactionId', kind: 'integer' },
      created_after: { option: 'createdAfter', kind: 'timebound' },
      created_before: { option: 'createdBefore', kind: 'timebound' },
    },
  },
  retrieveEvent: {
    method: 'get',
    path: '/v1/events/{id}',
    scope: 'events:read',
    response: 'Event',
    headers: [BOOKMARK_HEADER],
    pathParams: { id: { kind: 'string' } },
  },
  createCheckoutSession: {
    method: 'post',
    path: '/checkout/sessions',
    response: 'CheckoutSession',
    body: 'CheckoutOptions',
  },
  sandboxAction: {
    method: 'post',
    path: '/sandbox/transactions/{id}/{action}',
    scope: 'sandbox:write',
    response: 'Transaction',
    pathParams: {
      id: { kind: 'string' },
      action: { kind: 'enum', values: SANDBOX_ACTIONS },
    },
    bodyFields: {
      amount: { kind: 'decimal', optional: true },
      network: { kind: 'string', optional: true },
    },
  },
} as const satisfies { readonly [name: string]: OperationSpec };

/** Enums that no model above carries, with where the document keeps them. */
export const OTHER_ENUMS = {
  /** `components.securitySchemes.oauth2.flows.clientCredentials.scopes`' names. */
  scopes: SCOPES,
} as const;

// ---------------------------------------------------------------------------------------------
// Holding the TypeScript types to the description. Each line fails to compile when a type and
// its description differ in a member's name, type or nullability.

type Models = typeof MODELS;

interface ModelTypes {
  Amount: Amount;
  Networks: Networks;
  TxHashes: TxHashes;
  Transaction: Transaction;
  Merchant: Merchant;
  Event: Event;
  TransactionList: Page<Transaction, number>;
  MerchantList: Page<Merchant, number>;
  EventList: Page<Event, string>;
  Error: ErrorBody;
  TokenResponse: TokenResponse;
  CheckoutSession: CheckoutSession;
  // The wire requires allowCrypto; `checkout.create` sends true when the caller leaves it out.
  CheckoutOptions: CheckoutOptions & { allowCrypto: true };
}

type ValueOf<F> = F extends { kind: 'const'; value: infer V }
  ? V
  : F extends { kind: 'enum'; values: readonly (infer E)[] }
    ? E
    : F extends { kind: 'model'; model: infer M extends keyof ModelTypes }
      ? ModelTypes[M]
      : F extends { kind: 'list'; model: infer M extends keyof ModelTypes }
        ? ModelTypes[M][]
        : F extends { kind: 'integer' }
          ? number
          : F extends { kind: 'boolean' }
            ? boolean
            : F extends { kind: 'number_or_string' }
              ? number | string
              : F extends { kind: 'timebound' }
                ? Date | string
                : string;

type TypeOf<F> = F extends { nullable: true } ? ValueOf<F> | null : ValueOf<F>;

/** The type a description stands for: optional members optional, nullable ones `| null`. */
type Described<Fs> = {
  [K in keyof Fs as Fs[K] extends { optional: true } ? never : K]: TypeOf<Fs[K]>;
} & {
  [K in keyof Fs as Fs[K] extends { optional: true } ? K : never]?: TypeOf<Fs[K]> | undefined;
};

/** The params object a query description stands for, keyed by `option`. */
type DescribedParams<Q> = {
  [K in keyof Q as Q[K] extends { option: infer O extends string } ? O : never]?: ValueOf<Q[K]> | undefined;
};

type OptionalKeys<T> = { [K in keyof T]-?: object extends Pick<T, K> ? K : never }[keyof T];

type Same<A, B> = [A] extends [B]
  ? [B] extends [A]
    ? [keyof A] extends [keyof B]
      ? [keyof B] extends [keyof A]
        ? [OptionalKeys<A>] extends [OptionalKeys<B>]
          ? [OptionalKeys<B>] extends [OptionalKeys<A>]
            ? true
            : false
          : false
        : false
      : false
    : false
  : false;

type Holds<N extends keyof Models & keyof ModelTypes> = Same<ModelTypes[N], Described<Models[N]['fields']>>;

type Assert<T extends true> = T;

/**
 * Compile-time checks only (never used at run time).
 * @internal
 */
export type TypesMatchTheDescription = [
  Assert<Holds<'Amount'>>,
  Assert<Holds<'Networks'>>,
  Assert<Holds<'TxHashes'>>,
  Assert<Holds<'Transaction'>>,
  Assert<Holds<'Merchant'>>,
  Assert<Holds<'TransactionList'>>,
  Assert<Holds<'MerchantList'>>,
  Assert<Holds<'EventList'>>,
  Assert<Holds<'Error'>>,
  Assert<Holds<'TokenResponse'>>,
  Assert<Holds<'CheckoutSession'>>,
  Assert<Holds<'CheckoutOptions'>>,
  // The known events share one envelope; `OtherEvent` is the library's own catch-all.
  Assert<
    Same<
      { id: string; type: EventType; created: number; data: Transaction },
      Described<Models['Event']['fields']>
    >
  >,
  Assert<Same<TransactionListParams, DescribedParams<(typeof OPERATIONS)['listTransactions']['query']>>>,
  Assert<Same<MerchantListParams, DescribedParams<(typeof OPERATIONS)['listMerchants']['query']>>>,
  Assert<Same<EventListParams, DescribedParams<(typeof OPERATIONS)['listEvents']['query']>>>,
];
