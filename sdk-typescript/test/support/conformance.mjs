// @ts-check
// The library's description of the contract (src/schema.ts: MODELS, OPERATIONS, OTHER_ENUMS)
// compared with edge-api/openapi.json, both ways: every member, parameter and enum value the
// library knows must be in the document, alike in type, required-ness and nullability, and every
// one the document has must be in the library. Answers the disagreements, one line each.

import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** The document, from this package's place in the repository. */
export const OPENAPI_PATH = fileURLToPath(new URL('../../../edge-api/openapi.json', import.meta.url));

/** @returns {any} */
export function loadDocument() {
  return JSON.parse(readFileSync(OPENAPI_PATH, 'utf8'));
}

/**
 * @typedef {import('../../src/schema.js').FieldSpec} FieldSpec
 * @typedef {{ kind: string, nullable: boolean, value?: unknown, values?: string[], ref?: string, model?: string }} Described
 */

/**
 * Every disagreement between the library's description and the document.
 * @param {any} doc the OpenAPI document
 * @param {{ MODELS: Record<string, { fields: Record<string, FieldSpec> }>, OPERATIONS: Record<string, any>, OTHER_ENUMS: { scopes: readonly string[] } }} library
 * @returns {string[]}
 */
export function conformance(doc, library) {
  /** @type {string[]} */
  const problems = [];
  const schemas = doc?.components?.schemas ?? {};

  for (const [name, model] of Object.entries(library.MODELS)) {
    const schema = schemas[name];
    if (schema === undefined) {
      problems.push(`${name}: a model of the library, not a schema of the document`);
      continue;
    }
    compareObject(doc, name, model.fields, schema, problems);
  }

  for (const [name, op] of Object.entries(library.OPERATIONS)) {
    compareOperation(doc, name, op, problems);
  }

  const scopes = Object.keys(doc?.components?.securitySchemes?.oauth2?.flows?.clientCredentials?.scopes ?? {});
  compareValues('the OAuth scopes', [...library.OTHER_ENUMS.scopes], scopes, problems);
  return problems;
}

/**
 * Members of an object schema against the library's fields: names, required-ness, each member.
 * @param {any} doc
 * @param {string} where
 * @param {Record<string, FieldSpec>} fields
 * @param {any} schema
 * @param {string[]} problems
 */
function compareObject(doc, where, fields, schema, problems) {
  const properties = schema.properties ?? {};
  const required = new Set(schema.required ?? []);
  for (const member of Object.keys(fields)) {
    if (!(member in properties)) {
      problems.push(`${where}.${member}: in the library, not in the document`);
    }
  }
  for (const member of Object.keys(properties)) {
    if (!(member in fields)) {
      problems.push(`${where}.${member}: in the document, not in the library`);
    }
  }
  for (const [member, spec] of Object.entries(fields)) {
    if (!(member in properties)) continue;
    const libraryRequired = spec.optional !== true;
    if (libraryRequired !== required.has(member)) {
      problems.push(
        `${where}.${member}: ${required.has(member) ? 'required' : 'optional'} in the document, ${libraryRequired ? 'required' : 'optional'} in the library`,
      );
    }
    compareField(doc, `${where}.${member}`, spec, properties[member], problems);
  }
}

/**
 * One member or parameter.
 * @param {any} doc
 * @param {string} where
 * @param {FieldSpec} spec
 * @param {any} schema
 * @param {string[]} problems
 */
function compareField(doc, where, spec, schema, problems) {
  const described = describe(doc, schema);
  const nullable = spec.nullable === true;
  if (nullable !== described.nullable) {
    problems.push(`${where}: ${described.nullable ? 'nullable' : 'not nullable'} in the document, ${nullable ? 'nullable' : 'not nullable'} in the library`);
  }
  if (spec.kind !== described.kind) {
    problems.push(`${where}: ${described.kind} in the document, ${spec.kind} in the library`);
    return;
  }
  switch (spec.kind) {
    case 'const':
      if (spec.value !== described.value) {
        problems.push(`${where}: the constant ${JSON.stringify(described.value)} in the document, ${JSON.stringify(spec.value)} in the library`);
      }
      break;
    case 'enum':
      compareValues(where, [...(spec.values ?? [])], described.values ?? [], problems);
      if (spec.ref !== undefined && spec.ref !== described.ref) {
        problems.push(`${where}: the enum ${String(described.ref ?? '(inline)')} in the document, ${spec.ref} in the library`);
      }
      break;
    case 'model':
    case 'list':
      if (spec.model !== described.model) {
        problems.push(`${where}: ${String(described.model)} in the document, ${String(spec.model)} in the library`);
      }
      break;
    default:
      break;
  }
}

/**
 * Enum values, both ways.
 * @param {string} where
 * @param {string[]} ours
 * @param {unknown[]} theirs
 * @param {string[]} problems
 */
function compareValues(where, ours, theirs, problems) {
  for (const value of theirs) {
    if (!ours.includes(/** @type {string} */ (value))) problems.push(`${where}: the value ${JSON.stringify(value)} is in the document, not in the library`);
  }
  for (const value of ours) {
    if (!theirs.includes(value)) problems.push(`${where}: the value ${JSON.stringify(value)} is in the library, not in the document`);
  }
}

/**
 * What a schema of the document stands for, in the library's terms.
 * @param {any} doc
 * @param {any} schema
 * @returns {Described}
 */
function describe(doc, schema) {
  let nullable = false;
  let base = schema ?? {};
  if (Array.isArray(base.anyOf) || Array.isArray(base.oneOf)) {
    const alternatives = base.anyOf ?? base.oneOf;
    const rest = alternatives.filter((/** @type {any} */ a) => a.type !== 'null');
    nullable = rest.length !== alternatives.length;
    base = rest.length === 1 ? rest[0] : { alternatives: rest };
  }
  if (typeof base.$ref === 'string') {
    const name = base.$ref.replace('#/components/schemas/', '');
    const target = doc.components.schemas[name] ?? {};
    if (name === 'Decimal') return { kind: 'decimal', nullable };
    if (name === 'Timestamp') return { kind: 'timestamp', nullable };
    if (name === 'TimeBound') return { kind: 'timebound', nullable };
    if (Array.isArray(target.enum)) return { kind: 'enum', nullable, values: target.enum, ref: name };
    if (target.type === 'object' || target.properties) return { kind: 'model', nullable, model: name };
    const inner = describe(doc, target);
    return { ...inner, nullable: nullable || inner.nullable };
  }
  if ('const' in base) return { kind: 'const', nullable, value: base.const };
  let types = Array.isArray(base.type) ? base.type : base.type === undefined ? [] : [base.type];
  if (types.includes('null')) {
    nullable = true;
    types = types.filter((/** @type {string} */ t) => t !== 'null');
  }
  if (Array.isArray(base.enum)) {
    const values = base.enum.filter((/** @type {unknown} */ v) => v !== null);
    return { kind: 'enum', nullable: nullable || values.length !== base.enum.length, values };
  }
  if (types.length === 2 && types.includes('number') && types.includes('string')) return { kind: 'number_or_string', nullable };
  if (types.length === 1) {
    const [type] = types;
    if (type === 'array') {
      const items = base.items?.$ref;
      return { kind: 'list', nullable, model: typeof items === 'string' ? items.replace('#/components/schemas/', '') : undefined };
    }
    if (type === 'string' || type === 'integer' || type === 'boolean') return { kind: type, nullable };
    if (type === 'number') return { kind: 'number', nullable };
    if (type === 'object') return { kind: 'object', nullable };
  }
  return { kind: `something else (${JSON.stringify(schema)})`, nullable };
}

/**
 * An operation: its path and method, scope, answer, parameters and body.
 * @param {any} doc
 * @param {string} name
 * @param {any} op the library's description
 * @param {string[]} problems
 */
function compareOperation(doc, name, op, problems) {
  const where = `${op.method.toUpperCase()} ${op.path}`;
  const operation = doc.paths?.[op.path]?.[op.method];
  if (operation === undefined) {
    problems.push(`${where} (${name}): called by the library, not in the document`);
    return;
  }

  const security = operation.security ?? doc.security ?? [];
  const scopes = security.flatMap((/** @type {any} */ requirement) => requirement.oauth2 ?? []);
  const bearer = security.some((/** @type {any} */ requirement) => 'oauth2' in requirement);
  if ((op.scope !== undefined) !== bearer || (op.scope !== undefined && !scopes.includes(op.scope))) {
    problems.push(`${where}: needs ${bearer ? `the token (${scopes.join(' ') || 'any scope'})` : 'no token'} in the document, ${op.scope ?? 'no token'} in the library`);
  }

  const answers = Object.entries(operation.responses ?? {}).filter(([status]) => status === '200' || status === '201');
  const answered = new Set(
    answers.map(([, answer]) => String(resolve(doc, answer)?.content?.['application/json']?.schema?.$ref ?? '').replace('#/components/schemas/', '')),
  );
  if (answered.size !== 1 || !answered.has(op.response)) {
    problems.push(`${where}: answers ${[...answered].join(', ') || 'nothing'} in the document, ${op.response} in the library`);
  }

  const parameters = [...(doc.paths[op.path].parameters ?? []), ...(operation.parameters ?? [])].map((p) => resolve(doc, p));
  const of = (/** @type {string} */ place) => parameters.filter((p) => p.in === place);

  const query = op.query ?? {};
  /** @type {Record<string, FieldSpec>} */
  const queryFields = Object.fromEntries(Object.entries(query).map(([param, spec]) => [param, { ...spec, optional: true }]));
  compareObject(
    doc,
    `${where} query`,
    queryFields,
    {
      properties: Object.fromEntries(of('query').map((p) => [p.name, p.schema])),
      required: of('query').filter((p) => p.required).map((p) => p.name),
    },
    problems,
  );

  const headers = new Set((op.headers ?? []).map((/** @type {string} */ h) => h.toLowerCase()));
  const documented = new Set(of('header').map((p) => String(p.name).toLowerCase()).filter((h) => h !== 'x-csrf-token'));
  for (const header of documented) if (!headers.has(header)) problems.push(`${where}: the header ${header} is in the document, not in the library`);
  for (const header of headers) if (!documented.has(header)) problems.push(`${where}: the header ${header} is in the library, not in the document`);

  compareObject(
    doc,
    `${where} path`,
    op.pathParams ?? {},
    {
      properties: Object.fromEntries(of('path').map((p) => [p.name, p.schema])),
      required: of('path').filter((p) => p.required).map((p) => p.name),
    },
    problems,
  );

  const content = operation.requestBody?.content ?? {};
  const json = content['application/json']?.schema;
  const form = content['application/x-www-form-urlencoded']?.schema;
  if (op.body !== undefined) {
    const ref = String(json?.$ref ?? '').replace('#/components/schemas/', '');
    if (ref !== op.body) problems.push(`${where}: takes ${ref || 'no JSON model'} in the document, ${op.body} in the library`);
  } else if (op.bodyFields !== undefined) {
    if (json === undefined) problems.push(`${where}: takes no JSON body in the document`);
    else compareObject(doc, `${where} body`, op.bodyFields, json, problems);
  } else if (op.form !== undefined) {
    if (form === undefined) problems.push(`${where}: takes no form in the document`);
    else compareObject(doc, `${where} form`, op.form, form, problems);
  } else if (json !== undefined || form !== undefined) {
    problems.push(`${where}: takes a body in the document, none in the library`);
  }
}

/**
 * A `$ref` to a parameter or an answer, resolved.
 * @param {any} doc
 * @param {any} value
 */
function resolve(doc, value) {
  if (typeof value?.$ref !== 'string') return value;
  const path = value.$ref.replace(/^#\//, '').split('/');
  return resolve(doc, path.reduce((/** @type {any} */ node, /** @type {string} */ key) => node?.[key], doc));
}
