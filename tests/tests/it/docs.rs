//! The API reference at `/docs`: Scalar's renderer (from npm, bundled into the static files by
//! scripts/build) on the worker's own `/openapi.json`, under a policy as strict as the hosted
//! page's, in Chromium, checked as a person sees it: the introduction and a sidebar listing
//! every operation on screen at 1280 px, the navigation behind the menu button at 390 px,
//! operation sections drawn when their entries are followed, no "Ask AI" or MCP offer, no
//! policy violation, nothing asked of another origin, and no serious or critical axe-core
//! violation of ours.

use std::time::{Duration, Instant};

use payrail_tests::browser::{exclusive, Browser};
use payrail_tests::{eventually, Worker};
use reqwest::Method;
use serde_json::Value;

/// The policy `www/_headers` gives the page.
const POLICY: &str = "default-src 'none'; script-src 'self'; connect-src 'self'; \
                      style-src 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; \
                      form-action 'none'; base-uri 'none'; frame-ancestors 'none'";

#[test]
fn the_page_and_its_renderer_are_served_from_here_under_a_strict_policy() {
    let worker = Worker::shared();
    let page = worker.send(worker.request(Method::GET, "/docs"), None);
    assert_eq!(page.status, 200, "{}", page.text);
    assert_eq!(page.header("content-security-policy"), Some(POLICY));
    assert_eq!(page.header("x-content-type-options"), Some("nosniff"));
    // Only this origin's scripts, and the renderer is one of them.
    assert!(page
        .text
        .contains(r#"<script src="/docs-scalar.js"></script>"#));
    assert!(
        !page.text.contains("https://"),
        "no other origin on the page"
    );
    // Scalar's standalone script mounts a second, unconfigured reference (no document; "Ask
    // AI" and MCP on) before any element with this id: the page's root has another.
    assert!(!page.text.contains(r#"id="api-reference""#));
    let renderer = worker.send(worker.request(Method::GET, "/docs-scalar.js"), None);
    assert_eq!(renderer.status, 200);
    assert!(renderer.text.contains("@scalar/api-reference"));
    // Its web fonts' host is taken out at build time (the page uses the system's fonts).
    assert!(!renderer.text.contains("fonts.scalar.com"));
}

/// Script helpers for the checks below: `shown(e)` is laid out with a size and not hidden;
/// `seen(e)` is also on screen and on top there (what is at the centre of its first line of
/// content is it, a wrapped heading's box has gaps), which is what a person sees rather than
/// what the DOM holds.
const SEEN: &str = "const shown = e => { const r = e.getBoundingClientRect(); \
     return r.width > 0 && r.height > 0 \
       && e.checkVisibility({ visibilityProperty: true, opacityProperty: true }); }; \
   const seen = e => { if (!shown(e)) return false; const range = document.createRange(); \
     range.selectNodeContents(e); const r = [...range.getClientRects()] \
       .find(r => r.width > 0 && r.height > 0) || e.getBoundingClientRect(); \
     const x = r.left + r.width / 2, y = r.top + r.height / 2; \
     if (x < 0 || y < 0 || x >= innerWidth || y >= innerHeight) return false; \
     const hit = document.elementFromPoint(x, y); return !!hit && e.contains(hit); };";

/// The sidebar's entry for `operation` ("GET /v1/merchants/{id}"): Scalar's link to
/// `#tag/<tag>/<METHOD><path>`, among the entries that are shown.
fn entry(operation: &str) -> String {
    let (method, path) = operation.split_once(' ').unwrap();
    let suffix = serde_json::to_string(&format!("/{method}{path}")).unwrap();
    format!(
        "[...document.querySelectorAll('a[href^=\"#tag/\"]')].filter(shown)\
         .find(a => decodeURIComponent(a.getAttribute('href')).endsWith({suffix}))"
    )
}

#[test]
fn a_person_sees_the_reference_with_every_operation_and_nothing_from_elsewhere() {
    let _one = exclusive();
    let worker = Worker::shared();
    let browser = Browser::start();
    // Anything the page's policy refuses (a style, a worker, a request) is recorded.
    browser.inject_on_new_document(
        "window.__violations = []; document.addEventListener('securitypolicyviolation', \
         e => window.__violations.push(e.violatedDirective + ' ' + e.blockedURI + ' at ' \
         + e.sourceFile + ':' + e.lineNumber + ':' + e.columnNumber));",
    );
    browser.resize(1280, 900);
    browser.goto(&format!("{}/docs", worker.base_url));
    let document = payrail_tests::openapi::document();
    let operations: Vec<(String, String)> = document["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(path, item)| {
            item.as_object()
                .unwrap()
                .iter()
                .filter(|(m, _)| ["get", "post", "put", "patch", "delete"].contains(&m.as_str()))
                .map(move |(m, op)| {
                    let summary = op["summary"].as_str().unwrap_or_default().to_owned();
                    (format!("{} {path}", m.to_uppercase()), summary)
                })
        })
        .collect();
    assert!(operations.len() >= 40, "{operations:?}");
    let title = document["info"]["title"].as_str().unwrap().to_owned();
    let title_js = serde_json::to_string(&title).unwrap();
    let introduction = format!(
        "[...document.querySelectorAll('h1')].find(h => h.innerText.trim() === {title_js})"
    );
    // The introduction's title and the sidebar's entry for every operation are on screen,
    // the first entries on top in the sidebar's visible part, the others laid out (the
    // sidebar scrolls), each group open.
    let entries = format!(
        "{{{}}}",
        operations
            .iter()
            .map(|(op, _)| format!("{}: !!({})", serde_json::to_string(op).unwrap(), entry(op)))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let missing = eventually(
        "the introduction and every operation in the sidebar, on screen",
        Duration::from_secs(30),
        || {
            let script = format!(
                "{SEEN} const h1 = {introduction}; if (!h1 || !seen(h1)) return null; \
                 const first = {first}; if (!first || !seen(first)) return null; \
                 return {ops}.filter(op => !({entries})[op]);",
                first = entry(&operations[0].0),
                ops =
                    serde_json::to_string(&operations.iter().map(|(op, _)| op).collect::<Vec<_>>())
                        .unwrap(),
                entries = entries,
            );
            let missing = browser.eval(&script);
            missing.as_array().cloned()
        },
    );
    assert_eq!(
        missing,
        Vec::<Value>::new(),
        "operations not in the sidebar"
    );
    let no_offers = |browser: &Browser| {
        let text = browser.eval("return document.body.innerText;");
        let text = text.as_str().unwrap();
        for offer in ["Ask AI", "Generate MCP"] {
            assert!(!text.contains(offer), "{offer:?} is shown on /docs");
        }
    };
    // Scalar offers its AI agent and MCP on a local run unless told not to: they are off.
    no_offers(&browser);
    // Every resource the page loaded is this origin's: no CDN, no font host, no telemetry.
    let elsewhere = browser.eval(
        "return performance.getEntriesByType('resource').map(e => e.name)\
         .filter(n => !n.startsWith(location.origin));",
    );
    assert_eq!(
        elsewhere,
        serde_json::json!([]),
        "requests to other origins"
    );
    browser.screenshot("docs-1280");
    // axe-core finds serious and critical violations inside Scalar's own components, which
    // this project cannot change short of forking the renderer: the auth panel's code inputs
    // (contenteditable combo boxes with no name and no aria-expanded), icon-only buttons with
    // no text, its palette's contrast (method badges, "required" labels, highlighted code,
    // the search placeholder) and the tag's endpoint list, scrollable without focus. Those
    // five rules are allowed; any other serious or critical violation fails. (Our own markup
    // on the page is a noscript line and the renderer's root.)
    const SCALAR_KNOWN: [&str; 5] = [
        "aria-input-field-name",
        "aria-required-attr",
        "button-name",
        "color-contrast",
        "scrollable-region-focusable",
    ];
    let violations = browser.serious_accessibility_violations();
    let ours: Vec<&String> = violations
        .iter()
        .filter(|v| {
            !SCALAR_KNOWN
                .iter()
                .any(|rule| v.starts_with(&format!("{rule} (")))
        })
        .collect();
    assert!(ours.is_empty(), "{ours:#?}");
    // Following an operation's entry draws its section (the renderer draws sections as they
    // come into view) and brings its heading on screen: the first, one in the middle, the last.
    for index in [0, operations.len() / 2, operations.len() - 1] {
        let (operation, summary) = &operations[index];
        let follow = || {
            browser.eval(&format!(
                "{SEEN} {}.click(); return true;",
                entry(operation)
            ));
        };
        follow();
        let summary_js = serde_json::to_string(summary).unwrap();
        // Sections above the target are drawn as the scroll passes them and can push it
        // off screen before the scroll ends (seen under load): a person follows the entry
        // again, and so does the test, every few seconds, until the heading stays in view.
        let mut followed = Instant::now();
        eventually(
            &format!("the heading of {operation} on screen"),
            Duration::from_secs(40),
            || {
                let seen = browser
                    .eval(&format!(
                        "{SEEN} return [...document.querySelectorAll('h3')]\
                         .some(h => h.innerText.trim() === {summary_js} && seen(h));"
                    ))
                    .as_bool()
                    .unwrap_or(false);
                if !seen && followed.elapsed() > Duration::from_secs(4) {
                    follow();
                    followed = Instant::now();
                }
                seen.then_some(())
            },
        );
    }
    // Opened on a phone, the introduction fills the screen, nothing scrolls sideways, and the
    // navigation is behind the menu button at the top.
    browser.resize(390, 844);
    browser.goto(&format!("{}/docs", worker.base_url));
    eventually(
        "the introduction on screen at 390 px",
        Duration::from_secs(15),
        || {
            browser
                .eval(&format!(
                    "{SEEN} const h1 = {introduction}; return !!h1 && seen(h1) \
                     && document.documentElement.scrollWidth <= innerWidth;"
                ))
                .as_bool()
                .unwrap_or(false)
                .then_some(())
        },
    );
    no_offers(&browser);
    browser.screenshot("docs-390");
    browser.eval(&format!(
        "{SEEN} [...document.querySelectorAll('.t-doc__header header button')]\
         .find(seen).click(); return true;"
    ));
    eventually(
        "the navigation on screen at 390 px",
        Duration::from_secs(15),
        || {
            browser
                .eval(&format!(
                    "{SEEN} const first = {}; return !!first && seen(first);",
                    entry(&operations[0].0)
                ))
                .as_bool()
                .unwrap_or(false)
                .then_some(())
        },
    );
    browser.screenshot("docs-390-menu");
    let violations = browser.eval("return window.__violations;");
    assert_eq!(violations, serde_json::json!([]), "policy violations");
}
