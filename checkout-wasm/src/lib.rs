//! `checkout.js`: `Payrail.checkout(options, selector)` binds Payrail checkout to a merchant's
//! button. The options are checked with the server's own rules (`shared-types`) before anything
//! is sent; a bad option is one console error naming it, and the button is left alone.
//!
//! A click creates a checkout session (`POST {base}/checkout/sessions`) and sends the customer to
//! the hosted page, in the same tab or in a tab opened inside the click so popup blockers allow
//! it. The button is disabled while the session is created, so a double click makes one payment.
//!
//! Nothing here throws into the merchant's page: every failure is logged with `console.error`.

use std::cell::Cell;
use std::rc::Rc;

use shared_types::checkout::{self, CheckoutOptions, OPTION_NAMES};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::{Element, Event, Window};

// Talc instead of the default dlmalloc: a fraction of its size in the module, for a script
// that allocates little.
#[cfg(target_family = "wasm")]
#[global_allocator]
static ALLOCATOR: talc::wasm::WasmDynamicTalc = talc::wasm::new_wasm_dynamic_allocator();

const PREFIX: &str = "Payrail checkout: ";

fn log_error(message: &str) {
    web_sys::console::error_1(&JsValue::from_str(&[PREFIX, message].concat()));
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
    let window = web_sys::window().ok_or("no window")?;
    let document = window.document().ok_or("no document")?;
    let button = document
        .query_selector(&selector)
        .map_err(|_| ["\"", &selector, "\" is not a valid CSS selector"].concat())?
        .ok_or_else(|| ["no element matches \"", &selector, "\""].concat())?;

    let busy = Rc::new(Cell::new(false));
    let target = button.clone();
    let on_click = Closure::<dyn Fn(Event)>::new(move |event: Event| {
        event.prevent_default();
        if busy.replace(true) {
            return;
        }
        let _ = target.set_attribute("disabled", "");
        // A new tab must be opened inside the click, or popup blockers stop it.
        let tab = if options.open_in_new_tab {
            window.open_with_url_and_target("", "_blank").ok().flatten()
        } else {
            None
        };
        let (options, base_url, window, target, busy) = (
            options.clone(),
            base_url.clone(),
            window.clone(),
            target.clone(),
            busy.clone(),
        );
        wasm_bindgen_futures::spawn_local(async move {
            let result = create_session(&base_url, &options).await;
            finish(result, &window, tab, &target, &busy);
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
    window: &Window,
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
            if window.location().set_href(&url).is_err() {
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

/// Creates the session; returns the hosted page's URL or a message for the console.
async fn create_session(base_url: &str, options: &CheckoutOptions) -> Result<String, String> {
    let body = options_json(options).ok_or("could not encode the options")?;
    let unreachable = "could not reach Payrail; check the connection and try again";
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
    let window = web_sys::window().ok_or("no window")?;
    let url = [base_url, "/checkout/sessions"].concat();
    let response: web_sys::Response =
        wasm_bindgen_futures::JsFuture::from(window.fetch_with_str_and_init(&url, &init))
            .await
            .map_err(|_| unreachable)?
            .dyn_into()
            .map_err(|_| unreachable)?;
    let ok = response.ok();
    let text = match response.text() {
        Ok(promise) => wasm_bindgen_futures::JsFuture::from(promise)
            .await
            .ok()
            .and_then(|t| t.as_string())
            .unwrap_or_default(),
        Err(_) => String::new(),
    };
    let json = js_sys::JSON::parse(&text).unwrap_or(JsValue::NULL);
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
            return Err([
                "unknown option \"",
                &key,
                "\"; the options are ",
                &OPTION_NAMES.join(", "),
            ]
            .concat());
        }
    }
    let get = |name: &str| {
        js_sys::Reflect::get(options, &JsValue::from_str(name))
            .ok()
            .filter(|v| !v.is_undefined() && !v.is_null())
    };
    let text = |name: &str, required: bool| -> Result<Option<String>, String> {
        match get(name) {
            None if required => Err([name, " is required"].concat()),
            None => Ok(None),
            Some(v) => v
                .as_string()
                .map(Some)
                .ok_or_else(|| [name, " must be a string"].concat()),
        }
    };
    let flag = |name: &str, required: bool| -> Result<bool, String> {
        match get(name) {
            None if required => Err([name, " is required (true or false)"].concat()),
            None => Ok(false),
            Some(v) => v
                .as_bool()
                .ok_or_else(|| [name, " must be true or false"].concat()),
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
