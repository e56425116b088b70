//! A browser wallet played by the test: EIP-1193 providers injected into every page before its
//! scripts (as a wallet extension injects them) and announced by EIP-6963. Each request a page
//! makes waits in the page until the test answers it ([`Wallets::serve`]), so the page's CSP is
//! untouched: the test, not the page, talks to the node.

use serde_json::{json, Value};

use crate::browser::Browser;

/// The script that injects one provider per wallet name, each announced by EIP-6963.
pub fn provider_script(names: &[&str]) -> String {
    let names = serde_json::to_string(names).expect("names");
    format!(
        r#"(function () {{
  var wallet = {{ pending: [], answers: {{}}, seq: 0 }};
  window.__wallet = wallet;
  function provider(name) {{
    return {{
      request: function (args) {{
        return new Promise(function (resolve, reject) {{
          var id = ++wallet.seq;
          wallet.answers[id] = {{ resolve: resolve, reject: reject }};
          wallet.pending.push({{ id: id, wallet: name, method: args.method, params: args.params || [] }});
        }});
      }},
      on: function () {{}},
      removeListener: function () {{}}
    }};
  }}
  var announced = {names}.map(function (name, i) {{
    return Object.freeze({{
      info: {{ uuid: "00000000-0000-4000-8000-00000000000" + i, name: name,
              icon: "data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg'/%3E",
              rdns: "test.wallet" + i }},
      provider: provider(name)
    }});
  }});
  function announce() {{
    announced.forEach(function (detail) {{
      window.dispatchEvent(new CustomEvent("eip6963:announceProvider", {{ detail: detail }}));
    }});
  }}
  window.addEventListener("eip6963:requestProvider", announce);
  announce();
}})();"#
    )
}

/// One request a page made to a wallet.
#[derive(Debug, Clone)]
pub struct WalletRequest {
    /// The wallet's name.
    pub wallet: String,
    /// The JSON-RPC method.
    pub method: String,
    /// Its params.
    pub params: Value,
}

/// The test's side of the injected wallets.
pub struct Wallets;

impl Wallets {
    /// Injects wallets named `names` into every page `browser` loads from now on.
    pub fn inject(browser: &Browser, names: &[&str]) -> Wallets {
        browser.inject_on_new_document(&provider_script(names));
        Wallets
    }

    /// Answers every request waiting in the current page with `answer` (`Ok(result)`, or
    /// `Err((code, message))` for an EIP-1193 error); returns the requests answered.
    pub fn serve(
        &self,
        browser: &Browser,
        mut answer: impl FnMut(&WalletRequest) -> Result<Value, (i64, String)>,
    ) -> Vec<WalletRequest> {
        let pending =
            browser.eval("return window.__wallet ? window.__wallet.pending.splice(0) : [];");
        let mut served = Vec::new();
        for item in pending.as_array().cloned().unwrap_or_default() {
            let request = WalletRequest {
                wallet: item["wallet"].as_str().unwrap_or_default().to_owned(),
                method: item["method"].as_str().unwrap_or_default().to_owned(),
                params: item["params"].clone(),
            };
            let id = item["id"].as_i64().expect("request id");
            let script = match answer(&request) {
                Ok(result) => format!(
                    "var a = window.__wallet.answers[{id}]; delete window.__wallet.answers[{id}]; \
                     a.resolve({result}); return 0;"
                ),
                Err((code, message)) => {
                    let error = json!({ "code": code, "message": message });
                    format!(
                        "var a = window.__wallet.answers[{id}]; delete window.__wallet.answers[{id}]; \
                         var e = new Error({message}); e.code = {code}; a.reject(e); return 0;",
                        message = error["message"],
                        code = error["code"]
                    )
                }
            };
            browser.eval(&script);
            served.push(request);
        }
        served
    }
}
