// Typed filters of the list operations, and how they become a query string. Each filter maps to
// one query parameter the contract documents (`OPERATIONS` in schema.ts); the server validates the
// values and answers 400 `invalid_request` naming a bad one. A filter the library does not know is
// refused here, before any request: the API would refuse it too, and silently dropping it would
// widen the list (a misspelt `merchantID` returning every merchant's transactions).

import type { EventFilterType, Status } from './models.js';
import type { ParamSpec } from './schema.js';

/**
 * A time bound: a `Date`, or text as the API takes it: an RFC 3339 date-time with an offset
 * (`2026-11-21T04:35:27Z`, `2026-11-21T05:35:27+01:00`) or a date (`2026-11-21`, midnight UTC).
 */
export type TimeBound = Date | string;

/** Filters of `GET /v1/transactions`, combined with AND. */
export interface TransactionListParams {
  /** Page size, 1 to 100 (the API's default is 25). Lists fetch pages of this size. */
  limit?: number | undefined;
  /** Start after this transaction id (a page's `next_cursor`): only lower ids. */
  startingAfter?: number | undefined;
  /** One normalized status. */
  status?: Status | undefined;
  /** One merchant's transactions. */
  merchantId?: number | undefined;
  /** The transactions of one order: exact match on your `externalReference`. */
  externalReference?: string | undefined;
  /** One transaction: a list of zero or one. */
  id?: number | undefined;
  /** Created at or after this time (inclusive). */
  createdAfter?: TimeBound | undefined;
  /** Created before this time (exclusive). */
  createdBefore?: TimeBound | undefined;
}

/** Filters of `GET /v1/merchants`. */
export interface MerchantListParams {
  /** Page size, 1 to 100 (default 25). */
  limit?: number | undefined;
  /** Start after this merchant id (a page's `next_cursor`). */
  startingAfter?: number | undefined;
  /** One merchant id: a list of zero or one. */
  id?: number | undefined;
  /** The merchant with your own reference, set at onboarding. */
  pspReferenceId?: string | undefined;
}

/** Filters of `GET /v1/events` (the events feed), combined with AND. */
export interface EventListParams {
  /** Page size, 1 to 100 (default 25). */
  limit?: number | undefined;
  /** Start after this event (`evt_…`, a page's `next_cursor`): only older events. */
  startingAfter?: string | undefined;
  /** One event type. */
  type?: EventFilterType | undefined;
  /** One transaction's events. */
  transactionId?: number | undefined;
  /** Created at or after this time (inclusive). */
  createdAfter?: TimeBound | undefined;
  /** Created before this time (exclusive). */
  createdBefore?: TimeBound | undefined;
}

/**
 * The query string of `params` for an operation whose parameters `query` describes, in the order
 * the caller gave them. `undefined` and `null` values are left out.
 */
export function toQuery(
  params: object | undefined,
  query: { readonly [name: string]: ParamSpec },
  path: string,
): URLSearchParams {
  const search = new URLSearchParams();
  if (params === undefined || params === null) {
    return search;
  }
  if (typeof params !== 'object') {
    throw new TypeError(`the filters of ${path} must be an object`);
  }
  const byOption = new Map(Object.entries(query).map(([name, spec]) => [spec.option, { name, spec }]));
  for (const [option, value] of Object.entries(params)) {
    const param = byOption.get(option);
    if (param === undefined) {
      const known = [...byOption.keys()].join(', ');
      throw new TypeError(`${path} has no filter "${option}" (it takes ${known})`);
    }
    if (value === undefined || value === null) {
      continue;
    }
    search.set(param.name, format(value, param.spec, option));
  }
  return search;
}

function format(value: unknown, spec: ParamSpec, option: string): string {
  if (spec.kind === 'timebound' && value instanceof Date) {
    return formatTime(value, option);
  }
  switch (typeof value) {
    case 'string':
      return value;
    case 'number':
      if (!Number.isFinite(value)) {
        throw new RangeError(`${option} must be a finite number, not ${value}`);
      }
      return String(value);
    case 'bigint':
      return value.toString();
    default:
      throw new TypeError(`${option} must be ${spec.kind === 'timebound' ? 'a Date or a string' : 'a string or a number'}`);
  }
}

/**
 * A `Date` as the API takes it: RFC 3339 in UTC, without the fraction when it is zero. The API
 * rounds a fraction up to the next whole second, which keeps both bounds exact for `created_at`
 * values that are whole seconds.
 */
export function formatTime(date: Date, what = 'time'): string {
  const ms = date.getTime();
  if (Number.isNaN(ms)) {
    throw new RangeError(`${what} is an invalid Date`);
  }
  const text = date.toISOString();
  return text.endsWith('.000Z') ? `${text.slice(0, -5)}Z` : text;
}
