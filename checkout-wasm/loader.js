// checkout.js: Payrail.checkout(options, selector) binds Payrail checkout to a merchant's button.
// A classic script: scripts/build-checkout bundles this module with the wasm-bindgen glue
// (--target web) into one function, so nothing but `Payrail` reaches the page's globals, and
// leaves out the glue's loading code this does not use.
//
// The options are checked by the wasm module with the server's own rules (shared-types) before
// anything is sent; a bad option is one console error naming it, and the button is left alone.
// A click creates a checkout session (POST {base}/checkout/sessions) and sends the customer to
// the hosted page, in the same tab or in a tab opened inside the click so popup blockers allow
// it. The button is disabled while the session is created, so a double click makes one payment.
// Nothing here throws into the merchant's page: every failure is logged with console.error.
//
// The .wasm is fetched next to this script and compiled while it downloads; calls made before it
// is ready wait in a queue and run once it is; `Payrail.ready` settles then.
import { initSync, body as checkedBody } from "./checkout_wasm.js";

var script = document.currentScript;
var base = new URL(".", script.src).href.replace(/\/$/, "");
var pending = [];
var Payrail = window.Payrail || (window.Payrail = {});
var UNREACHABLE = "could not reach Payrail; check the connection and try again";

function logError(message) {
  console.error("Payrail checkout: " + message);
}

// The hosted page's URL from the session endpoint's answer, or throws the message to log.
function hostedUrl(response, text) {
  var json = null;
  try {
    json = JSON.parse(text);
  } catch (e) {}
  var member = function (name) {
    var value = json && json[name];
    return typeof value === "string" ? value : null;
  };
  if (response.ok) {
    if (member("url")) return member("url");
    throw "unexpected answer from Payrail";
  }
  throw member("error_description") || "the checkout could not be started";
}

function bind(options, selector) {
  var body = checkedBody(options);
  if (typeof selector !== "string") {
    throw 'the second argument must be a CSS selector string, such as "#pay"';
  }
  var button;
  try {
    button = document.querySelector(selector);
  } catch (e) {
    throw '"' + selector + '" is not a valid CSS selector';
  }
  if (!button) throw 'no element matches "' + selector + '"';
  // Checked by the rules: true, false or absent.
  var newTab = options.openInNewTab === true;
  var busy = false;
  var release = function () {
    button.removeAttribute("disabled");
    busy = false;
  };
  button.addEventListener("click", function (event) {
    event.preventDefault();
    if (busy) return;
    busy = true;
    button.setAttribute("disabled", "");
    // A new tab must be opened inside the click, or popup blockers stop it.
    var tab = newTab ? open("", "_blank") : null;
    fetch(base + "/checkout/sessions", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: body,
    })
      .then(
        function (response) {
          return response
            .text()
            .catch(function () {
              return "";
            })
            .then(function (text) {
              return hostedUrl(response, text);
            });
        },
        function () {
          throw UNREACHABLE;
        }
      )
      .then(function (url) {
        if (tab) {
          // The hosted page must not be able to reach back into the merchant's page.
          tab.opener = null;
          tab.location.href = url;
          release();
        } else {
          // Leaving the page: the button stays disabled.
          try {
            location.assign(url);
          } catch (e) {
            throw "could not open the checkout page";
          }
        }
      })
      .catch(function (message) {
        if (tab) tab.close();
        logError(message);
        release();
      });
  });
}

Payrail.checkout = function (options, selector) {
  pending.push([options, selector]);
};

Payrail.ready = WebAssembly.compileStreaming(fetch(new URL("checkout_bg.wasm", script.src)))
  .then(function (module) {
    initSync({ module: module });
    Payrail.checkout = function (options, selector) {
      try {
        bind(options, selector);
      } catch (e) {
        logError(e);
      }
    };
    pending.splice(0).forEach(function (call) {
      Payrail.checkout(call[0], call[1]);
    });
  })
  .catch(function (e) {
    logError("could not load (" + e + ")");
  });
