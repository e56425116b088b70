// checkout.js: Payrail.checkout(options, selector) for a merchant's page. A classic script: the
// wasm-bindgen glue (--target no-modules) is pasted below, inside this function, so nothing but
// `Payrail` reaches the page's globals. The .wasm is fetched next to this script; calls made
// before it is ready wait in a queue and run once it is; `Payrail.ready` settles then.
(function () {
  "use strict";
  var script = document.currentScript;
  var base = new URL(".", script.src).href.replace(/\/$/, "");
  var pending = [];
  var Payrail = window.Payrail || (window.Payrail = {});
  Payrail.checkout = function (options, selector) {
    pending.push([options, selector]);
  };

  /* wasm-bindgen glue */

  Payrail.ready = wasm_bindgen({ module_or_path: new URL("checkout_bg.wasm", script.src) }).then(
    function () {
      Payrail.checkout = function (options, selector) {
        try {
          wasm_bindgen.checkout(options, selector, base);
        } catch (e) {
          console.error("Payrail checkout: " + e);
        }
      };
      pending.splice(0).forEach(function (call) {
        Payrail.checkout(call[0], call[1]);
      });
    },
    function (e) {
      console.error("Payrail checkout: could not load (" + e + ")");
    }
  );
})();
