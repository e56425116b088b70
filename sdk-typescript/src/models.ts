// The resources as the API sends them (edge-api/openapi.json): members keep their wire names,
// amounts stay decimal strings (never a float) and times stay RFC 3339 strings, so nothing is
// lost or rounded on the way in. `schema.ts` describes the same shapes as data: a unit test holds
// that description to the OpenAPI document, and the compiler holds these types to it.

/** Normalized transaction status (the `status` filter takes these). */
export const STATUSES = ['pending', 'paid', 'failed', 'refunded', 'partially_refunded'] as const;
/** Normalized transaction status. `paid` covers funds held in custody (`raw_status` `succeeded`) and settled to the merchant (`paid`). */
export type Status = (typeof STATUSES)[number];

/** Internal transaction status, finer than `status`. */
export const RAW_STATUSES = [
  'pending',
  'succeeded',
  'paid',
  'failed',
  'expired',
  'refunded',
  'partially_refunded',
  'held',
] as const;
/**
 * Internal status: pending, held→pending; succeeded, paid→paid; failed, expired→failed; refunded;
 * partially_refunded. `held`: the payment reached custody from an address its sanctions screening
 * stopped, and waits for the institution's review (released: `succeeded`; blocked: `failed`).
 */
export type RawStatus = (typeof RAW_STATUSES)[number];

/** How the amount paid compares with the amount requested. */
export const AMOUNT_STATUSES = ['EXACT', 'UNDERPAID', 'OVERPAID'] as const;
/** How the amount paid compares with the amount requested (informational: compare `amount.gross` with your order). */
export type AmountStatus = (typeof AMOUNT_STATUSES)[number];

/** A merchant's account status. */
export const MERCHANT_STATUSES = ['active', 'suspended', 'disabled'] as const;
/** `active` may take payments (once onboarded, with crypto enabled); `suspended` is barred for now; `disabled` is closed for good. */
export type MerchantStatus = (typeof MERCHANT_STATUSES)[number];

/** A merchant's onboarding status. */
export const ONBOARDING_STATUSES = ['pending', 'in_review', 'completed', 'rejected'] as const;
/** A merchant's onboarding status; `onboarding_complete` is true exactly when it is `completed`. */
export type OnboardingStatus = (typeof ONBOARDING_STATUSES)[number];

/** Every event type this version of the library knows (webhooks and the events feed). */
export const EVENT_TYPES = ['payment.succeeded', 'payment.paid', 'payment.refunded', 'webhook.test'] as const;
/** An event type this version of the library knows. */
export type EventType = (typeof EVENT_TYPES)[number];

/** The types the events feed can be filtered by (`webhook.test` goes to one endpoint only, never to the feed). */
export const EVENT_FILTER_TYPES = ['payment.succeeded', 'payment.paid', 'payment.refunded'] as const;
/** A type the events feed can be filtered by. */
export type EventFilterType = (typeof EVENT_FILTER_TYPES)[number];

/** The API's error codes (the `error` member of an error body). */
export const ERROR_CODES = [
  'invalid_request',
  'invalid_client',
  'unsupported_grant_type',
  'unauthorized_client',
  'invalid_scope',
  'invalid_token',
  'insufficient_scope',
  'not_found',
  'merchant_unavailable',
  'method_not_allowed',
  'invalid_credentials',
  'login_required',
  'csrf_failed',
  'rate_limited',
  'conflict',
  'payload_too_large',
  'request_timeout',
  'payments_unavailable',
  'redirect_not_allowed',
  'admin_required',
  'server_error',
] as const;
/** An error code the API documents. */
export type ErrorCode = (typeof ERROR_CODES)[number];

/** The OAuth scopes a client can be granted. */
export const SCOPES = ['transactions:read', 'merchants:read', 'events:read', 'sandbox:write'] as const;
/** An OAuth scope. */
export type Scope = (typeof SCOPES)[number];

/** Order currencies a checkout takes. */
export const CURRENCIES = ['EUR', 'USD', 'GBP', 'CHF', 'JPY'] as const;
/** An order currency. */
export type Currency = (typeof CURRENCIES)[number];

/** The sandbox's lifecycle actions. */
export const SANDBOX_ACTIONS = ['pay', 'settle', 'refund', 'fail'] as const;
/** A sandbox lifecycle action. */
export type SandboxAction = (typeof SANDBOX_ACTIONS)[number];

/** Amounts of a transaction, decimal strings in the order's currency (`"12.50"`), `null` while unknown. */
export interface Amount {
  /** What the customer actually paid. Compare it with your order before fulfilling. */
  gross: string | null;
  /** What was credited to the merchant: gross − psp_fee − gas_fee − bridge_fee. */
  net: string | null;
  /** What was requested. */
  expected: string | null;
  /** The PSP's fee. */
  psp_fee: string | null;
  /** The network fee. */
  gas_fee: string | null;
  /** The bridge fee, when the settlement network differs from the payment's. */
  bridge_fee: string | null;
}

/** Networks of a transaction (`ethereum`, `polygon`, `base`, `arbitrum`, …). */
export interface Networks {
  /** The network the customer paid on. */
  payment: string | null;
  /** The network of the transfer to the merchant. */
  settlement: string | null;
}

/** Chain transaction hashes of a transaction. */
export interface TxHashes {
  /** The customer's payment. */
  source: string | null;
  /** The bridge transfer, when there was one. */
  bridge: string | null;
  /** The transfer to the merchant. */
  settlement: string | null;
}

/** A payment, as `GET /v1/transactions` and every event show it. */
export interface Transaction {
  object: 'transaction';
  /** The transaction id (ids grow: newest first is highest id first). */
  id: number;
  /** The merchant it belongs to. */
  merchant_id: number;
  /** Normalized status. */
  status: Status;
  /** Internal status. */
  raw_status: RawStatus;
  /** `EXACT`, `UNDERPAID` or `OVERPAID` once a payment landed; `null` before. */
  amount_status: AmountStatus | null;
  /** The crypto asset paid (`USDC`, `USDT`, `ETH`, …). */
  asset: string | null;
  /** The order's currency (`EUR`, …); every amount is in it. */
  currency: string | null;
  amount: Amount;
  networks: Networks;
  tx_hashes: TxHashes;
  customer_email: string | null;
  /** Your order id, as given to the checkout (`externalReference`). */
  external_reference: string | null;
  /** RFC 3339, UTC, whole seconds (`2026-11-21T04:35:27Z`). */
  created_at: string | null;
  /** When the payment was credited, RFC 3339. */
  paid_at: string | null;
}

/** A merchant of your institution. Every member is always present and never null. */
export interface Merchant {
  object: 'merchant';
  /** Payrail's merchant id. */
  id: number;
  name: string;
  legal_name: string;
  email: string;
  /** The publishable key (`pk_live_…`, `pk_test_…` in the sandbox) the browser script uses. */
  public_key: string;
  /** Your own reference for the merchant, set at onboarding. */
  psp_reference_id: string;
  status: MerchantStatus;
  onboarding_status: OnboardingStatus;
  crypto_enabled: boolean;
  /** True exactly when `onboarding_status` is `completed`. */
  onboarding_complete: boolean;
  /** RFC 3339, UTC. */
  created_at: string;
}

/** One page of a list, newest first. */
export interface Page<T, C = number> {
  object: 'list';
  data: T[];
  /** Whether a further page exists. */
  has_more: boolean;
  /** Pass as `startingAfter` for the next page; `null` exactly when `has_more` is false. */
  next_cursor: C | null;
}

/** The fields every event has. */
interface EventFields<T, D> {
  /** `evt_…`: deduplicate on it (deliveries can repeat). */
  id: string;
  /** The event type: narrow on it with `switch` or `===`. */
  type: T;
  /** Unix seconds the event was created. */
  created: number;
  /** The transaction exactly as it stood when the event was created. */
  data: D;
}

/** `payment.succeeded`: the customer's payment landed in the custodial wallet (`data.status` `paid`, `raw_status` `succeeded`). */
export interface PaymentSucceededEvent extends EventFields<'payment.succeeded', Transaction> {}

/**
 * `payment.paid`: the funds were settled to the merchant. Fulfil only after finding your order by
 * `data.merchant_id` and `data.external_reference` and checking that `data.amount.gross` is at
 * least its amount: never on the type alone.
 */
export interface PaymentPaidEvent extends EventFields<'payment.paid', Transaction> {}

/** `payment.refunded`: refunded in full (`data.status` `refunded`) or in part (`partially_refunded`). */
export interface PaymentRefundedEvent extends EventFields<'payment.refunded', Transaction> {}

/** `webhook.test`: an admin sent a test event from the portal; `data` is a sample transaction. */
export interface WebhookTestEvent extends EventFields<'webhook.test', Transaction> {}

/**
 * An event of a type newer than this library: keep it (store it, acknowledge it). Its `type` is
 * `'other'`, so that a `switch (event.type)` over the known types narrows `data` to the
 * transaction; the type Payrail sent is `otherType`, and `data` is passed on untouched.
 */
export interface OtherEvent {
  /** `evt_…`: deduplicate on it. */
  id: string;
  /** Always `'other'`. */
  type: 'other';
  /** The `type` Payrail sent (e.g. `payout.paid`). */
  otherType: string;
  /** Unix seconds the event was created. */
  created: number;
  /** The `data` Payrail sent, untouched. */
  data: unknown;
}

/** An event the library knows the shape of. */
export type KnownEvent = PaymentSucceededEvent | PaymentPaidEvent | PaymentRefundedEvent | WebhookTestEvent;

/**
 * An event, as a webhook delivers it and as the events feed lists it: the JSON Payrail sent for
 * the types this library knows, an `OtherEvent` for newer ones. Narrow on `type`.
 */
export type Event = KnownEvent | OtherEvent;

/** A checkout session: the hosted page a customer pays on, and the pending transaction it made. */
export interface CheckoutSession {
  /** `cs_…`. */
  id: string;
  /** The transaction it created (status `pending`). */
  transaction_id: number;
  /** The hosted checkout page. */
  url: string;
}

/** What `checkout.create` sends: the browser script's options (`POST /checkout/sessions`). */
export interface CheckoutOptions {
  /** The merchant's publishable key (`pk_live_…`, `pk_test_…`). */
  publicKey: string;
  /** Order amount in major units: a decimal string (`"149.90"`, preferred) or a number. */
  amount: string | number;
  currency: Currency;
  /** What the order is (1–200 characters). */
  title: string;
  /** Your order id (1–255 characters); it comes back as `external_reference`. */
  externalReference: string;
  /** A retry with the same key and options returns the same session instead of a second payment. */
  idempotencyKey?: string | null | undefined;
  /** Where the customer returns after paying: https (http only for localhost), on one of the merchant's allowed return origins. */
  redirectUrl: string;
  /** Open the hosted page in a new tab (the browser script's option; no effect here). */
  openInNewTab?: boolean | undefined;
  /** Must be true (crypto is the only way to pay); the library sends true when left out. */
  allowCrypto?: true | undefined;
  /** The hosted page's language: `auto` (default), `en`, `de`, `fr`, `es`, or a tag such as `fr-CA`. */
  locale?: string | undefined;
}

/** The error body of every failed request. */
export interface ErrorBody {
  error: ErrorCode;
  error_description: string | null;
}

/** The token endpoint's answer. */
export interface TokenResponse {
  access_token: string;
  token_type: 'Bearer';
  /** Seconds (3600). */
  expires_in: 3600;
  /** The granted scopes, space-separated. */
  scope: string;
}
