//! HTML documents and their responses: the one head every page shares and the security headers
//! every page gets, and QR codes drawn as SVG. maud escapes every interpolated value.

use maud::{html, Markup, PreEscaped, DOCTYPE};
use worker::Response;

use crate::error::{ApiError, OrInternal};

/// An HTML response with the headers every page gets and this `Referrer-Policy`. (Checkout pages
/// send `no-referrer`: their URL is the customer's capability. The portal sends `same-origin`:
/// with `no-referrer` browsers send `Origin: null` on form posts, and the portal checks the
/// origin of every change.)
pub fn page(status: u16, markup: Markup, referrer: &str) -> Result<Response, ApiError> {
    let response = Response::from_html(markup.into_string())
        .or_internal("build page")?
        .with_status(status);
    let headers = response.headers();
    for (name, value) in [
        (
            "Content-Security-Policy",
            "default-src 'none'; script-src 'self'; connect-src 'self'; \
             style-src 'unsafe-inline'; form-action 'self'; base-uri 'none'; \
             frame-ancestors 'none'",
        ),
        // `frame-ancestors` above for today's browsers; this for those that predate it.
        ("X-Frame-Options", "DENY"),
        ("X-Content-Type-Options", "nosniff"),
        ("Referrer-Policy", referrer),
        ("Cache-Control", "no-store"),
    ] {
        headers.set(name, value).or_internal("set header")?;
    }
    Ok(response)
}

/// A whole page in English: doctype, the head every page shares (with `extra` in it), and
/// `body`.
pub fn document(title: &str, style: &str, extra: Markup, body: Markup) -> Markup {
    document_in("en", title, style, extra, body)
}

/// A whole page in `language` (a BCP 47 tag).
pub fn document_in(
    language: &str,
    title: &str,
    style: &str,
    extra: Markup,
    body: Markup,
) -> Markup {
    html! {
        (DOCTYPE)
        html lang=(language) {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="robots" content="noindex";
                title { (title) }
                style { (PreEscaped(style)) }
                (extra)
            }
            body { (body) }
        }
    }
}

/// `text` (a payment request, an address) as a QR code: an SVG drawn here, no third-party
/// script or image. `None` when it is too long for one.
pub fn qr_svg(text: &str) -> Option<String> {
    let code = qrcode::QrCode::new(text.as_bytes()).ok()?;
    Some(
        code.render::<qrcode::render::svg::Color<'_>>()
            .min_dimensions(208, 208)
            .quiet_zone(true)
            .build(),
    )
}
