// The API's resources as the client exposes them: `transactions`, `merchants`, `events`,
// `checkout` and `sandbox`. Each call names its operation in `OPERATIONS`, whose description the
// conformance test holds to the OpenAPI document.

import { toEvent } from './check.js';
import { PayrailApiError } from './errors.js';
import { SANDBOX_ACTIONS } from './models.js';
import type { CheckoutOptions, CheckoutSession, Event, Merchant, Page, SandboxAction, Transaction } from './models.js';
import { List } from './pagination.js';
import type { ListPromise } from './pagination.js';
import { toQuery } from './params.js';
import type { EventListParams, MerchantListParams, TransactionListParams } from './params.js';
import { OPERATIONS } from './schema.js';
import type { ModelName, ParamSpec } from './schema.js';

/** What the resources ask of the client. */
export interface Api {
  /** A `GET` of `path` (relative to the base URL) with the token and the bookmark. */
  get(path: string, query: URLSearchParams | undefined, model: ModelName): Promise<unknown>;
  /** A `POST` of a JSON body. */
  post(path: string, body: unknown, model: ModelName, how: { authorized: boolean; idempotent: boolean }): Promise<unknown>;
}

/** `client.transactions`. */
export interface Transactions {
  /**
   * Every transaction the filters select, newest first: `await` it for the first page, or
   * iterate it for every item of every page (`limit` is the page size).
   */
  list(params?: TransactionListParams): ListPromise<Transaction, number>;
  /** One page. */
  page(params?: TransactionListParams): Promise<Page<Transaction, number>>;
  /** One transaction, or `null` when your institution has none with this id. */
  retrieve(id: number): Promise<Transaction | null>;
}

/** `client.merchants`. */
export interface Merchants {
  /** Every merchant the filters select, newest first (`await` for the first page, iterate for all). */
  list(params?: MerchantListParams): ListPromise<Merchant, number>;
  /** One page. */
  page(params?: MerchantListParams): Promise<Page<Merchant, number>>;
  /** One merchant, or `null` when your institution has none with this id. */
  retrieve(id: number): Promise<Merchant | null>;
}

/** `client.events`: the events feed, every event Payrail created for your institution (30 days). */
export interface Events {
  /** Every event the filters select, newest first (`await` for the first page, iterate for all). */
  list(params?: EventListParams): ListPromise<Event, string>;
  /** One page. */
  page(params?: EventListParams): Promise<Page<Event, string>>;
  /**
   * One event by id (`evt_…`, as a delivery's `Payrail-Event-Id` carries it), exactly as its
   * deliveries send it, or `null` when your institution has none with this id.
   */
  retrieve(id: string): Promise<Event | null>;
}

/** `client.checkout`. */
export interface Checkout {
  /**
   * Creates a checkout session with a merchant's publishable key, as the browser script does
   * (`POST /checkout/sessions`): for tests and the sandbox. A session with an `idempotencyKey`
   * is retried safely; one without is sent once.
   */
  create(options: CheckoutOptions): Promise<CheckoutSession>;
}

/** `client.sandbox` (needs `sandbox:write`, granted to sandbox clients only). */
export interface Sandbox {
  /**
   * Applies a lifecycle action to a transaction and answers it afterwards: `pay` and `refund`
   * take `{ amount }` (a decimal string in the order currency), `settle` an optional
   * `{ network }` (another network than the payment's means a bridge), `fail` nothing.
   */
  act(id: number, action: 'pay' | 'refund', body: { amount: string }): Promise<Transaction>;
  act(id: number, action: 'settle', body?: { network?: string | undefined }): Promise<Transaction>;
  act(id: number, action: 'fail'): Promise<Transaction>;
}

/** A list resource: `list` and `page` over one operation. */
function lists<T, C, P extends object>(
  api: Api,
  operation: { readonly path: string; readonly response: ModelName; readonly query: { readonly [name: string]: ParamSpec } },
  item: (value: unknown, path: string) => T = (value) => value as T,
) {
  const path = operation.path.slice(1);
  const page = async (query: URLSearchParams, cursor: C | undefined): Promise<Page<T, C>> => {
    const search = new URLSearchParams(query);
    if (cursor !== undefined) {
      search.set('starting_after', String(cursor));
    }
    const answer = (await api.get(path, search, operation.response)) as Page<unknown, C>;
    return { ...answer, data: answer.data.map((value, index) => item(value, `${operation.response}.data[${index}]`)) };
  };
  return {
    list(params?: P): ListPromise<T, C> {
      const query = toQuery(params, operation.query, operation.path);
      return new List<T, C>((cursor) => page(query, cursor));
    },
    page(params?: P): Promise<Page<T, C>> {
      try {
        return page(toQuery(params, operation.query, operation.path), undefined);
      } catch (error) {
        return Promise.reject(error);
      }
    },
  };
}

/** @internal */
export function transactionsResource(api: Api): Transactions {
  const { list, page } = lists<Transaction, number, TransactionListParams>(api, OPERATIONS.listTransactions);
  return Object.freeze({
    list,
    page,
    async retrieve(id: number): Promise<Transaction | null> {
      // Without an id the filter would fall away and the page's first row come back.
      if (!Number.isSafeInteger(id)) {
        throw new TypeError('a transaction id is a whole number');
      }
      const found = await page({ id });
      return found.data[0] ?? null;
    },
  });
}

/** @internal */
export function merchantsResource(api: Api): Merchants {
  const { list, page } = lists<Merchant, number, MerchantListParams>(api, OPERATIONS.listMerchants);
  return Object.freeze({
    list,
    page,
    async retrieve(id: number): Promise<Merchant | null> {
      if (typeof id !== 'number' && typeof id !== 'string') {
        throw new TypeError('a merchant id is a number');
      }
      try {
        const path = OPERATIONS.retrieveMerchant.path.slice(1).replace('{id}', encodeURIComponent(String(id)));
        return (await api.get(path, undefined, OPERATIONS.retrieveMerchant.response)) as Merchant;
      } catch (error) {
        if (error instanceof PayrailApiError && error.status === 404) {
          return null;
        }
        throw error;
      }
    },
  });
}

/** @internal */
export function eventsResource(api: Api): Events {
  const { list, page } = lists<Event, string, EventListParams>(api, OPERATIONS.listEvents, toEvent);
  return Object.freeze({
    list,
    page,
    async retrieve(id: string): Promise<Event | null> {
      if (typeof id !== 'string' || id === '') {
        throw new TypeError('an event id is a string (evt_…)');
      }
      try {
        const path = OPERATIONS.retrieveEvent.path.slice(1).replace('{id}', encodeURIComponent(id));
        return toEvent(await api.get(path, undefined, OPERATIONS.retrieveEvent.response), 'Event');
      } catch (error) {
        if (error instanceof PayrailApiError && error.status === 404) {
          return null;
        }
        throw error;
      }
    },
  });
}

/** @internal */
export function checkoutResource(api: Api): Checkout {
  const operation = OPERATIONS.createCheckoutSession;
  return Object.freeze({
    async create(options: CheckoutOptions): Promise<CheckoutSession> {
      if (typeof options !== 'object' || options === null) {
        throw new TypeError('checkout options are required');
      }
      const body = { ...options, allowCrypto: options.allowCrypto ?? true };
      const key = options.idempotencyKey;
      return (await api.post(operation.path.slice(1), body, operation.response, {
        authorized: false,
        // The server answers a repeat of the same key and options with the same session.
        idempotent: typeof key === 'string' && key !== '',
      })) as CheckoutSession;
    },
  });
}

/** @internal */
export function sandboxResource(api: Api): Sandbox {
  const operation = OPERATIONS.sandboxAction;
  async function act(id: number, action: SandboxAction, body?: object): Promise<Transaction> {
    if (!(SANDBOX_ACTIONS as readonly unknown[]).includes(action)) {
      throw new TypeError(`a sandbox action is one of ${SANDBOX_ACTIONS.join(', ')}, not ${String(action)}`);
    }
    const path = operation.path
      .slice(1)
      .replace('{id}', encodeURIComponent(String(id)))
      .replace('{action}', action);
    return (await api.post(path, body ?? {}, operation.response, { authorized: true, idempotent: false })) as Transaction;
  }
  return Object.freeze({ act } as Sandbox);
}
