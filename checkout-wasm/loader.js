// checkout.js: Payrail.checkout(options, selector) for a merchant's page. A classic script:
// scripts/build-checkout bundles this module with the wasm-bindgen glue (--target web) into one
// function, so nothing but `Payrail` reaches the page's globals, and leaves out the glue's
// loading code this does not use. The .wasm is fetched next to this script and compiled while it
// downloads; calls made before it is ready wait in a queue and run once it is; `Payrail.ready`
// settles then.
import { initSync, checkout } from "./checkout_wasm.js";

var script = document.currentScript;
var base = new URL(".", script.src).href.replace(/\/$/, "");
var pending = [];
var Payrail = window.Payrail || (window.Payrail = {});
Payrail.checkout = function (options, selector) {
  pending.push([options, selector]);
};

Payrail.ready = WebAssembly.compileStreaming(fetch(new URL("checkout_bg.wasm", script.src)))
  .then(function (module) {
    initSync({ module: module });
    Payrail.checkout = function (options, selector) {
      try {
        checkout(options, selector, base);
      } catch (e) {
        console.error("Payrail checkout: " + e);
      }
    };
    pending.splice(0).forEach(function (call) {
      Payrail.checkout(call[0], call[1]);
    });
  })
  .catch(function (e) {
    console.error("Payrail checkout: could not load (" + e + ")");
  });
