// The TypeScript and JavaScript client of the Payrail partner API.
//
// - `Payrail`: OAuth 2.0 client credentials with a token cache (refreshed before it expires, and
//   once more on a 401), typed lists that are both a promise of their first page and an async
//   iterator over every page, typed filters, retries with backoff and jitter on 429 (honouring
//   `Retry-After`) and 5xx, never on other 4xx, timeouts, an answer size cap, the
//   `Payrail-Bookmark` carried from answer to request, and errors that carry the API's.
// - `Webhook`: verify a delivery's signature over the raw body (several secrets during a
//   rotation, a replay window) and parse it into a typed `Event`.

export { Payrail } from './client.js';
export type { PayrailOptions } from './client.js';
export {
  PayrailApiError,
  PayrailConfigError,
  PayrailConnectionError,
  PayrailDecodeError,
  PayrailError,
  PayrailTimeoutError,
  WebhookVerificationError,
} from './errors.js';
export type { WebhookVerificationFailure } from './errors.js';
export { MAX_ANSWER_BYTES } from './http.js';
export type { Fetch } from './http.js';
export {
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
export type {
  Amount,
  AmountStatus,
  CheckoutOptions,
  CheckoutSession,
  Currency,
  ErrorBody,
  ErrorCode,
  Event,
  EventFilterType,
  EventType,
  KnownEvent,
  Merchant,
  MerchantStatus,
  Networks,
  OnboardingStatus,
  OtherEvent,
  Page,
  PaymentPaidEvent,
  PaymentRefundedEvent,
  PaymentSucceededEvent,
  RawStatus,
  SandboxAction,
  Scope,
  Status,
  Transaction,
  TxHashes,
  WebhookTestEvent,
} from './models.js';
export type { ListPromise } from './pagination.js';
export type { EventListParams, MerchantListParams, TimeBound, TransactionListParams } from './params.js';
export type { Checkout, Events, Merchants, Sandbox, Transactions } from './resources.js';
export { DEFAULT_RETRY } from './retry.js';
export type { RetryOptions, RetryPolicy } from './retry.js';
export { BOOKMARK_HEADER, REQUEST_ID_HEADER } from './schema.js';
export {
  DEFAULT_TOLERANCE_SECONDS,
  EVENT_ID_HEADER,
  EVENT_TYPE_HEADER,
  SIGNATURE_HEADER,
  verifyWebhook,
  Webhook,
} from './webhooks.js';
export type { HeaderSource, RawBody, WebhookOptions } from './webhooks.js';
export { VERSION } from './version.js';
