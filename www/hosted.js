// The hosted checkout page's one script: while the payment is pending, ask for its status every
// two seconds and reload the page when it changes (the page itself has no other script, and
// works without this one through a <noscript> refresh).
(function () {
  "use strict";
  var status = document.getElementById("status");
  if (!status || status.getAttribute("data-status") !== "pending") return;
  var url = location.pathname.replace(/\/$/, "") + "/status";
  var timer = setInterval(function () {
    fetch(url, { cache: "no-store", credentials: "omit" })
      .then(function (response) { return response.json(); })
      .then(function (body) {
        if (body.status !== "pending") {
          clearInterval(timer);
          location.reload();
        }
      })
      .catch(function () { /* try again at the next tick */ });
  }, 2000);
})();
