//! `checkout.js`: `Payrail.checkout(options, selector)` binds Payrail checkout to a merchant's
//! button. The options are checked with the server's own rules (`shared-types`) before anything
//! is sent; a bad option is one console error naming it, and the button is left alone.
//!
//! A click creates a checkout session (`POST {base}/checkout/sessions`) and sends the customer to
//! the hosted page, in the same tab or in a tab opened inside the click so popup blockers allow
//! it. The button is disabled while the session is created, so a double click makes one payment.
//!
//! Nothing here throws into the merchant's page: every failure is logged with `console.error`.
//!
//! Built for the browser without std (`--no-default-features`, see the crate's `std` feature):
//! std's panic and formatting machinery were most of the module. Nothing here formats (no
//! `format!`, no `{}`): messages are joined from pieces.

#![cfg_attr(not(feature = "std"), no_std)]

extern crate alloc;

use alloc::borrow::ToOwned;
use alloc::boxed::Box;
use alloc::rc::Rc;
use alloc::string::String;
use core::cell::Cell;

use shared_types::checkout::{self, CheckoutOptions, OPTION_NAMES};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::{Element, Event, Window};

// Talc instead of dlmalloc: a fraction of its size in the module, for a script that allocates
// little. Each time it runs out it claims a new heap from `memory.grow` rather than extending
// the last one: a little more fragmentation, a little less code.
#[cfg(target_family = "wasm")]
#[global_allocator]
static ALLOCATOR: talc::cell::TalcSyncCell<talc::wasm::WasmGrowAndClaim, talc::wasm::WasmBinning> =
    talc::cell::TalcSyncCell::new_wasm(talc::wasm::WasmGrowAndClaim);

/// A panic (a bug: nothing here should panic) traps, so the call into the module throws a
/// `RuntimeError`, which the loader catches and logs. No message: formatting it would bring
/// `core::fmt` back.
#[cfg(all(target_arch = "wasm32", not(feature = "std")))]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    core::arch::wasm32::unreachable()
}

const PREFIX: &str = "Payrail checkout: ";

/// Joins message pieces, without `concat` or `join` (whose panic paths would bring `core::fmt`
/// into the module).
fn join(pieces: &[&str]) -> String {
    let mut text = String::new();
    for piece in pieces {
        text.push_str(piece);
    }
    text
}

fn log_error(message: &str) {
    web_sys::console::error_1(&JsValue::from_str(&join(&[PREFIX, message])));
}

#[wasm_bindgen]
extern "C" {
    // The page's globals, reached by name: cheaper than finding `window` first.

    /// `document.querySelector(selector)`; throws for an invalid selector.
    #[wasm_bindgen(js_namespace = document, js_name = querySelector, catch)]
    fn query_selector(selector: &str) -> Result<Option<Element>, JsValue>;

    /// `open(url, target)`: the new tab, or `null` when a blocker stopped it.
    #[wasm_bindgen(js_name = open, catch)]
    fn open_tab(url: &str, target: &str) -> Result<Option<Window>, JsValue>;

    /// `location.assign(url)`: leaves the page.
    #[wasm_bindgen(js_namespace = location, js_name = assign, catch)]
    fn leave_for(url: &str) -> Result<(), JsValue>;

    /// `fetch(url, init)`, the page's own (so whatever wraps it sees the request).
    #[wasm_bindgen(js_name = fetch)]
    fn fetch(url: &str, init: &web_sys::RequestInit) -> js_sys::Promise;
}

/// Binds checkout to the element matching `selector`. `base_url` is the origin `checkout.js`
/// was loaded from. Called by the loader in `checkout.js`; never throws.
#[wasm_bindgen]
pub fn checkout(options: JsValue, selector: JsValue, base_url: String) {
    if let Err(message) = bind(&options, &selector, base_url) {
        log_error(&message);
    }
}

fn bind(options: &JsValue, selector: &JsValue, base_url: String) -> Result<(), String> {
    let options = read_options(options)?;
    options.validate().map_err(|e| e.message)?;
    let selector = selector
        .as_string()
        .ok_or("the second argument must be a CSS selector string, such as \"#pay\"")?;
    let button = query_selector(&selector)
        .map_err(|_| join(&["\"", &selector, "\" is not a valid CSS selector"]))?
        .ok_or_else(|| join(&["no element matches \"", &selector, "\""]))?;

    let busy = Rc::new(Cell::new(false));
    let target = button.clone();
    let on_click = Closure::<dyn FnMut(Event)>::new(move |event: Event| {
        event.prevent_default();
        if busy.replace(true) {
            return;
        }
        let _ = target.set_attribute("disabled", "");
        // A new tab must be opened inside the click, or popup blockers stop it.
        let tab = if options.open_in_new_tab {
            open_tab("", "_blank").ok().flatten()
        } else {
            None
        };
        let (target, busy) = (target.clone(), busy.clone());
        create_session(&base_url, &options, move |result| {
            finish(result, tab, &target, &busy)
        });
    });
    button
        .add_event_listener_with_callback("click", on_click.as_ref().unchecked_ref())
        .map_err(|_| "could not listen for clicks".to_owned())?;
    // The listener lives as long as the page, like the button it serves.
    on_click.forget();
    Ok(())
}

fn finish(
    result: Result<String, String>,
    tab: Option<Window>,
    button: &Element,
    busy: &Cell<bool>,
) {
    match (result, tab) {
        (Ok(url), Some(tab)) => {
            // The hosted page must not be able to reach back into the merchant's page.
            let _ = js_sys::Reflect::set(&tab, &"opener".into(), &JsValue::NULL);
            let _ = tab.location().set_href(&url);
            release(button, busy);
        }
        (Ok(url), None) => {
            // Leaving the page: the button stays disabled.
            if leave_for(&url).is_err() {
                log_error("could not open the checkout page");
                release(button, busy);
            }
        }
        (Err(message), tab) => {
            if let Some(tab) = tab {
                let _ = tab.close();
            }
            log_error(&message);
            release(button, busy);
        }
    }
}

fn release(button: &Element, busy: &Cell<bool>) {
    let _ = button.remove_attribute("disabled");
    busy.set(false);
}

/// The options as the session endpoint's JSON body (the spec's camelCase names), built with
/// the browser's own JSON: serde would cost more bytes than the rest of the script.
fn options_json(o: &CheckoutOptions) -> Option<String> {
    let object = js_sys::Object::new();
    let set = |name: &str, value: JsValue| {
        js_sys::Reflect::set(&object, &JsValue::from_str(name), &value).is_ok()
    };
    let text = |value: &str| JsValue::from_str(value);
    let all_set = set("publicKey", text(&o.public_key))
        && set("amount", text(&o.amount))
        && set("currency", text(&o.currency))
        && set("title", text(&o.title))
        && set("externalReference", text(&o.external_reference))
        && o.idempotency_key
            .as_deref()
            .is_none_or(|key| set("idempotencyKey", text(key)))
        && set("redirectUrl", text(&o.redirect_url))
        && set("openInNewTab", JsValue::from_bool(o.open_in_new_tab))
        && set("allowCrypto", JsValue::from_bool(o.allow_crypto));
    if !all_set {
        return None;
    }
    js_sys::JSON::stringify(&object).ok()?.as_string()
}

#[wasm_bindgen]
extern "C" {
    /// A promise, seen through `then` with one callback for either outcome: so a callback made
    /// with `Closure::once_into_js` is always called, and so freed.
    type Settling;

    #[wasm_bindgen(method)]
    fn then(this: &Settling, fulfilled: &JsValue, rejected: &JsValue);
}

/// Calls `callback` once `promise` settles, with its value or its rejection's reason. Boxed,
/// so that every callback shares one set of wasm-bindgen's closure shims.
fn when_settled(promise: &js_sys::Promise, callback: Box<dyn FnOnce(JsValue)>) {
    let callback = Closure::once_into_js(callback);
    promise
        .unchecked_ref::<Settling>()
        .then(&callback, &callback);
}

const UNREACHABLE: &str = "could not reach Payrail; check the connection and try again";

/// Creates the session, then calls `done` with the hosted page's URL or a message for the
/// console. Promises and callbacks rather than an async fn: an executor would cost more bytes
/// than the rest of the request.
fn create_session(
    base_url: &str,
    options: &CheckoutOptions,
    done: impl FnOnce(Result<String, String>) + 'static,
) {
    let request = match request(base_url, options) {
        Ok(request) => request,
        Err(message) => return done(Err(message.to_owned())),
    };
    when_settled(
        &request,
        Box::new(move |response| {
            // A rejection (the network failed) is no Response.
            let Ok(response) = response.dyn_into::<web_sys::Response>() else {
                return done(Err(UNREACHABLE.to_owned()));
            };
            let ok = response.ok();
            match response.text() {
                Ok(text) => when_settled(
                    &text,
                    Box::new(move |text| done(answer(ok, &text.as_string().unwrap_or_default()))),
                ),
                Err(_) => done(answer(ok, "")),
            }
        }),
    );
}

/// The session request, sent.
fn request(base_url: &str, options: &CheckoutOptions) -> Result<js_sys::Promise, &'static str> {
    let body = options_json(options).ok_or("could not encode the options")?;
    let init = web_sys::RequestInit::new();
    init.set_method("POST");
    let headers = js_sys::Object::new();
    js_sys::Reflect::set(
        &headers,
        &JsValue::from_str("Content-Type"),
        &JsValue::from_str("application/json"),
    )
    .map_err(|_| "could not build the request")?;
    init.set_headers(&headers);
    init.set_body(&JsValue::from_str(&body));
    let url = join(&[base_url, "/checkout/sessions"]);
    Ok(fetch(&url, &init))
}

/// The hosted page's URL from the session endpoint's answer, or a message for the console.
fn answer(ok: bool, text: &str) -> Result<String, String> {
    let json = js_sys::JSON::parse(text).unwrap_or(JsValue::NULL);
    // Read the one member needed rather than deserializing.
    let member = |name: &str| {
        js_sys::Reflect::get(&json, &JsValue::from_str(name))
            .ok()
            .and_then(|v| v.as_string())
    };
    if ok {
        member("url").ok_or_else(|| "unexpected answer from Payrail".to_owned())
    } else {
        Err(member("error_description")
            .unwrap_or_else(|| "the checkout could not be started".to_owned()))
    }
}

/// Reads the merchant's options object, naming the first option that is missing, unknown or of
/// the wrong type.
fn read_options(options: &JsValue) -> Result<CheckoutOptions, String> {
    if !options.is_object() {
        return Err("the first argument must be an options object".to_owned());
    }
    let object: &js_sys::Object = options.unchecked_ref();
    for key in js_sys::Object::keys(object).iter() {
        let key = key.as_string().unwrap_or_default();
        if !OPTION_NAMES.contains(&key.as_str()) {
            let mut message = join(&["unknown option \"", &key, "\"; the options are "]);
            for (index, name) in OPTION_NAMES.iter().enumerate() {
                if index > 0 {
                    message.push_str(", ");
                }
                message.push_str(name);
            }
            return Err(message);
        }
    }
    let get = |name: &str| {
        js_sys::Reflect::get(options, &JsValue::from_str(name))
            .ok()
            .filter(|v| !v.is_undefined() && !v.is_null())
    };
    let text = |name: &str, required: bool| -> Result<Option<String>, String> {
        match get(name) {
            None if required => Err(join(&[name, " is required"])),
            None => Ok(None),
            Some(v) => v
                .as_string()
                .map(Some)
                .ok_or_else(|| join(&[name, " must be a string"])),
        }
    };
    let flag = |name: &str, required: bool| -> Result<bool, String> {
        match get(name) {
            None if required => Err(join(&[name, " is required (true or false)"])),
            None => Ok(false),
            Some(v) => v
                .as_bool()
                .ok_or_else(|| join(&[name, " must be true or false"])),
        }
    };
    let amount = match get("amount") {
        None => return Err("amount is required".to_owned()),
        Some(v) => match v.as_f64() {
            // Number#toString gives the shortest text that reads back as the same number.
            Some(n) if n.is_finite() => js_sys::Number::from(n)
                .to_string_with_radix(10)
                .map(String::from)
                .map_err(|_| "amount must be a number")?,
            _ => return Err("amount must be a number, such as 19.99".to_owned()),
        },
    };
    let currency = text("currency", true)?.unwrap_or_default();
    checkout::check_currency(&currency).map_err(|e| e.message)?;
    Ok(CheckoutOptions {
        public_key: text("publicKey", true)?.unwrap_or_default(),
        amount,
        currency,
        title: text("title", true)?.unwrap_or_default(),
        external_reference: text("externalReference", true)?.unwrap_or_default(),
        idempotency_key: text("idempotencyKey", false)?,
        redirect_url: text("redirectUrl", true)?.unwrap_or_default(),
        open_in_new_tab: flag("openInNewTab", false)?,
        allow_crypto: flag("allowCrypto", true)?,
    })
}
