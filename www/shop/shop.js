// The demo shop's buttons: a merchant page binding checkout.js to two products. A file of its
// own rather than an inline script, so the shop's policy allows scripts from this origin only, as
// a merchant's strict policy would (see docs/API.md, "checkout.js on a page with a CSP").
// The shop's own order ids; each is also the idempotency key, so a retry of the same order
// never makes a second payment.
var stamp = Date.now().toString(36);
var thanks = new URL("/shop/thanks", location.href).href;
Payrail.checkout({
  publicKey: "pk_live_demoAlpineOutfitters0000",
  amount: 149.90,
  currency: "EUR",
  title: "Trail boots",
  externalReference: "AO-" + stamp + "-boots",
  idempotencyKey: "AO-" + stamp + "-boots",
  redirectUrl: thanks + "?order=AO-" + stamp + "-boots",
  openInNewTab: false,
  allowCrypto: true
}, "#buy-boots");
Payrail.checkout({
  publicKey: "pk_live_demoAlpineOutfitters0000",
  amount: 229,
  currency: "EUR",
  title: "Down jacket",
  externalReference: "AO-" + stamp + "-jacket",
  idempotencyKey: "AO-" + stamp + "-jacket",
  redirectUrl: thanks + "?order=AO-" + stamp + "-jacket",
  openInNewTab: true,
  allowCrypto: true
}, "#buy-jacket");
