//! `/portal/webhooks`: the institution's webhook endpoints with the notifications, one endpoint
//! (secret, edit, rotation, delivery log), and the forms that change them.

use maud::{html, Markup};
use shared_types::lifecycle::EventType;
use shared_types::{EndpointStatus, ErrorCode};

use super::layout::{csrf_field, error_box, layout, page, secret_box, Call};
use crate::http::see_other;
use crate::portal::deliveries;
use crate::portal::webhook_endpoints::{
    self, endpoint_id, Endpoint, EndpointPatch, NewEndpoint, Secret,
};
use crate::portal::Portal;
use crate::route::Answer;

/// `GET /portal/webhooks`.
pub(super) async fn list(c: Call<'_>) -> Answer {
    list_page(&c.portal, None, None).await
}

/// `POST /portal/webhooks`: the new endpoint with its signing secret, or the form again saying
/// why not.
pub(super) async fn create(c: Call<'_>) -> Answer {
    let portal = &c.portal;
    let types = c.form.all("event_type");
    let new = NewEndpoint {
        url: c.form.get("url").unwrap_or_default().to_owned(),
        description: c.form.get("description").unwrap_or_default().to_owned(),
        // No box ticked means every type.
        event_types: (!types.is_empty()).then_some(types),
    };
    match webhook_endpoints::create(portal, &new).await {
        Ok((endpoint, secret)) => {
            let shown = Secret {
                signing_secret: secret,
                previous_secret_expires_at: None,
            };
            endpoint_page(portal, &endpoint.id, Some(&shown), None, 201).await
        }
        Err(err) if err.code == ErrorCode::InvalidRequest => {
            list_page(portal, Some(&err.description), Some(&new)).await
        }
        Err(err) => Err(err),
    }
}

/// `GET /portal/webhooks/{id}`.
pub(super) async fn show(c: Call<'_>, id: &str) -> Answer {
    endpoint_page(&c.portal, endpoint_id(id)?, None, None, 200).await
}

/// `POST /portal/webhooks/{id}`: the edit form.
pub(super) async fn update(c: Call<'_>, id: &str) -> Answer {
    let id = endpoint_id(id)?;
    let form = &c.form;
    let types = form.all("event_type");
    let patch = EndpointPatch {
        url: form.get("url").map(str::to_owned),
        description: form.get("description").map(str::to_owned),
        event_types: Some((!types.is_empty()).then_some(types)),
        status: form.get("status").map(str::to_owned),
    };
    match webhook_endpoints::update(&c.portal, id, &patch).await {
        Ok(_) => see_other(c.url, &format!("/portal/webhooks/{id}")),
        Err(err) if err.code == ErrorCode::InvalidRequest => {
            endpoint_page(&c.portal, id, None, Some(&err.description), 400).await
        }
        Err(err) => Err(err),
    }
}

/// `POST /portal/webhooks/{id}/reveal`: the page with the signing secret shown.
pub(super) async fn reveal_secret(c: Call<'_>, id: &str) -> Answer {
    let id = endpoint_id(id)?;
    let secret = webhook_endpoints::reveal_secret(&c.portal, id).await?;
    endpoint_page(&c.portal, id, Some(&secret), None, 200).await
}

/// `POST /portal/webhooks/{id}/rotate`: a new signing secret, the old one valid for the hours
/// asked.
pub(super) async fn rotate_secret(c: Call<'_>, id: &str) -> Answer {
    let id = endpoint_id(id)?;
    let portal = &c.portal;
    let hours = c.form.get("grace_hours").unwrap_or("24");
    let grace = hours
        .trim()
        .parse::<i64>()
        .ok()
        .filter(|h| *h >= 0)
        .map(|h| h * 3600);
    match grace {
        None => {
            endpoint_page(
                portal,
                id,
                None,
                Some("grace period must be a whole number of hours, 0 or more"),
                400,
            )
            .await
        }
        Some(grace) => match webhook_endpoints::rotate_secret(portal, id, Some(grace)).await {
            Ok(secret) => endpoint_page(portal, id, Some(&secret), None, 200).await,
            Err(err) if err.code == ErrorCode::InvalidRequest => {
                endpoint_page(portal, id, None, Some(&err.description), 400).await
            }
            Err(err) => Err(err),
        },
    }
}

/// `POST /portal/webhooks/{id}/delete`.
pub(super) async fn delete(c: Call<'_>, id: &str) -> Answer {
    webhook_endpoints::delete(&c.portal, endpoint_id(id)?).await?;
    see_other(c.url, "/portal/webhooks")
}

/// `POST /portal/webhooks/{id}/enable`: enabled again, resending what failed since the date
/// given, if one is.
pub(super) async fn enable(c: Call<'_>, id: &str) -> Answer {
    let id = endpoint_id(id)?;
    let since = c.form.get("resend_failed_since").filter(|s| !s.is_empty());
    match deliveries::enable(&c.portal, id, since).await {
        Ok(_) => see_other(c.url, &format!("/portal/webhooks/{id}")),
        Err(err) if err.code == ErrorCode::InvalidRequest => {
            endpoint_page(&c.portal, id, None, Some(&err.description), 400).await
        }
        Err(err) => Err(err),
    }
}

/// `POST /portal/webhooks/{id}/test`: a test event, delivered like any other.
pub(super) async fn test(c: Call<'_>, id: &str) -> Answer {
    let id = endpoint_id(id)?;
    match deliveries::send_test(&c.portal, id).await {
        Ok(_) => see_other(c.url, &format!("/portal/webhooks/{id}")),
        Err(err) if err.code == ErrorCode::Conflict => {
            endpoint_page(&c.portal, id, None, Some(&err.description), 409).await
        }
        Err(err) => Err(err),
    }
}

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

/// The endpoints, the notifications and the form for a new endpoint (`draft`, refused for
/// `error`).
async fn list_page(
    portal: &Portal<'_>,
    error: Option<&str>,
    draft: Option<&NewEndpoint>,
) -> Answer {
    let endpoints = webhook_endpoints::list(portal).await?;
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
                                span.muted { (n.created_at)
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

/// One endpoint: its signing secret when `secret` is shown, `error` when a change was refused.
async fn endpoint_page(
    portal: &Portal<'_>,
    id: &str,
    secret: Option<&Secret>,
    error: Option<&str>,
    status: u16,
) -> Answer {
    let e = webhook_endpoints::get(portal, id).await?;
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
                                        td { a href=(format!("/portal/deliveries/{}", d.id)) { (d.created_at) } }
                                        td { (d.event_type) }
                                        td { (d.status.as_str()) @if d.redelivery_of.is_some() { " (resent)" } }
                                        td { (d.attempts) }
                                        td { (d.next_attempt_at.map_or("—".into(), |t| t.to_string())) }
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
