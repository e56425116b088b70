// Answers checked against the contract's description (schema.ts) at run time, so that a broken
// answer is a `PayrailDecodeError` naming the member at the edge, rather than an `undefined`
// deep in a caller's code.

import { EVENT_TYPES } from './models.js';
import type { Event } from './models.js';
import { MODELS } from './schema.js';
import type { FieldSpec, ModelName } from './schema.js';

/** An answer that is not the shape the description says; `path` names the member. */
export class ShapeError extends Error {}

/**
 * Checks `value` against a model, member by member: every member present (unless optional), of
 * its type, `null` only where nullable, string constants equal. Members the description does not
 * name are let through (the API may add members within v1), and so are enum values newer than
 * this library (a reader must not break on them).
 */
export function checkModel(name: ModelName, value: unknown, path: string = name): void {
  if (name === 'Event') {
    checkEvent(value, path);
    return;
  }
  checkFields(MODELS[name].fields, value, path);
}

/**
 * An event from its checked JSON: the JSON itself for the types this library knows, an
 * `OtherEvent` wrapping it for newer ones.
 */
export function toEvent(value: unknown, path: string): Event {
  checkEvent(value, path);
  const event = value as { id: string; type: string; created: number; data: unknown };
  if ((EVENT_TYPES as readonly string[]).includes(event.type)) {
    return event as Event;
  }
  return { id: event.id, type: 'other', otherType: event.type, created: event.created, data: event.data };
}

/** An event: the envelope always; `data` as a transaction only for the types this library knows. */
export function checkEvent(value: unknown, path: string): void {
  if (!isObject(value)) {
    throw new ShapeError(`${path}: expected an event object`);
  }
  const known = (EVENT_TYPES as readonly unknown[]).includes(value['type']);
  const { data, ...envelope } = MODELS.Event.fields;
  checkFields(envelope, value, path);
  if (!('data' in value)) {
    throw new ShapeError(`${path}.data: missing`);
  }
  if (known) {
    checkField(data, value['data'], `${path}.data`);
  }
}

function checkFields(fields: { readonly [name: string]: FieldSpec }, value: unknown, path: string): void {
  if (!isObject(value)) {
    throw new ShapeError(`${path}: expected an object`);
  }
  for (const [member, spec] of Object.entries(fields)) {
    if (!(member in value) || value[member] === undefined) {
      if (spec.optional === true) {
        continue;
      }
      throw new ShapeError(`${path}.${member}: missing`);
    }
    checkField(spec, value[member], `${path}.${member}`);
  }
}

function checkField(spec: FieldSpec, value: unknown, path: string): void {
  if (value === null) {
    if (spec.nullable === true) {
      return;
    }
    throw new ShapeError(`${path}: null where a value is required`);
  }
  const fail = (expected: string): never => {
    throw new ShapeError(`${path}: expected ${expected}, got ${describe(value)}`);
  };
  switch (spec.kind) {
    case 'string':
    case 'decimal':
    case 'timestamp':
    case 'timebound':
    case 'enum':
      if (typeof value !== 'string') fail('a string');
      return;
    case 'integer':
      if (!Number.isSafeInteger(value)) fail('an integer');
      return;
    case 'boolean':
      if (typeof value !== 'boolean') fail('a boolean');
      return;
    case 'number_or_string':
      if (typeof value !== 'number' && typeof value !== 'string') fail('a number or a string');
      return;
    case 'const':
      // String constants name the kind of object (`"object": "transaction"`); others are
      // checked for their type only (an `expires_in` other than 3600 is still a lifetime).
      if (typeof spec.value === 'string' ? value !== spec.value : typeof value !== typeof spec.value) {
        fail(JSON.stringify(spec.value));
      }
      return;
    case 'model':
      checkModel(spec.model as ModelName, value, path);
      return;
    case 'list':
      if (!Array.isArray(value)) fail('an array');
      (value as unknown[]).forEach((item, index) => checkModel(spec.model as ModelName, item, `${path}[${index}]`));
      return;
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function describe(value: unknown): string {
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'string') return `the string ${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)}`;
  if (typeof value === 'number') return `the number ${value}`;
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}
