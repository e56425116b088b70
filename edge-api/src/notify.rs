//! Telling people: an institution's admins (recorded as a notification the portal lists, and
//! e-mailed when the deployment can send mail) and the platform's operator (e-mailed). Mail goes
//! through Cloudflare's send-email binding `EMAIL`, from `PAYRAIL_NOTIFY_FROM`; without them
//! nothing is sent and the record says so. Every caller's message is plain text it wrote: no
//! secret, key or token is ever put in one.

use shared_types::ids::InstitutionId;
use worker::{SendEmail, SendEmailBuilder};

use crate::ctx::Ctx;
use crate::db::notifications::{self, EmailStatus, NewNotification, NotificationKind};
use crate::db::portal;
use crate::error::{ApiError, OrInternal};

/// Tells institution `institution_id`'s admins: the notification is recorded (the portal lists
/// it) after trying the e-mail, with what became of the e-mail.
pub async fn admins(
    ctx: &Ctx,
    institution_id: InstitutionId,
    kind: NotificationKind,
    subject: &str,
    body: &str,
) -> Result<(), ApiError> {
    let recipients = portal::admin_emails(&ctx.db, institution_id)
        .await
        .or_internal("read admins")?;
    let email_status = send(ctx, &recipients, subject, body).await;
    let notification = NewNotification {
        institution_id,
        subject,
        body,
        email_status,
        created_at: ctx.now(),
    };
    let statement =
        notifications::insert(kind, &notification).or_internal("record notification")?;
    crate::db::batch(&ctx.db, vec![statement])
        .await
        .or_internal("record notification")
}

/// E-mails the operator (`PAYRAIL_OPERATOR_EMAIL`): what the deployment as a whole must know,
/// such as the books drifting from the chain or a node's head standing still. Returns what
/// happened, for the caller's record.
pub async fn operator(ctx: &Ctx, subject: &str, body: &str) -> EmailStatus {
    send(ctx, &ctx.operator_emails(), subject, body).await
}

/// Sends a plain-text e-mail to `to` through the typed send-email binding, when one is
/// configured; returns what happened.
async fn send(ctx: &Ctx, to: &[String], subject: &str, text: &str) -> EmailStatus {
    let Some((binding, from)) = ctx.email() else {
        return EmailStatus::NotConfigured;
    };
    if to.is_empty() {
        return EmailStatus::NoRecipients;
    }
    deliver(&binding, &from, to, subject, text).await
}

/// Hands one message to `binding`.
async fn deliver(
    binding: &SendEmail,
    from: &str,
    to: &[String],
    subject: &str,
    text: &str,
) -> EmailStatus {
    let message = SendEmailBuilder::new_with_str_and_slice(from, to, subject);
    message.set_text(text);
    match binding.send_with_builder(&message).await {
        Ok(_) => EmailStatus::Sent,
        Err(_) => EmailStatus::Failed,
    }
}
