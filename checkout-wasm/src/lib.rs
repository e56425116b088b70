//! `checkout.js`'s module: reads the merchant's `Payrail.checkout` options and checks them
//! with the server's own rules (`shared-types`) before anything is sent, so a bad option is
//! named in the browser exactly as the server would name it. It answers the session request's
//! JSON body, or the message naming the first bad option.
//!
//! The rest of checkout.js is its loader (`loader.js`): it binds the button, creates the session
//! (`POST {base}/checkout/sessions`) and sends the customer to the hosted page. That is DOM and
//! network plumbing, a few dozen lines of JavaScript; made in Rust through wasm-bindgen it cost
//! several times their size (closures, promises and their glue), for no rule of ours.
//!
//! Built for the browser without std (`--no-default-features`, see the crate's `std` feature):
//! std's panic and formatting machinery were most of the module. Nothing here formats (no
//! `format!`, no `{}`): messages are joined from pieces.

#![cfg_attr(not(feature = "std"), no_std)]

extern crate alloc;

use alloc::borrow::ToOwned;
use alloc::string::String;

use shared_types::checkout::{CheckoutOptions, OPTION_NAMES};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

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

/// Joins message pieces, without `concat` or `join` (whose panic paths would bring `core::fmt`
/// into the module).
fn join(pieces: &[&str]) -> String {
    let mut text = String::new();
    for piece in pieces {
        text.push_str(piece);
    }
    text
}

/// The merchant's options checked by the checkout rules: the session request's JSON body, or
/// (thrown) the message naming the first option that is missing, unknown, of the wrong type or
/// refused by a rule. Called by the loader in `checkout.js`.
#[wasm_bindgen]
pub fn body(options: JsValue) -> Result<String, String> {
    let (options, body) = read_options(&options)?;
    options.validate().map_err(|e| e.message)?;
    Ok(body)
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
