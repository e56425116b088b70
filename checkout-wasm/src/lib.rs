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

use shared_types::checkout::{CheckoutOptions, OPTION_NAMES};
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
    let (options, body) = read_options(options)?;
    options.validate().map_err(|e| e.message)?;
    let open_in_new_tab = options.open_in_new_tab;
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
        let tab = if open_in_new_tab {
            open_tab("", "_blank").ok().flatten()
        } else {
            None
        };
        let (target, busy) = (target.clone(), busy.clone());
        create_session(&base_url, &body, move |result| {
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
    body: &str,
    done: impl FnOnce(Result<String, String>) + 'static,
) {
    let request = match request(base_url, body) {
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
fn request(base_url: &str, body: &str) -> Result<js_sys::Promise, &'static str> {
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
    init.set_body(&JsValue::from_str(body));
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

/// How an option is read: its JavaScript type, and whether it must be there.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Text,
    Number,
    Flag,
}

/// The options (in [`OPTION_NAMES`]' order), each with its kind and whether it is required.
const READ: [(&str, Kind, bool); 10] = [
    ("publicKey", Kind::Text, true),
    ("amount", Kind::Number, true),
    ("currency", Kind::Text, true),
    ("title", Kind::Text, true),
    ("externalReference", Kind::Text, true),
    ("idempotencyKey", Kind::Text, false),
    ("redirectUrl", Kind::Text, true),
    ("openInNewTab", Kind::Flag, false),
    ("allowCrypto", Kind::Flag, true),
    ("locale", Kind::Text, false),
];

/// Reads the merchant's options object, naming the first option that is missing, unknown or of
/// the wrong type. Returns the options and the session endpoint's JSON body (the spec's
/// camelCase names, the amount as decimal text), made by the browser's own JSON: serde would
/// cost more bytes than the rest of the script. One loop over a table, not a reader per option:
/// the module is smaller so.
fn read_options(options: &JsValue) -> Result<(CheckoutOptions, String), String> {
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
    // Each option's value as sent (`None`: absent), in READ's order.
    let mut values: [Option<JsValue>; READ.len()] = Default::default();
    let body = js_sys::Object::new();
    for ((name, kind, required), slot) in READ.into_iter().zip(values.iter_mut()) {
        let value = js_sys::Reflect::get(options, &JsValue::from_str(name))
            .ok()
            .filter(|v| !v.is_undefined() && !v.is_null());
        let Some(value) = value else {
            if required {
                let flag = if kind == Kind::Flag {
                    " (true or false)"
                } else {
                    ""
                };
                return Err(join(&[name, " is required", flag]));
            }
            continue;
        };
        let value = match kind {
            Kind::Text if value.is_string() => value,
            Kind::Text => return Err(join(&[name, " must be a string"])),
            Kind::Flag if value.as_bool().is_some() => value,
            Kind::Flag => return Err(join(&[name, " must be true or false"])),
            // Number#toString gives the shortest text that reads back as the same number.
            Kind::Number => match value.as_f64() {
                Some(n) if n.is_finite() => js_sys::Number::from(n)
                    .to_string_with_radix(10)
                    .map_err(|_| join(&[name, " must be a number"]))?
                    .into(),
                _ => return Err(join(&[name, " must be a number, such as 19.99"])),
            },
        };
        js_sys::Reflect::set(&body, &JsValue::from_str(name), &value)
            .map_err(|_| "could not encode the options")?;
        *slot = Some(value);
    }
    let body = js_sys::JSON::stringify(&body)
        .ok()
        .and_then(|text| text.as_string())
        .ok_or("could not encode the options")?;
    let [public_key, amount, currency, title, external_reference, idempotency_key, redirect_url, open_in_new_tab, allow_crypto, locale] =
        values;
    let text = |value: Option<JsValue>| value.and_then(|v| v.as_string());
    let flag = |value: Option<JsValue>| value.and_then(|v| v.as_bool()).unwrap_or(false);
    let options = CheckoutOptions {
        public_key: text(public_key).unwrap_or_default(),
        amount: text(amount).unwrap_or_default(),
        currency: text(currency).unwrap_or_default(),
        title: text(title).unwrap_or_default(),
        external_reference: text(external_reference).unwrap_or_default(),
        idempotency_key: text(idempotency_key),
        redirect_url: text(redirect_url).unwrap_or_default(),
        open_in_new_tab: flag(open_in_new_tab),
        allow_crypto: flag(allow_crypto),
        locale: text(locale),
    };
    Ok((options, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_options_read_are_the_shared_option_names() {
        let read: Vec<&str> = READ.iter().map(|(name, _, _)| *name).collect();
        assert_eq!(read, OPTION_NAMES);
    }
}
