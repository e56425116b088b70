// The hosted checkout page's one script (first-party, so the page keeps its strict CSP). While the
// payment is pending it:
// - asks for the status every two seconds (which also reads the chain), shows what the chain
//   says (waiting, received so far, confirming n/N, or checking while the node cannot be
//   reached) and reloads the page when the status changes;
// - counts the quote's time down (reloading when it is up, so the address is no longer shown),
//   announcing the time left now and then through the page's polite live region, and writes the
//   deadline in the customer's own time zone;
// - lets the address be copied;
// - offers "Pay with <wallet>" for each wallet the browser injects (EIP-6963 announcements, or
//   an older wallet's window.ethereum), and pays exactly the quoted transfer from it (EIP-1193):
//   account, chain (switched to, or added with the network's public RPC URL), balance check,
//   then the ERC-20 transfer or ether value to the deposit address.
// The words come from the page (data-page: the customer's language); the page works without
// this script: a <noscript> refresh takes its place, and the QR code stays the other way to pay.
// Once the payment is received it returns the customer to the shop after a few seconds, unless
// they choose to stay (the page says so and offers the button; without this script the link is
// the way back).
(function () {
  "use strict";
  var auto = document.getElementById("auto-return");
  var stay = document.getElementById("stay");
  if (!auto || !stay) return;
  var timer = setTimeout(function () {
    location.assign(auto.getAttribute("data-url"));
  }, Number(auto.getAttribute("data-seconds")) * 1000);
  auto.hidden = false;
  stay.addEventListener("click", function () {
    clearTimeout(timer);
    auto.hidden = true;
    var link = document.getElementById("return-link");
    if (link) link.focus();
  });
})();

(function () {
  "use strict";
  var status = document.getElementById("status");
  if (!status || status.getAttribute("data-status") !== "pending") return;
  var data = {};
  try {
    data = JSON.parse(document.getElementById("checkout-data").getAttribute("data-page")) || {};
  } catch (e) { /* English defaults below */ }
  var t = data.messages || {};
  var state = document.getElementById("chain-state");
  var announce = document.getElementById("time-announce");
  var countdown = document.getElementById("countdown");
  // Counted from this page's own load: the server says how many seconds were left when it
  // rendered the page, so a customer's clock that is off (a phone set 20 minutes fast) neither
  // ends the countdown early nor reloads the page again and again.
  var secondsLeft = Number(status.getAttribute("data-seconds-left")) || 0;
  var end = Date.now() + secondsLeft * 1000;
  var url = location.pathname.replace(/\/$/, "") + "/status";

  // A message with its {placeholders} filled.
  function say(template, values) {
    return String(template || "").replace(/\{(\w+)\}/g, function (whole, name) {
      return values && Object.prototype.hasOwnProperty.call(values, name) ? values[name] : whole;
    });
  }

  // Decimal text written the page language's way, every digit kept (never rounded).
  function number(text) {
    var format = data.number || { decimal: ".", group: ",", min_grouping: 1 };
    var parts = String(text).split(".");
    var whole = parts[0];
    if (!/^[0-9]+$/.test(whole)) return String(text);
    var grouped = whole.length >= 4 && whole.length >= 3 + format.min_grouping;
    var out = "";
    for (var i = 0; i < whole.length; i++) {
      if (grouped && i > 0 && (whole.length - i) % 3 === 0) out += format.group;
      out += whole.charAt(i);
    }
    return parts.length > 1 ? out + format.decimal + parts[1] : out;
  }

  function money(text, code) {
    return say(data.money || "{amount} {currency}", { amount: number(text), currency: code });
  }

  // Base units (a BigInt) as exact decimal text.
  function units(value, decimals) {
    var digits = value.toString();
    if (!decimals) return digits;
    while (digits.length <= decimals) digits = "0" + digits;
    var whole = digits.slice(0, digits.length - decimals);
    var fraction = digits.slice(digits.length - decimals).replace(/0+$/, "");
    return fraction ? whole + "." + fraction : whole;
  }

  function describe(chain) {
    var waiting = Date.now() >= end ? t.time_up : t.waiting;
    if (!chain) return waiting;
    if (chain.node_unreachable && chain.state !== "confirming") return t.checking;
    if (chain.state === "valuing") return t.valuing;
    if (chain.state === "confirming") {
      return say(t.confirming, { confirmations: chain.confirmations, required: chain.required });
    }
    if (chain.state === "waiting" && Number(chain.received) > 0) {
      return say(t.partial, { received: money(chain.received, data.currency || "") });
    }
    return waiting;
  }

  var timer = setInterval(function () {
    fetch(url, { cache: "no-store", credentials: "omit" })
      .then(function (response) {
        // A failed poll (an error answer, a network hiccup) says nothing about the payment: it
        // must not reload the page, which would offer the wallet buttons again after a send.
        if (!response.ok) throw new Error("status " + response.status);
        return response.json();
      })
      .then(function (body) {
        if (!body || typeof body.status !== "string") return;
        if (body.status !== "pending") {
          clearInterval(timer);
          location.reload();
          return;
        }
        if (state) {
          var text = describe(body.chain);
          // Only a change is written, so the live region announces news, not every poll.
          if (state.textContent !== text) state.textContent = text;
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
      // The visible countdown is not live (a screen reader would read it every second): the
      // time left is announced every five minutes and at the last minute.
      if (announce && left > 0 && (left % 300 === 0 || left === 60)) {
        announce.textContent = left === 60
          ? t.one_minute_left
          : say(t.minutes_left, { minutes: left / 60 });
      }
      // Time is up: the page without the address, which only waits for the chain. Only a page
      // that had time left when it loaded reloads, so a reload can never follow a reload.
      if (left === 0 && secondsLeft > 0) {
        secondsLeft = 0;
        location.reload();
      }
    };
    tick();
    setInterval(tick, 1000);
  }

  var deadline = document.getElementById("pay-by");
  if (deadline && window.Intl && Intl.DateTimeFormat) {
    try {
      deadline.textContent = new Intl.DateTimeFormat(data.lang || "en", {
        dateStyle: "medium", timeStyle: "short"
      }).format(new Date(end));
    } catch (e) { /* the server's UTC text stays */ }
  }

  var copy = document.getElementById("copy-address");
  if (copy && navigator.clipboard) {
    copy.hidden = false;
    copy.addEventListener("click", function () {
      navigator.clipboard.writeText(copy.getAttribute("data-copy")).then(function () {
        copy.textContent = t.copied || "Copied";
      });
    });
  }

  // --- Paying from a wallet in this browser (EIP-1193) ---
  var payment = data.payment;
  var box = document.getElementById("wallets");
  var walletState = document.getElementById("wallet-state");
  var walletError = document.getElementById("wallet-error");
  if (!payment || !box || !walletState || !walletError) return;
  var offered = [];
  var busy = false;
  var sent = false;

  function buttons(disabled) {
    for (var i = 0; i < offered.length; i++) offered[i].button.disabled = disabled;
  }

  function offer(name, provider) {
    if (!provider || typeof provider.request !== "function") return;
    for (var i = 0; i < offered.length; i++) if (offered[i].provider === provider) return;
    var label = String(name || t.a_browser_wallet).slice(0, 40);
    var button = document.createElement("button");
    button.type = "button";
    button.className = "wallet";
    button.textContent = say(t.pay_with, { wallet: label });
    button.addEventListener("click", function () { pay(label, provider); });
    offered.push({ provider: provider, button: button });
    box.appendChild(button);
    box.hidden = false;
    if (busy || sent) button.disabled = true;
  }

  // A wallet that predates EIP-6963 only sets window.ethereum; its flags tell its name.
  function legacyName(provider) {
    if (provider.isRabby) return "Rabby";
    if (provider.isCoinbaseWallet) return "Coinbase Wallet";
    if (provider.isBraveWallet) return "Brave Wallet";
    if (provider.isMetaMask) return "MetaMask";
    return t.a_browser_wallet;
  }

  window.addEventListener("eip6963:announceProvider", function (event) {
    var detail = event.detail;
    if (detail && detail.info && detail.provider) offer(detail.info.name, detail.provider);
  });
  window.dispatchEvent(new Event("eip6963:requestProvider"));
  // Wallets answer the request at once; one that only set window.ethereum is offered once the
  // page has loaded and none announced itself.
  var legacy = function () {
    if (!offered.length && window.ethereum) offer(legacyName(window.ethereum), window.ethereum);
  };
  if (document.readyState === "complete") legacy();
  else window.addEventListener("load", legacy);

  function request(provider, method, params) {
    return Promise.resolve(provider.request({ method: method, params: params || [] }));
  }

  function word(hex) {
    return ("0000000000000000000000000000000000000000000000000000000000000000" + hex).slice(-64);
  }

  // A refusal of our own, with its message already in the customer's language.
  function Stop(message) { this.message = message; }

  function sameChain(id) {
    try { return BigInt(id) === BigInt(payment.chainId); } catch (e) { return false; }
  }

  // The payment's chain: switched to, or added when the wallet does not know it (4902).
  function onChain(provider, wallet) {
    var network = payment.chainName;
    var check = function () {
      return request(provider, "eth_chainId").then(function (id) {
        if (!sameChain(id)) throw new Stop(say(t.wrong_chain, { wallet: wallet, network: network }));
      });
    };
    return request(provider, "eth_chainId").then(function (id) {
      if (sameChain(id)) return null;
      return request(provider, "wallet_switchEthereumChain", [{ chainId: payment.chainId }])
        .catch(function (error) {
          var code = error && (error.code || (error.data && error.data.originalError &&
            error.data.originalError.code));
          if (code === 4902) {
            if (!payment.rpcUrls || !payment.rpcUrls.length) {
              throw new Stop(say(t.unknown_chain, { wallet: wallet, network: network }));
            }
            return request(provider, "wallet_addEthereumChain", [{
              chainId: payment.chainId,
              chainName: network,
              nativeCurrency: payment.nativeCurrency,
              rpcUrls: payment.rpcUrls
            }]);
          }
          if (code === 4001) throw new Stop(say(t.wrong_chain, { wallet: wallet, network: network }));
          throw error;
        })
        .then(check);
    });
  }

  function transaction(from) {
    var amount = BigInt(payment.amount);
    if (payment.token) {
      // ERC-20 transfer(address,uint256)
      return {
        from: from, to: payment.token, value: "0x0",
        data: "0xa9059cbb" + word(payment.to.slice(2).toLowerCase()) + word(amount.toString(16))
      };
    }
    return { from: from, to: payment.to, value: "0x" + amount.toString(16) };
  }

  // Refuses before the wallet is asked to send when the account cannot cover the payment, or
  // (when the fee can be estimated) the network fee.
  function funds(provider, from, tx) {
    var amount = BigInt(payment.amount);
    var coin = payment.nativeCurrency.symbol;
    var held = payment.token
      ? request(provider, "eth_call", [{ to: payment.token, data: "0x70a08231" + word(from.slice(2).toLowerCase()) }, "latest"])
      : request(provider, "eth_getBalance", [from, "latest"]);
    return held.then(function (balance) {
      balance = BigInt(balance === "0x" ? 0 : balance);
      if (balance < amount) {
        throw new Stop(say(t.low_balance, {
          balance: money(units(balance, payment.decimals), payment.asset),
          amount: money(units(amount, payment.decimals), payment.asset)
        }));
      }
      return Promise.all([
        request(provider, "eth_estimateGas", [tx]),
        request(provider, "eth_gasPrice"),
        request(provider, "eth_getBalance", [from, "latest"])
      ]).then(function (answers) {
        var fee = BigInt(answers[0]) * BigInt(answers[1]);
        var ether = BigInt(answers[2]);
        var needed = fee + (payment.token ? BigInt(0) : amount);
        if (ether < needed) {
          throw new Stop(say(t.low_fee, {
            balance: money(units(ether, 18), coin), fee: money(units(fee, 18), coin), coin: coin
          }));
        }
      }, function () { /* no estimate: the wallet shows the fee itself */ });
    });
  }

  function pay(wallet, provider) {
    if (busy || sent) return;
    busy = true;
    buttons(true);
    walletError.textContent = "";
    walletState.textContent = say(t.asking, { wallet: wallet });
    var tx;
    request(provider, "eth_requestAccounts")
      .then(function (accounts) {
        if (!accounts || !accounts.length) throw new Stop(say(t.no_account, { wallet: wallet }));
        tx = transaction(String(accounts[0]));
        return onChain(provider, wallet);
      })
      .then(function () { return funds(provider, tx.from, tx); })
      .then(function () { return request(provider, "eth_sendTransaction", [tx]); })
      .then(function (hash) {
        sent = true;
        busy = false;
        walletState.textContent = say(t.sent, { wallet: wallet, hash: String(hash) });
        walletState.setAttribute("data-hash", String(hash));
      })
      .catch(function (error) {
        busy = false;
        buttons(false);
        walletState.textContent = "";
        var code = error && error.code;
        var message;
        if (error instanceof Stop) message = error.message;
        else if (code === 4001) message = say(t.rejected, { wallet: wallet });
        else if (code === -32002) message = say(t.busy, { wallet: wallet });
        else {
          var reason = String((error && error.message) || error || "").slice(0, 160);
          message = say(t.failed, { wallet: wallet, reason: reason });
        }
        walletError.textContent = message;
      });
  }
})();
