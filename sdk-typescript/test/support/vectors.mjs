// @ts-check
// The signature vectors every Payrail library shares (shared-types/vectors/webhook-signatures.json),
// and a check of a library's `Webhook` and `WebhookVerificationError` against them that reports
// every vector it disagrees with (so that the check itself can be shown to fail).

import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** The vector file, from this package's place in the repository. */
export const VECTORS_PATH = fileURLToPath(new URL('../../../shared-types/vectors/webhook-signatures.json', import.meta.url));

/**
 * @typedef {{ secret: string, timestamp: number, body: string, signature: string }} SignVector
 * @typedef {{ name: string, secrets: string[], header: string, body: string, now: number, tolerance?: number, result: string }} VerifyVector
 * @typedef {{ sign: SignVector[], verify: VerifyVector[] }} Vectors
 */

/** @returns {Vectors} */
export function loadVectors() {
  return JSON.parse(readFileSync(VECTORS_PATH, 'utf8'));
}

/**
 * Checks a library against the vectors; answers what disagreed (nothing when all hold) and how
 * many deliveries were accepted.
 * @param {{ Webhook: typeof import('payrail').Webhook, WebhookVerificationError: typeof import('payrail').WebhookVerificationError }} library
 * @param {Vectors} vectors
 */
export async function checkVectors(library, vectors) {
  const { Webhook, WebhookVerificationError } = library;
  /** @type {string[]} */
  const problems = [];
  for (const vector of vectors.sign) {
    const got = await Webhook.sign(vector.secret, vector.timestamp, new TextEncoder().encode(vector.body));
    if (got !== vector.signature) {
      problems.push(`sign ${vector.secret} ${vector.timestamp}: got ${got}, want ${vector.signature}`);
    }
  }
  let accepted = 0;
  for (const vector of vectors.verify) {
    const webhook = new Webhook(vector.secrets, vector.tolerance === undefined ? {} : { toleranceSeconds: vector.tolerance });
    // The body as bytes, as a receiver gets it.
    const body = new TextEncoder().encode(vector.body);
    let got;
    try {
      const event = await webhook.verify(body, vector.header, vector.now);
      const sent = JSON.parse(vector.body);
      got = event.id === sent.id ? 'ok' : `ok with the wrong event ${event.id}`;
    } catch (error) {
      got = error instanceof WebhookVerificationError ? error.reason : `an unexpected ${String(error)}`;
    }
    if (got === 'ok') {
      accepted += 1;
    }
    if (got !== vector.result) {
      problems.push(`${vector.name}: want ${vector.result}, got ${got}`);
    }
  }
  return { problems, accepted };
}
