//! The webhook pages: endpoints, one endpoint (secret, edit, rotation, delivery log), one
//! delivery with its attempts, notifications.

use maud::{html, Markup};
use shared_types::lifecycle::EventType;
use shared_types::EndpointStatus;
use worker::Response;

use super::layout::{csrf_field, error_box, layout, page, secret_box};
use crate::error::ApiError;
use crate::portal::deliveries;
use crate::portal::endpoints::{self, Endpoint, NewEndpoint, Secret};
use crate::portal::Portal;

fn event_checkboxes(chosen: Option<&[String]>) -> Markup {
    html! {
        fieldset {
            legend { "Event types (none ticked: every type)" }
            @for kind in EventType::ALL {
                @let on = chosen.is_some_and(|c| c.iter().any(|t| t == kind.as_str()));
                label { input type="checkbox" name="event_type" value=(kind.as_str()) checked[on]; " " (kind.as_str()) }
            }
        }
    }
}

pub(super) async fn webhooks(
    portal: &Portal<'_>,
    error: Option<&str>,
    draft: Option<&NewEndpoint>,
) -> Result<Response, ApiError> {
    let endpoints = endpoints::list(portal).await?;
    let notes = deliveries::list_notifications(portal).await?;
    let status = if error.is_some() { 400 } else { 200 };
    page(
        status,
        layout(
            "Webhooks",
            Some(portal),
            html! {
                section {
                    h1 { "Webhook endpoints" }
                    @if endpoints.is_empty() { p { "No endpoints yet." } } @else {
                        table {
                            thead { tr { th { "URL" } th { "Description" } th { "Events" } th { "Status" } } }
                            tbody {
                                @for e in &endpoints {
                                    tr {
                                        td { a href=(format!("/portal/webhooks/{}", e.id)) { (e.url) } }
                                        td { (e.description) }
                                        td { (types_text(e)) }
                                        td { (e.status) }
                                    }
                                }
                            }
                        }
                    }
                }
                @if !notes.is_empty() {
                    section {
                        h2 { "Notifications" }
                        @for n in &notes {
                            div.error {
                                strong { (n.subject) } br;
                                (n.body) br;
                                span.muted { (n.created_at.as_deref().unwrap_or_default())
                                    " · e-mail: " (n.email_status) }
                            }
                        }
                    }
                }
                section {
                    h2 { "New endpoint" }
                    (error_box(error))
                    form method="post" action="/portal/webhooks" {
                        (csrf_field(portal))
                        label for="url" { "URL" }
                        input #url type="url" name="url" required value=(draft.map_or("", |d| d.url.as_str()))
                            placeholder="https://example.com/payrail/webhooks";
                        label for="description" { "Description" }
                        input #description type="text" name="description" maxlength="500"
                            value=(draft.map_or("", |d| d.description.as_str()));
                        (event_checkboxes(draft.and_then(|d| d.event_types.as_deref())))
                        button type="submit" { "Add endpoint" }
                    }
                }
            },
        ),
    )
}

fn types_text(e: &Endpoint) -> String {
    e.event_types
        .as_ref()
        .map_or_else(|| "all".to_owned(), |t| t.join(", "))
}

pub(super) async fn endpoint_page(
    portal: &Portal<'_>,
    id: &str,
    secret: Option<&Secret>,
    error: Option<&str>,
    status: u16,
) -> Result<Response, ApiError> {
    let e = endpoints::get(portal, id).await?;
    let log = deliveries::log(portal, id, "limit=25").await?;
    let action = |path: &str| format!("/portal/webhooks/{}{path}", e.id);
    page(
        status,
        layout(
            "Webhook endpoint",
            Some(portal),
            html! {
                section {
                    p { a href="/portal/webhooks" { "← All endpoints" } }
                    h1 { code { (e.url) } }
                    p.muted { "Id " code #endpoint-id { (e.id) } " · " (e.status) " · events: " (types_text(&e)) }
                    (error_box(error))
                    @if let Some(s) = secret {
                        (secret_box("Signing secret", &s.signing_secret,
                            "Verify Payrail-Signature with this value, prefix included."))
                        @if let Some(until) = &s.previous_secret_expires_at {
                            p.muted { "The previous secret also signs until " (until) "." }
                        }
                    }
                    form method="post" action=(action("/reveal")) {
                        (csrf_field(portal)) button type="submit" name="reveal" { "Reveal signing secret" }
                    }
                    " "
                    form method="post" action=(action("/test")) {
                        (csrf_field(portal)) button type="submit" name="test" { "Send a test event" }
                    }
                }
                @if e.status == EndpointStatus::Disabled {
                    section {
                        h2 { "Disabled" }
                        @if let Some(reason) = &e.disabled_reason {
                            p.error { "Payrail disabled this endpoint: " (reason) "." }
                        }
                        form method="post" action=(action("/enable")) {
                            (csrf_field(portal))
                            label for="resend-since" { "Also resend deliveries that failed since (optional)" }
                            input #resend-since type="date" name="resend_failed_since";
                            p { button type="submit" name="enable" { "Enable endpoint" } }
                        }
                    }
                }
                section {
                    h2 { "Delivery log" }
                    @if log.data.is_empty() { p { "Nothing delivered yet." } } @else {
                        table {
                            thead { tr { th { "Created" } th { "Event" } th { "Status" } th { "Attempts" } th { "Next attempt" } th {} } }
                            tbody {
                                @for d in &log.data {
                                    tr data-delivery=(d.id) {
                                        td { a href=(format!("/portal/deliveries/{}", d.id)) { (d.created_at.as_deref().unwrap_or("")) } }
                                        td { (d.event_type) }
                                        td { (d.status.as_str()) @if d.redelivery_of.is_some() { " (resent)" } }
                                        td { (d.attempts) }
                                        td { (d.next_attempt_at.as_deref().unwrap_or("—")) }
                                        td {
                                            form method="post" action=(format!("/portal/deliveries/{}/resend", d.id)) {
                                                (csrf_field(portal)) button type="submit" { "Resend" }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                        @if log.has_more { p.muted { "Older deliveries: GET /portal/api/webhook-endpoints/" (e.id) "/deliveries" } }
                    }
                }
                section {
                    h2 { "Edit" }
                    form method="post" action=(action("")) {
                        (csrf_field(portal))
                        label for="url" { "URL" }
                        input #url type="url" name="url" required value=(e.url);
                        label for="description" { "Description" }
                        input #description type="text" name="description" maxlength="500" value=(e.description);
                        (event_checkboxes(e.event_types.as_deref()))
                        label for="status" { "Status" }
                        select #status name="status" {
                            @for status in EndpointStatus::ALL {
                                option value=(status.as_str()) selected[e.status == *status] { (status.as_str()) }
                            }
                        }
                        p { button type="submit" { "Save" } }
                    }
                }
                section {
                    h2 { "Rotate signing secret" }
                    @if let Some(until) = &e.previous_secret_expires_at {
                        p.muted { "A previous secret signs too until " (until) "." }
                    }
                    form method="post" action=(action("/rotate")) {
                        (csrf_field(portal))
                        label for="grace" { "Keep the old secret valid for (hours, 0 ends it now)" }
                        input #grace type="number" name="grace_hours" min="0" max="168" value="24";
                        p { button type="submit" name="rotate" { "Rotate secret" } }
                    }
                }
                section {
                    h2 { "Delete" }
                    form method="post" action=(action("/delete")) {
                        (csrf_field(portal)) button.danger type="submit" { "Delete endpoint" }
                    }
                }
            },
        ),
    )
}

pub(super) async fn delivery_page(portal: &Portal<'_>, id: &str) -> Result<Response, ApiError> {
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
