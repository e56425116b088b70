//! Talking to a worker over HTTP: requests through the worker's own client, every reply read
//! whole into a [`Reply`] and checked against `edge-api/openapi.json` when it answers a
//! documented operation, and the helpers the tests share (tokens, checkout sessions, portal
//! sessions), so each test states only what it is about.

use std::collections::HashMap;

use serde_json::Value;

use crate::{openapi, Worker};

/// A response, its body read.
#[derive(Debug)]
pub struct Reply {
    /// HTTP status.
    pub status: u16,
    /// Headers, lower-case names.
    pub headers: HashMap<String, String>,
    /// Body as text.
    pub text: String,
}

impl Reply {
    /// The `Retry-After` header's seconds (panics when absent or not a number).
    pub fn retry_after(&self) -> u64 {
        self.header("retry-after")
            .expect("Retry-After")
            .parse()
            .expect("Retry-After in seconds")
    }

    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {}", self.text))
    }

    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }

    /// Asserts the status and the spec's error body with this code; returns the description.
    pub fn assert_error(&self, status: u16, code: &str) -> String {
        assert_eq!(self.status, status, "status of {}", self.text);
        let body = self.json();
        assert_eq!(body["error"], code, "{body}");
        assert_eq!(body.as_object().map(|o| o.len()), Some(2), "{body}");
        body["error_description"]
            .as_str()
            .expect("a description")
            .to_owned()
    }
}

/// A portal session: the cookie value and its CSRF token.
#[derive(Debug, Clone)]
pub struct PortalSession {
    /// Value of the `payrail_portal` cookie.
    pub cookie: String,
    /// The session's CSRF token.
    pub csrf: String,
}

/// Encodes pairs as `application/x-www-form-urlencoded`, keeping order and repeats.
pub fn form(pairs: &[(&str, &str)]) -> String {
    let mut serializer = form_urlencoded::Serializer::new(String::new());
    for (k, v) in pairs {
        serializer.append_pair(k, v);
    }
    serializer.finish()
}

/// Where the portal's JSON API lives; its responses are checked like the partner API's.
pub const PORTAL_API: &str = "/portal/api/";

impl Worker {
    /// Sends a request; `spec_path` is the OpenAPI path template the response is checked
    /// against. With `None`, a request to the portal's JSON API (`/portal/api/…`) is checked
    /// against the template its path falls under, which must be documented; other requests
    /// (pages, scripts, the document itself) are not checked.
    pub fn send(
        &self,
        request: reqwest::blocking::RequestBuilder,
        spec_path: Option<&str>,
    ) -> Reply {
        let request = request.build().expect("valid request");
        let method = request.method().as_str().to_ascii_lowercase();
        let path = request.url().path().to_owned();
        let spec_path = spec_path.or_else(|| {
            path.starts_with(PORTAL_API).then(|| {
                openapi::template_of(&path)
                    .unwrap_or_else(|| panic!("{path} is under no path of openapi.json"))
            })
        });
        let response = self.http.execute(request).expect("request sent");
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_owned(),
                    v.to_str().unwrap_or_default().to_owned(),
                )
            })
            .collect();
        let text = response.text().expect("body read");
        let reply = Reply {
            status,
            headers,
            text,
        };
        if let Some(path) = spec_path {
            openapi::assert_conforms(path, &method, &reply);
        }
        reply
    }

    /// A GET of an absolute URL with this worker's client (no redirects followed).
    pub fn http_get(&self, url: &str) -> reqwest::blocking::RequestBuilder {
        self.http.get(url)
    }

    /// A request builder for `path` on this worker.
    pub fn request(
        &self,
        method: reqwest::Method,
        path: &str,
    ) -> reqwest::blocking::RequestBuilder {
        self.http
            .request(method, format!("{}{path}", self.base_url))
    }

    /// `GET path` with a bearer token, checked against the spec path template.
    pub fn get(&self, path: &str, token: Option<&str>, spec_path: &str) -> Reply {
        let mut request = self.request(reqwest::Method::GET, path);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        self.send(request, Some(spec_path))
    }

    /// `POST path` with a JSON body (and a bearer token), checked against the spec path template.
    pub fn post_json(
        &self,
        path: &str,
        body: &Value,
        token: Option<&str>,
        spec_path: &str,
    ) -> Reply {
        let mut request = self.request(reqwest::Method::POST, path).json(body);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        self.send(request, Some(spec_path))
    }

    /// `POST /oauth/token` with a form body (pairs sent as given, so tests can repeat fields).
    pub fn token_form(&self, pairs: &[(&str, &str)]) -> Reply {
        let body = form(pairs);
        self.send(
            self.request(reqwest::Method::POST, "/oauth/token")
                .header("Content-Type", "application/x-www-form-urlencoded")
                .body(body),
            Some("/oauth/token"),
        )
    }

    /// A fresh access token for a client, all its scopes.
    pub fn token(&self, client_id: &str, client_secret: &str) -> String {
        let reply = self.token_form(&[
            ("grant_type", "client_credentials"),
            ("client_id", client_id),
            ("client_secret", client_secret),
        ]);
        assert_eq!(reply.status, 200, "{}", reply.text);
        reply.json()["access_token"]
            .as_str()
            .expect("access_token")
            .to_owned()
    }

    /// A token for demo institution `index` (0 or 1), issued by this worker; cached per worker,
    /// so two workers of one test binary never share one.
    pub fn institution_token(&self, index: usize) -> String {
        self.cached_token(index, false)
    }

    /// A `sandbox:write` token of demo institution `index`'s sandbox client, cached likewise.
    pub fn sandbox_token(&self, index: usize) -> String {
        self.cached_token(index, true)
    }

    fn cached_token(&self, index: usize, sandbox: bool) -> String {
        let cached = self
            .institution_tokens
            .lock()
            .expect("lock")
            .get(&(index, sandbox))
            .cloned();
        if let Some(token) = cached {
            return token;
        }
        let institution = &self.credentials.institutions[index];
        let token = if sandbox {
            self.token(
                &institution.sandbox_client_id,
                &institution.sandbox_client_secret,
            )
        } else {
            self.token(&institution.client_id, &institution.client_secret)
        };
        self.institution_tokens
            .lock()
            .expect("lock")
            .entry((index, sandbox))
            .or_insert(token)
            .clone()
    }

    /// Creates a checkout session; asserts it was created (201) and returns its body.
    pub fn checkout_session(&self, options: &Value) -> Value {
        let reply = self.post_json("/checkout/sessions", options, None, "/checkout/sessions");
        assert_eq!(reply.status, 201, "{}", reply.text);
        reply.json()
    }

    /// Runs the cron trigger's work once (`wrangler dev --test-scheduled`); asserts it succeeded.
    pub fn cron(&self) {
        let reply = self.send(
            self.request(reqwest::Method::GET, "/__scheduled?cron=*+*+*+*+*"),
            None,
        );
        assert_eq!(reply.status, 200, "the cron run failed: {}", reply.text);
    }

    /// Payment `id` as demo institution `institution`'s admin reads it in the portal's JSON API
    /// (`GET /portal/api/payments/{id}`, which must answer 200).
    pub fn portal_payment(&self, institution: usize, id: i64) -> Value {
        let portal = self.portal_login(institution);
        let reply = self.portal(
            reqwest::Method::GET,
            &format!("/portal/api/payments/{id}"),
            Some(&portal),
            None,
        );
        assert_eq!(reply.status, 200, "{}", reply.text);
        reply.json()
    }

    /// The transaction `id` as institution `institution` reads it through `/v1/transactions`.
    pub fn transaction(&self, institution: usize, id: i64) -> Value {
        let token = self.institution_token(institution);
        let reply = self.get(
            &format!("/v1/transactions?id={id}"),
            Some(&token),
            "/v1/transactions",
        );
        assert_eq!(reply.status, 200, "{}", reply.text);
        reply.json()["data"][0].clone()
    }

    /// The review of payment `id` in demo institution 0's screening queue, as its JSON API
    /// shows it to `portal`'s session (the test fails when the queue has none).
    pub fn screening_review(&self, portal: &crate::PortalSession, id: i64) -> Value {
        let queue = self.portal(
            reqwest::Method::GET,
            "/portal/api/screening",
            Some(portal),
            None,
        );
        assert_eq!(queue.status, 200, "{}", queue.text);
        queue.json()["data"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|r| r["transaction_id"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("no review of payment {id}: {}", queue.text))
    }

    /// A new API client of demo institution `index`, made by its admin in the portal with
    /// `scopes`: (client_id, client_secret).
    pub fn new_client(&self, index: usize, name: &str, scopes: &[&str]) -> (String, String) {
        let portal = self.portal_login(index);
        let reply = self.portal(
            reqwest::Method::POST,
            "/portal/api/clients",
            Some(&portal),
            Some(&serde_json::json!({ "name": name, "scopes": scopes })),
        );
        assert_eq!(reply.status, 201, "{}", reply.text);
        let client = reply.json();
        (
            client["client_id"].as_str().unwrap().to_owned(),
            client["client_secret"].as_str().unwrap().to_owned(),
        )
    }

    /// Logs the admin of demo institution `index` into the portal through the JSON API.
    pub fn portal_login(&self, index: usize) -> PortalSession {
        let institution = &self.credentials.institutions[index];
        self.portal_login_as(&institution.admin_email, &institution.admin_password)
    }

    /// Logs a portal user in through the JSON API; asserts it worked.
    pub fn portal_login_as(&self, email: &str, password: &str) -> PortalSession {
        let reply = self.send(
            self.request(reqwest::Method::POST, "/portal/api/login")
                .json(&serde_json::json!({ "email": email, "password": password })),
            None,
        );
        assert_eq!(reply.status, 200, "{}", reply.text);
        let set_cookie = reply.header("set-cookie").expect("Set-Cookie").to_owned();
        let cookie = set_cookie
            .split(';')
            .next()
            .and_then(|pair| pair.strip_prefix("payrail_portal="))
            .expect("the session cookie")
            .to_owned();
        PortalSession {
            cookie,
            csrf: reply.json()["csrf_token"]
                .as_str()
                .expect("csrf_token")
                .to_owned(),
        }
    }

    /// A portal page (`GET path`) as the browser of `session` asks for it: its cookie only.
    pub fn portal_page(&self, session: &PortalSession, path: &str) -> Reply {
        self.send(
            self.request(reqwest::Method::GET, path)
                .header("Cookie", format!("payrail_portal={}", session.cookie)),
            None,
        )
    }

    /// A portal page's form posted as the browser of `session` posts it: its cookie, and the
    /// form's fields as given (the CSRF token among them when the test wants it).
    pub fn portal_form(
        &self,
        session: &PortalSession,
        path: &str,
        pairs: &[(&str, &str)],
    ) -> Reply {
        self.send(
            self.request(reqwest::Method::POST, path)
                .header("Cookie", format!("payrail_portal={}", session.cookie))
                .header("Content-Type", "application/x-www-form-urlencoded")
                .body(form(pairs)),
            None,
        )
    }

    /// A portal JSON API call with a session (cookie and CSRF header) and an optional body; the
    /// reply is checked against the operation's documented response for its status.
    pub fn portal(
        &self,
        method: reqwest::Method,
        path: &str,
        session: Option<&PortalSession>,
        body: Option<&Value>,
    ) -> Reply {
        let mut request = self.request(method, path);
        if let Some(session) = session {
            request = request
                .header("Cookie", format!("payrail_portal={}", session.cookie))
                .header("X-CSRF-Token", &session.csrf);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        self.send(request, None)
    }
}
