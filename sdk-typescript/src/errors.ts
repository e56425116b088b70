// What can go wrong, as classes a caller can tell apart with `instanceof`. No error carries a
// client secret, a token or a request's headers: only what the API answered and what failed.

/** The base class of every error this library throws on purpose. */
export class PayrailError extends Error {
  static {
    // On the prototype, so that the stack trace, made in the base constructor, names the class.
    this.prototype.name = 'PayrailError';
  }

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/**
 * The API answered with its error body (`{"error", "error_description"}`). 4xx other than 429
 * are never retried; a 429 or 5xx surfaces here once the retries are used up.
 */
export class PayrailApiError extends PayrailError {
  static {
    this.prototype.name = 'PayrailApiError';
  }
  /** The HTTP status, e.g. 400, 401, 403, 404, 409, 429, 500. */
  readonly status: number;
  /**
   * The API's stable `error` code: `invalid_request`, `invalid_client`, `insufficient_scope`,
   * `not_found`, `conflict`, `rate_limited`, `server_error`, … (see `ERROR_CODES`).
   */
  readonly code: string;
  /** The `error_description`, naming the problem (the parameter at fault, for `invalid_request`). Empty when the API sent none. */
  readonly description: string;
  /** The `Payrail-Request-Id` of the answer, to quote to Payrail's support; `undefined` when the answer had none. */
  readonly requestId: string | undefined;
  /** The `Retry-After` the API asked for, in seconds (429), when it did. */
  readonly retryAfter: number | undefined;

  constructor(fields: {
    status: number;
    code: string;
    description: string;
    requestId?: string | undefined;
    retryAfter?: number | undefined;
  }) {
    const request = fields.requestId === undefined ? '' : ` (request ${fields.requestId})`;
    const text = fields.description === '' ? '' : `: ${fields.description}`;
    super(`${fields.code} (${fields.status})${text}${request}`);
    this.status = fields.status;
    this.code = fields.code;
    this.description = fields.description;
    this.requestId = fields.requestId;
    this.retryAfter = fields.retryAfter;
  }
}

/** The request did not complete: the connection was refused or reset, the name did not resolve, a body was cut short. */
export class PayrailConnectionError extends PayrailError {
  static {
    this.prototype.name = 'PayrailConnectionError';
  }
}

/** The request took longer than `timeoutMs` (the answer's body included). */
export class PayrailTimeoutError extends PayrailConnectionError {
  static {
    this.prototype.name = 'PayrailTimeoutError';
  }
  /** The time limit that was passed, in milliseconds. */
  readonly timeoutMs: number;

  constructor(timeoutMs: number) {
    super(`no complete answer within ${timeoutMs} ms`);
    this.timeoutMs = timeoutMs;
  }
}

/**
 * The API answered something that is not what the contract says: not JSON, a member missing or
 * of the wrong type, a list page that cannot be followed, an answer over the size limit.
 */
export class PayrailDecodeError extends PayrailError {
  static {
    this.prototype.name = 'PayrailDecodeError';
  }
  /** The HTTP status of the answer. */
  readonly status: number;
  /** The `Payrail-Request-Id` of the answer, when it had one. */
  readonly requestId: string | undefined;

  constructor(status: number, message: string, requestId?: string) {
    super(`unexpected answer (${status}): ${message}`);
    this.status = status;
    this.requestId = requestId;
  }
}

/** The client was given an unusable setting (a base URL that is not https, an empty client id, …). */
export class PayrailConfigError extends PayrailError {
  static {
    this.prototype.name = 'PayrailConfigError';
  }

  constructor(message: string) {
    super(`bad client configuration: ${message}`);
  }
}

/** Why a webhook delivery was refused. */
export type WebhookVerificationFailure =
  /** The `Payrail-Signature` header is missing, has no `t` or no `v1`, or a part is not `key=value`. */
  | 'malformed_header'
  /** The signature's timestamp is further from now than the tolerance (a replayed delivery, or a wrong clock). */
  | 'timestamp_out_of_tolerance'
  /** No `v1` is the signature of this body under any of the secrets (a forgery, a tampered body, a wrong secret). */
  | 'no_matching_signature'
  /** The signature holds but the body is not a Payrail event. */
  | 'invalid_payload';

/** A webhook delivery was refused: answer it with 400. */
export class WebhookVerificationError extends PayrailError {
  static {
    this.prototype.name = 'WebhookVerificationError';
  }
  /** Why, as a stable code. */
  readonly reason: WebhookVerificationFailure;

  constructor(reason: WebhookVerificationFailure) {
    super(REASONS[reason]);
    this.reason = reason;
  }
}

const REASONS: Record<WebhookVerificationFailure, string> = {
  malformed_header: 'the Payrail-Signature header is malformed',
  timestamp_out_of_tolerance: "the signature's timestamp is outside the tolerance",
  no_matching_signature: 'no signature matches',
  invalid_payload: 'the body is not a Payrail event',
};
