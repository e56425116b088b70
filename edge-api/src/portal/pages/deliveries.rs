//! `/portal/deliveries`: one delivery of a webhook event with its attempts, and resending it.

use maud::html;
use shared_types::ErrorCode;

use super::layout::{error_box, layout, page, Call};
use crate::http::see_other;
use crate::portal::deliveries;
use crate::route::Answer;

/// `GET /portal/deliveries/{id}`.
pub(super) async fn show(c: Call<'_>, id: &str) -> Answer {
    let portal = &c.portal;
    let d = deliveries::detail(portal, id).await?;
    let text = |v: &serde_json::Value| {
        v.as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| v.to_string())
    };
    page(
        200,
        layout(
            "Delivery",
            Some(portal),
            html! {
                section {
                    p { a href=(format!("/portal/webhooks/{}", text(&d["endpoint_id"]))) { "← Endpoint" } }
                    h1 { "Delivery " code { (text(&d["id"])) } }
                    p.muted { (text(&d["event_type"])) " · event " code { (text(&d["event_id"])) } " · " (text(&d["status"])) }
                    table {
                        thead { tr { th { "#" } th { "Started" } th { "Outcome" } th { "Status" } th { "Latency" } th { "Next attempt" } th { "Response (first 4 KB)" } } }
                        tbody {
                            @for a in d["attempts"].as_array().into_iter().flatten() {
                                tr {
                                    td { (text(&a["attempt"])) }
                                    td { (text(&a["started_at"])) }
                                    td { (text(&a["outcome"])) }
                                    td { (text(&a["status_code"])) }
                                    td { (text(&a["latency_ms"])) " ms" }
                                    td { (text(&a["next_attempt_at"])) }
                                    td { code { (text(&a["response_body"])) } }
                                }
                            }
                        }
                    }
                    h2 { "Body" }
                    pre { code { (text(&d["payload"])) } }
                }
            },
        ),
    )
}

/// `POST /portal/deliveries/{id}/resend`: back to the endpoint, or a page saying why not.
pub(super) async fn resend(c: Call<'_>, id: &str) -> Answer {
    match deliveries::resend(&c.portal, id).await {
        Ok(d) => see_other(c.url, &format!("/portal/webhooks/{}", d.endpoint_id)),
        Err(err) if err.code == ErrorCode::Conflict => page(
            409,
            layout(
                "Resend refused",
                Some(&c.portal),
                html! {
                    section { h1 { "Resend refused" } (error_box(Some(&err.description)))
                        p { a href="/portal/webhooks" { "Back to the endpoints" } } }
                },
            ),
        ),
        Err(err) => Err(err),
    }
}
