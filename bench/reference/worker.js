// The JavaScript reference of scripts/bench: Payrail's token issue, bearer check and the two
// partner lists the way a competent Cloudflare user would write them in plain JS, on the same
// schema with the same SQL (and the same index hints) and the same response shapes. It checks
// what the hot paths check (credentials, scopes, expiry, every list parameter) and reads with
// the same consistency (D1 sessions and `Payrail-Bookmark`, docs/API.md) so the comparison is
// fair; it has no portal, checkout or webhooks. Never deployed.

const TOKEN_SECONDS = 3600;
const COLUMNS =
  "id, merchant_id, status, raw_status, amount_status, asset, currency, amount_gross, " +
  "amount_net, amount_expected, psp_fee, gas_fee, bridge_fee, network_payment, " +
  "network_settlement, tx_hash_source, tx_hash_bridge, tx_hash_settlement, customer_email, " +
  "external_reference, created_at, paid_at";
const MERCHANT_COLUMNS =
  "id, name, legal_name, email, public_key, psp_reference_id, status, onboarding_status, " +
  "crypto_enabled, created_at";
const STATUSES = new Set(["pending", "paid", "failed", "refunded", "partially_refunded"]);
const MAX_ID = 9007199254740991;

const json = (status, body, headers = {}) =>
  new Response(JSON.stringify(body), {
    status,
    headers: { "Content-Type": "application/json", ...headers },
  });
const error = (status, code, description) =>
  json(status, { error: code, error_description: description });

async function sha256Hex(text) {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

function sameLength(a, b) {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}

function randomToken(prefix) {
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  let text = btoa(String.fromCharCode(...bytes));
  text = text.replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  return prefix + text;
}

async function token(request, env) {
  const form = new URLSearchParams(await request.text());
  let id = form.get("client_id");
  let secret = form.get("client_secret");
  const auth = request.headers.get("Authorization");
  if (auth && auth.startsWith("Basic ")) {
    const [user, pass] = atob(auth.slice(6)).split(":");
    id = decodeURIComponent(user);
    secret = decodeURIComponent(pass ?? "");
  }
  if (form.get("grant_type") !== "client_credentials")
    return error(400, "unsupported_grant_type", "grant_type must be client_credentials");
  if (!id || !secret) return error(401, "invalid_client", "client authentication failed");
  const source = request.headers.get("CF-Connecting-IP") ?? "unknown";
  const now = Math.floor(Date.now() / 1000);
  const [failures, client] = await env.DB.batch([
    env.DB.prepare(
      "SELECT window_start, failures FROM auth_failures WHERE client_id = ?1 AND source = ?2"
    ).bind(id, source),
    env.DB.prepare("SELECT id, secret_hash, scopes FROM api_clients WHERE client_id = ?1").bind(id),
  ]);
  const f = failures.results[0];
  if (f && f.failures >= 10 && f.window_start > now - 600)
    return error(429, "rate_limited", "too many failed attempts; wait");
  const row = client.results[0];
  const presented = await sha256Hex(secret);
  if (!row || !sameLength(presented, row.secret_hash))
    return error(401, "invalid_client", "client authentication failed");
  const access = randomToken("at_");
  const hash = await sha256Hex(access);
  const [inserted] = await env.DB.batch([
    env.DB.prepare(
      "INSERT INTO access_tokens (token_hash, client_id, institution_id, scopes, issued_at, " +
        "expires_at) SELECT ?1, id, institution_id, ?4, ?5, ?6 FROM api_clients " +
        "WHERE id = ?2 AND secret_hash = ?3"
    ).bind(hash, row.id, row.secret_hash, row.scopes, now, now + TOKEN_SECONDS),
    env.DB.prepare("UPDATE api_clients SET last_used_at = ?1 WHERE id = ?2").bind(
      new Date(now * 1000).toISOString().replace(/\.\d{3}Z$/, "Z"),
      row.id
    ),
    env.DB.prepare("DELETE FROM auth_failures WHERE client_id = ?1 AND source = ?2").bind(id, source),
  ]);
  if (!inserted.meta.changes) return error(401, "invalid_client", "client authentication failed");
  return json(200, {
    access_token: access,
    token_type: "Bearer",
    expires_in: TOKEN_SECONDS,
    scope: row.scopes,
  });
}

const BOOKMARK = "Payrail-Bookmark";
const BOOKMARK_SHAPE = /^[A-Za-z0-9-]{1,128}$/;

// The D1 session a partner read goes through, as Payrail's (docs/API.md, "Reads, replicas and
// bookmarks"): a lookup by id on the primary, a list from the request's bookmark or any
// replica. Undefined when the bookmark is not shaped like one.
function readSession(request, env, primary) {
  const bookmark = request.headers.get(BOOKMARK);
  if (bookmark !== null && !BOOKMARK_SHAPE.test(bookmark)) return undefined;
  return env.DB.withSession(primary ? "first-primary" : (bookmark ?? "first-unconstrained"));
}

// The token's row on `db`, and again on the primary when a replica does not know it yet.
async function caller(request, env, db, scope) {
  const auth = request.headers.get("Authorization") ?? "";
  const [scheme, value] = auth.trim().split(/\s+/, 2);
  if (!value || scheme.toLowerCase() !== "bearer" || !value.startsWith("at_")) return null;
  const hash = await sha256Hex(value);
  const lookup = (session) =>
    session
      .prepare(
        "SELECT institution_id, scopes FROM access_tokens WHERE token_hash = ?1 AND expires_at > ?2"
      )
      .bind(hash, Math.floor(Date.now() / 1000))
      .first();
  let row = await lookup(db.session);
  if (!row && !db.primary) {
    db.session = env.DB.withSession("first-primary");
    db.primary = true;
    row = await lookup(db.session);
  }
  if (!row || !row.scopes.split(" ").includes(scope)) return null;
  return row.institution_id;
}

const withBookmark = (response, db) => {
  const bookmark = db.session.getBookmark();
  if (bookmark) response.headers.set(BOOKMARK, bookmark);
  return response;
};

const INTEGER = /^[1-9][0-9]{0,15}$/;
const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/;

function limitOf(params) {
  const text = params.get("limit");
  if (text === null) return 25;
  const n = INTEGER.test(text) ? Number(text) : 0;
  return n >= 1 && n <= 100 ? n : null;
}

function firstCreatedFrom(n) {
  return (
    "COALESCE((SELECT id FROM transactions INDEXED BY transactions_by_created " +
    `WHERE created_at >= ?${n} ORDER BY created_at, id LIMIT 1), ${MAX_ID + 1})`
  );
}

function transaction(r) {
  return {
    object: "transaction",
    id: r.id,
    merchant_id: r.merchant_id,
    status: r.status,
    raw_status: r.raw_status,
    amount_status: r.amount_status,
    asset: r.asset,
    currency: r.currency,
    amount: {
      gross: r.amount_gross,
      net: r.amount_net,
      expected: r.amount_expected,
      psp_fee: r.psp_fee,
      gas_fee: r.gas_fee,
      bridge_fee: r.bridge_fee,
    },
    networks: { payment: r.network_payment, settlement: r.network_settlement },
    tx_hashes: { source: r.tx_hash_source, bridge: r.tx_hash_bridge, settlement: r.tx_hash_settlement },
    customer_email: r.customer_email,
    external_reference: r.external_reference,
    created_at: r.created_at,
    paid_at: r.paid_at,
  };
}

function page(rows, limit, map) {
  const has_more = rows.length > limit;
  const data = rows.slice(0, limit).map(map);
  return { object: "list", data, has_more, next_cursor: has_more ? data[data.length - 1].id : null };
}

async function transactions(url, db, institution) {
  const p = url.searchParams;
  const limit = limitOf(p);
  if (limit === null) return error(400, "invalid_request", "limit must be an integer from 1 to 100");
  const status = p.get("status");
  if (status !== null && !STATUSES.has(status)) return error(400, "invalid_request", "bad status");
  for (const name of ["merchant_id", "id", "starting_after"])
    if (p.has(name) && !INTEGER.test(p.get(name)))
      return error(400, "invalid_request", `${name} must be a positive integer`);
  for (const name of ["created_after", "created_before"])
    if (p.has(name) && !TIMESTAMP.test(p.get(name)))
      return error(400, "invalid_request", `${name} must be a UTC timestamp`);
  const reference = p.get("external_reference");
  const index = p.has("id")
    ? null
    : reference !== null
      ? "transactions_by_reference"
      : p.has("merchant_id") && status !== null
        ? "transactions_by_merchant_status"
        : p.has("merchant_id")
          ? "transactions_by_merchant"
          : status !== null
            ? "transactions_by_status"
            : "transactions_by_institution";
  let sql = `SELECT ${COLUMNS} FROM transactions${index ? ` INDEXED BY ${index}` : ""} WHERE institution_id = ?1`;
  const values = [institution];
  const and = (clause, value) => {
    values.push(value);
    sql += " AND " + clause(values.length);
  };
  if (p.has("merchant_id")) and((n) => `merchant_id = ?${n}`, Number(p.get("merchant_id")));
  if (status !== null) and((n) => `status = ?${n}`, status);
  if (reference !== null) and((n) => `external_reference = ?${n}`, reference);
  if (p.has("id")) and((n) => `id = ?${n}`, Number(p.get("id")));
  if (p.has("starting_after")) and((n) => `id < ?${n}`, Number(p.get("starting_after")));
  if (p.has("created_after"))
    and((n) => `created_at >= ?${n} AND id >= ${firstCreatedFrom(n)}`, p.get("created_after"));
  if (p.has("created_before"))
    and((n) => `created_at < ?${n} AND id < ${firstCreatedFrom(n)}`, p.get("created_before"));
  values.push(limit + 1);
  sql += ` ORDER BY id DESC LIMIT ?${values.length}`;
  const { results } = await db.session.prepare(sql).bind(...values).all();
  return json(200, page(results, limit, transaction));
}

async function merchants(url, db, institution, id) {
  if (id !== undefined) {
    const r = await db.session.prepare(
      `SELECT ${MERCHANT_COLUMNS} FROM merchants WHERE id = ?1 AND institution_id = ?2`
    )
      .bind(Number(id), institution)
      .first();
    return r ? json(200, merchant(r)) : error(404, "not_found", "no such merchant");
  }
  const p = url.searchParams;
  const limit = limitOf(p);
  if (limit === null) return error(400, "invalid_request", "limit must be an integer from 1 to 100");
  let sql = `SELECT ${MERCHANT_COLUMNS} FROM merchants WHERE institution_id = ?1`;
  const values = [institution];
  if (p.has("starting_after")) {
    if (!INTEGER.test(p.get("starting_after")))
      return error(400, "invalid_request", "starting_after must be a positive integer");
    values.push(Number(p.get("starting_after")));
    sql += ` AND id < ?${values.length}`;
  }
  values.push(limit + 1);
  sql += ` ORDER BY id DESC LIMIT ?${values.length}`;
  const { results } = await db.session.prepare(sql).bind(...values).all();
  return json(200, page(results, limit, merchant));
}

function merchant(r) {
  return {
    object: "merchant",
    id: r.id,
    name: r.name,
    legal_name: r.legal_name,
    email: r.email,
    public_key: r.public_key,
    psp_reference_id: r.psp_reference_id,
    status: r.status,
    onboarding_status: r.onboarding_status,
    crypto_enabled: r.crypto_enabled !== 0,
    onboarding_complete: r.onboarding_status === "completed",
    created_at: r.created_at,
  };
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const path = url.pathname;
    if (path === "/oauth/token" && request.method === "POST") return token(request, env);
    if (request.method !== "GET") return error(405, "method_not_allowed", "method not allowed");
    if (path === "/v1/transactions" || path.startsWith("/v1/merchants")) {
      const scope = path === "/v1/transactions" ? "transactions:read" : "merchants:read";
      const rest = path.slice("/v1/merchants".length);
      const primary = path === "/v1/transactions" ? url.searchParams.has("id") : rest !== "";
      const session = readSession(request, env, primary);
      if (session === undefined)
        return error(400, "invalid_request", `the ${BOOKMARK} header must be a bookmark`);
      const db = { session, primary };
      const institution = await caller(request, env, db, scope);
      if (institution === null) return error(401, "invalid_client", "a valid bearer token is required");
      if (path === "/v1/transactions") return withBookmark(await transactions(url, db, institution), db);
      if (rest === "") return withBookmark(await merchants(url, db, institution), db);
      if (INTEGER.test(rest.slice(1)))
        return withBookmark(await merchants(url, db, institution, rest.slice(1)), db);
    }
    return error(404, "not_found", "no such endpoint");
  },
};
