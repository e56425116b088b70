//! Headless Chromium (Debian's `chromium`, driven through `chromedriver` over WebDriver) and a
//! merchant site on another origin, for the tests of what a browser does.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{json, Value};

use crate::free_port;

/// Only one browser at a time: two cores do not run two Chromiums and a worker well.
pub fn exclusive() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// A headless Chromium session. Dropping it ends the session and stops chromedriver.
pub struct Browser {
    runtime: tokio::runtime::Runtime,
    client: Option<Client>,
    driver: Child,
    driver_port: u16,
    profile: PathBuf,
}

impl Browser {
    /// Starts chromedriver and a fresh Chromium profile.
    pub fn start() -> Browser {
        let port = free_port();
        let driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver (scripts/setup installs Debian's chromium-driver)");
        let profile = std::env::temp_dir().join(format!("payrail-chromium-{port}"));
        let _ = std::fs::remove_dir_all(&profile);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("tokio runtime");
        let mut capabilities = serde_json::Map::new();
        capabilities.insert(
            "goog:chromeOptions".into(),
            json!({
                "binary": "/usr/bin/chromium",
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update",
                    "--disable-sync", "--disable-quic", "--window-size=1000,1000",
                    format!("--user-data-dir={}", profile.display()),
                ],
            }),
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        let client = loop {
            let attempt = runtime.block_on(
                ClientBuilder::native()
                    .capabilities(capabilities.clone())
                    .connect(&format!("http://127.0.0.1:{port}")),
            );
            match attempt {
                Ok(client) => break client,
                Err(err) if Instant::now() > deadline => panic!("chromedriver: {err}"),
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        };
        Browser {
            runtime,
            client: Some(client),
            driver,
            driver_port: port,
            profile,
        }
    }

    /// Sends a Chrome DevTools Protocol command to the current tab (chromedriver's
    /// `goog/cdp/execute`); returns its result.
    pub fn devtools(&self, command: &str, params: Value) -> Value {
        let session = self
            .runtime
            .block_on(self.client().session_id())
            .expect("session id")
            .expect("an open session");
        let reply = reqwest::blocking::Client::new()
            .post(format!(
                "http://127.0.0.1:{}/session/{session}/goog/cdp/execute",
                self.driver_port
            ))
            .json(&json!({ "cmd": command, "params": params }))
            .send()
            .unwrap_or_else(|e| panic!("{command}: {e}"));
        let body: Value = reply.json().unwrap_or_else(|e| panic!("{command}: {e}"));
        assert!(body["value"]["error"].is_null(), "{command}: {body}");
        body["value"].clone()
    }

    /// Runs `script` in every document the tab loads from now on, before the page's own
    /// scripts (as a browser extension's injected script does; the page's CSP does not apply).
    pub fn inject_on_new_document(&self, script: &str) {
        self.devtools(
            "Page.addScriptToEvaluateOnNewDocument",
            json!({ "source": script }),
        );
    }

    /// Makes the tab send `accept_language` as its `Accept-Language` (and report it as
    /// `navigator.languages`).
    pub fn set_accept_language(&self, accept_language: &str) {
        let agent = self.eval("return navigator.userAgent;");
        self.devtools(
            "Emulation.setUserAgentOverride",
            json!({ "userAgent": agent, "acceptLanguage": accept_language }),
        );
    }

    /// Presses Tab once, as a keyboard user moves to the next control.
    pub fn press_tab(&self) {
        use fantoccini::actions::{InputSource, KeyAction, KeyActions};
        use fantoccini::key::Key;
        let tab = char::from(Key::Tab);
        let keys = KeyActions::new("keyboard".into())
            .then(KeyAction::Down { value: tab })
            .then(KeyAction::Up { value: tab });
        self.runtime
            .block_on(self.client().perform_actions(keys))
            .expect("press Tab");
    }

    fn client(&self) -> &Client {
        self.client.as_ref().expect("session open")
    }

    /// Loads `url` in the current tab.
    pub fn goto(&self, url: &str) {
        self.runtime
            .block_on(self.client().goto(url))
            .unwrap_or_else(|e| panic!("goto {url}: {e}"));
    }

    /// The current tab's URL.
    pub fn url(&self) -> String {
        self.runtime
            .block_on(self.client().current_url())
            .map(|u| u.to_string())
            .unwrap_or_default()
    }

    /// Clicks the element matching `css`.
    pub fn click(&self, css: &str) {
        self.runtime
            .block_on(async {
                self.client()
                    .wait()
                    .at_most(Duration::from_secs(10))
                    .for_element(Locator::Css(css))
                    .await?
                    .click()
                    .await
            })
            .unwrap_or_else(|e| panic!("click {css}: {e}"));
    }

    /// Types `text` into the field matching `css`.
    pub fn fill(&self, css: &str, text: &str) {
        self.runtime
            .block_on(async {
                let field = self
                    .client()
                    .wait()
                    .at_most(Duration::from_secs(10))
                    .for_element(Locator::Css(css))
                    .await?;
                field.clear().await?;
                field.send_keys(text).await
            })
            .unwrap_or_else(|e| panic!("fill {css}: {e}"));
    }

    /// Runs `script` (a function body) in the page and returns its value.
    pub fn eval(&self, script: &str) -> Value {
        self.runtime
            .block_on(self.client().execute(script, vec![]))
            .unwrap_or_else(|e| panic!("script failed: {e}"))
    }

    /// The text of the element matching `css`, or `None` when there is none.
    pub fn text(&self, css: &str) -> Option<String> {
        self.runtime.block_on(async {
            let element = self.client().find(Locator::Css(css)).await.ok()?;
            element.text().await.ok()
        })
    }

    /// Waits until an element matches `css`; returns its text.
    pub fn wait_text(&self, css: &str) -> String {
        crate::eventually(
            &format!("an element {css}"),
            Duration::from_secs(15),
            || self.text(css),
        )
    }

    /// Handles of the open tabs.
    pub fn tabs(&self) -> Vec<fantoccini::wd::WindowHandle> {
        self.runtime
            .block_on(self.client().windows())
            .expect("window handles")
    }

    /// Switches to a tab.
    pub fn switch_to(&self, tab: fantoccini::wd::WindowHandle) {
        self.runtime
            .block_on(self.client().switch_to_window(tab))
            .expect("switch tab");
    }

    /// A PNG of the element matching `css`, as the screen shows it.
    pub fn element_png(&self, css: &str) -> Vec<u8> {
        self.runtime
            .block_on(async {
                self.client()
                    .find(Locator::Css(css))
                    .await?
                    .screenshot()
                    .await
            })
            .unwrap_or_else(|e| panic!("screenshot of {css}: {e}"))
    }

    /// Resizes the window (a phone is about 390 × 844).
    pub fn resize(&self, width: u32, height: u32) {
        self.runtime
            .block_on(self.client().set_window_size(width, height))
            .expect("resize window");
    }

    /// Saves a screenshot of the current tab under `tests/artifacts/`.
    pub fn screenshot(&self, name: &str) -> PathBuf {
        let png = self
            .runtime
            .block_on(self.client().screenshot())
            .expect("screenshot");
        let dir = crate::root().join("tests/artifacts");
        std::fs::create_dir_all(&dir).expect("artifacts dir");
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).expect("write screenshot");
        path
    }

    /// Runs axe-core (`node_modules/axe-core`, installed by scripts/setup) on the current page
    /// and returns its violations of impact `serious` or `critical`, each as its rule, what it
    /// asks and the elements that break it (empty: none).
    pub fn serious_accessibility_violations(&self) -> Vec<String> {
        let path = crate::root().join("node_modules/axe-core/axe.min.js");
        let source = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{} (scripts/setup installs it): {e}", path.display()));
        self.eval(&format!("{source}\n;return typeof window.axe;"));
        let found = self
            .runtime
            .block_on(self.client().execute_async(
                "const done = arguments[arguments.length - 1];
                 window.axe.run(document, { resultTypes: ['violations'] })
                   .then(r => done(r.violations
                     .filter(v => v.impact === 'serious' || v.impact === 'critical')
                     .map(v => v.id + ' (' + v.impact + '): ' + v.help + ' at '
                       + v.nodes.map(n => n.target.join(' ')).join(', '))))
                   .catch(e => done(['axe failed: ' + e]));",
                vec![],
            ))
            .unwrap_or_else(|e| panic!("axe-core did not run: {e}"));
        found
            .as_array()
            .expect("a list of violations")
            .iter()
            .map(|v| v.as_str().unwrap_or_default().to_owned())
            .collect()
    }

    /// Waits until the current URL satisfies `done`; returns it.
    pub fn wait_for_url(&self, what: &str, done: impl Fn(&str) -> bool) -> String {
        crate::eventually(what, Duration::from_secs(20), || {
            let url = self.url();
            done(&url).then_some(url)
        })
    }
    /// Logs into the portal at `base_url` with the login form, and waits for the overview the
    /// login lands on.
    pub fn log_in(&self, base_url: &str, email: &str, password: &str) {
        self.goto(&format!("{base_url}/portal/login"));
        self.fill("#email", email);
        self.fill("#password", password);
        self.click("form[action='/portal/login'] button");
        self.wait_for_url("the overview", |u| u.ends_with("/portal/"));
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            let _ = self.runtime.block_on(client.close());
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

/// A merchant's shop on its own origin with a `/thanks` page, that demo merchant `merchant`'s
/// checkouts may return the customer to: its return origins become `also` and the shop's.
pub fn shop_site(
    worker: &crate::Worker,
    portal: &crate::http::PortalSession,
    merchant: i64,
    also: &[&str],
) -> Site {
    let site = Site::start();
    site.page(
        "/thanks",
        "<!doctype html><title>Thanks</title><h1>Thanks</h1>".to_owned(),
    );
    let mut origins: Vec<&str> = also.to_vec();
    origins.push(&site.origin);
    let reply = worker.portal(
        reqwest::Method::PUT,
        &format!("/portal/api/merchants/{merchant}/return-origins"),
        Some(portal),
        Some(&json!({ "return_origins": origins })),
    );
    assert_eq!(reply.status, 200, "{}", reply.text);
    site
}

/// A merchant's website on its own origin: serves the pages registered with [`Site::page`].
pub struct Site {
    /// `http://127.0.0.1:<port>`.
    pub origin: String,
    pages: Arc<Mutex<HashMap<String, String>>>,
}

impl Site {
    /// Starts serving on a free port (a thread that lives as long as the test process).
    pub fn start() -> Site {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let origin = format!("http://{}", listener.local_addr().expect("addr"));
        let pages: Arc<Mutex<HashMap<String, String>>> = Arc::default();
        let served = pages.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let mut stream = stream;
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let text = String::from_utf8_lossy(&request);
                let path = text
                    .split_whitespace()
                    .nth(1)
                    .unwrap_or("/")
                    .split('?')
                    .next()
                    .unwrap_or("/")
                    .to_owned();
                let page = served.lock().expect("pages").get(&path).cloned();
                let (status, body) = match page {
                    Some(body) => ("200 OK", body),
                    None => ("404 Not Found", "not found".to_owned()),
                };
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\n\
                     Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        Site { origin, pages }
    }

    /// Serves `html` at `path`; returns the page's URL.
    pub fn page(&self, path: &str, html: String) -> String {
        self.pages
            .lock()
            .expect("pages")
            .insert(path.to_owned(), html);
        format!("{}{path}", self.origin)
    }

    /// A merchant page that loads `{worker}/checkout.js` and binds `options` (a JSON object) to
    /// a button `#pay`. It records console errors in `window.__errors` and the URLs `fetch` is
    /// called with in `window.__requests`, before checkout.js loads.
    pub fn checkout_page(&self, path: &str, worker: &str, options: &Value) -> String {
        self.page(
            path,
            format!(
                r##"<!doctype html><html><head><meta charset="utf-8"><title>Merchant</title>
<script>
window.__errors = [];
var realError = console.error;
console.error = function () {{
  window.__errors.push(Array.prototype.join.call(arguments, " "));
  return realError.apply(console, arguments);
}};
window.__requests = [];
var realFetch = window.fetch;
window.fetch = function (input) {{
  window.__requests.push(String(input && input.url ? input.url : input));
  return realFetch.apply(this, arguments);
}};
window.addEventListener("error", function (e) {{ window.__errors.push("uncaught: " + e.message); }});
</script>
<script src="{worker}/checkout.js"></script>
</head><body><h1>Merchant</h1><button id="pay" type="button">Pay with crypto</button>
<script>Payrail.checkout({options}, "#pay");</script>
</body></html>"##
            ),
        )
    }
}
