// The hosted checkout page's one script. While the payment is pending it asks for the status
// every two seconds (which also reads the chain), shows what the chain says (waiting, received
// so far, confirming n/N, or checking while the node cannot be reached) and reloads the page when
// the status changes; it counts the quote's time down (reloading when it is up, so the address
// is no longer shown), and lets the address be copied. The page works without it: a <noscript>
// refresh takes its place.
(function () {
  "use strict";
  var status = document.getElementById("status");
  if (!status || status.getAttribute("data-status") !== "pending") return;
  var state = document.getElementById("chain-state");
  var countdown = document.getElementById("countdown");
  var end = Number(status.getAttribute("data-expires-at")) * 1000;
  var url = location.pathname.replace(/\/$/, "") + "/status";

  function describe(chain) {
    var waiting = Date.now() >= end
      ? "The time to pay is up. Checking the network for a payment sent before the end."
      : "Waiting for your payment.";
    if (!chain) return waiting;
    if (chain.node_unreachable && chain.state !== "confirming") {
      return "Checking the network for your payment…";
    }
    if (chain.state === "confirming") {
      return "Payment detected: confirming " + chain.confirmations + "/" + chain.required + ".";
    }
    if (chain.state === "waiting" && Number(chain.received) > 0) {
      return "Received part of the amount (worth " + chain.received +
        "). Send the rest to the same address.";
    }
    return waiting;
  }

  var timer = setInterval(function () {
    fetch(url, { cache: "no-store", credentials: "omit" })
      .then(function (response) { return response.json(); })
      .then(function (body) {
        if (body.status !== "pending") {
          clearInterval(timer);
          location.reload();
          return;
        }
        if (state) {
          state.textContent = describe(body.chain);
          state.setAttribute("data-state", body.chain ? body.chain.state : "waiting");
        }
      })
      .catch(function () { /* try again at the next tick */ });
  }, 2000);

  if (countdown) {
    var tick = function () {
      var left = Math.max(0, Math.floor((end - Date.now()) / 1000));
      var seconds = left % 60;
      countdown.textContent = Math.floor(left / 60) + ":" + (seconds < 10 ? "0" : "") + seconds;
      // Time is up: the page without the address, which only waits for the chain.
      if (left === 0) location.reload();
    };
    tick();
    setInterval(tick, 1000);
  }

  var copy = document.getElementById("copy-address");
  if (copy && navigator.clipboard) {
    copy.hidden = false;
    copy.addEventListener("click", function () {
      navigator.clipboard.writeText(copy.getAttribute("data-copy")).then(function () {
        copy.textContent = "Copied";
      });
    });
  }
})();
