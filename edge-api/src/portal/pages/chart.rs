//! The overview's charts and the payments' badges, drawn here: server-rendered SVG of a few
//! rectangles and lines (no chart script, nothing from elsewhere), each an image with a title
//! and a description a screen reader reads, its figures also in a table beside it. Badges are
//! text first: the colour only repeats what the words say.

use maud::{html, Markup};
use rust_decimal::prelude::ToPrimitive;
use rust_decimal::Decimal;
use shared_types::{AmountStatus, Status};

use crate::portal::overview::Series;

/// Width and height of a volume chart's drawing (it scales to its box; its words are HTML
/// around it, so they keep their size on a phone).
const WIDTH: u32 = 600;
const HEIGHT: u32 = 150;
/// A line of room above the tallest bar.
const TOP: u32 = 4;

/// A status as people read it.
pub fn status_label(status: Status) -> &'static str {
    match status {
        Status::Pending => "Pending",
        Status::Paid => "Paid",
        Status::Failed => "Failed",
        Status::Refunded => "Refunded",
        Status::PartiallyRefunded => "Partially refunded",
    }
}

/// A status badge: its words, on its colour (the stylesheet's `.badge.s-…`).
pub fn status_badge(status: Status) -> Markup {
    html! { span class=(format!("badge s-{}", status.as_str())) { (status_label(status)) } }
}

/// An amount-status badge: exact, underpaid or overpaid.
pub fn amount_badge(status: Option<AmountStatus>) -> Markup {
    match status {
        None => html! {},
        Some(s) => {
            let (class, label) = match s {
                AmountStatus::Exact => ("a-exact", "Exact"),
                AmountStatus::Underpaid => ("a-under", "Underpaid"),
                AmountStatus::Overpaid => ("a-over", "Overpaid"),
            };
            html! { span class=(format!("badge {class}")) { (label) } }
        }
    }
}

/// The bar colour of a status, each with at least 3:1 contrast on white (graphics, WCAG 1.4.11).
fn status_fill(status: Status) -> &'static str {
    match status {
        Status::Pending => "#a16207",
        Status::Paid => "#1a7f45",
        Status::Failed => "#c53030",
        Status::Refunded => "#5b6677",
        Status::PartiallyRefunded => "#7c3aed",
    }
}

/// One currency's 30 days of gross volume as bars, with the largest day's figure as the scale,
/// the first and last dates under it, and the figures in a table a click away (and always to
/// screen readers through the image's description).
pub fn volume_chart(series: &Series) -> Markup {
    let id = format!("volume-{}", series.currency.to_ascii_lowercase());
    let peak = series
        .days
        .iter()
        .max_by_key(|d| d.gross)
        .map(|d| (d.gross, d.date.as_str()))
        .unwrap_or((Decimal::ZERO, ""));
    let busy = series.days.iter().filter(|d| d.count > 0).count();
    let n = series.days.len().max(1) as u32;
    let plot_w = WIDTH;
    let plot_h = HEIGHT - TOP;
    let slot = plot_w / n;
    let bar = (slot * 3 / 4).max(1);
    let height = |gross: Decimal| -> u32 {
        if peak.0 <= Decimal::ZERO {
            return 0;
        }
        let h = (gross * Decimal::from(plot_h) / peak.0).round();
        let h = h.to_u32().unwrap_or(0);
        // A day with any volume shows at least a sliver.
        if gross > Decimal::ZERO {
            h.max(2)
        } else {
            0
        }
    };
    let first = series.days.first().map(|d| d.date.as_str()).unwrap_or("");
    let last = series.days.last().map(|d| d.date.as_str()).unwrap_or("");
    let description = format!(
        "{} {} from {} over the last {} days ({first} to {last}); {} days with payments; \
         the largest day is {peak_date} with {} {}.",
        series.total,
        series.currency,
        if series.count == 1 {
            "1 payment".to_owned()
        } else {
            format!("{} payments", series.count)
        },
        series.days.len(),
        busy,
        peak.0,
        series.currency,
        peak_date = if peak.1.is_empty() { "none" } else { peak.1 },
    );
    html! {
        figure.chart data-currency=(series.currency) {
            figcaption {
                strong { (series.currency) } " "
                span.num data-total { (series.total) } " "
                span.muted { "from " (series.count) @if series.count == 1 { " payment" } @else { " payments" } ", last " (series.days.len()) " days" }
            }
            svg role="img" aria-labelledby=(format!("{id}-title {id}-desc"))
                viewBox=(format!("0 0 {WIDTH} {HEIGHT}"))
                xmlns="http://www.w3.org/2000/svg" {
                title id=(format!("{id}-title")) { "Gross volume per day, " (series.currency) }
                desc id=(format!("{id}-desc")) { (description) }
                line x1="0" x2=(WIDTH) y1=(TOP) y2=(TOP) stroke="#e3e7ee" stroke-width="1" stroke-dasharray="4 4" {}
                @for (i, day) in series.days.iter().enumerate() {
                    @let h = height(day.gross);
                    rect x=(i as u32 * slot + (slot - bar) / 2) y=(TOP + plot_h - h)
                        width=(bar) height=(h) fill="#2563eb" data-day=(day.date) data-gross=(day.gross) {}
                }
                line x1="0" x2=(WIDTH) y1=(HEIGHT - 1) y2=(HEIGHT - 1) stroke="#8893a3" stroke-width="2" {}
            }
            div.axis aria-hidden="true" {
                span { (first) }
                @if peak.0 > Decimal::ZERO { span.peak { "top " (peak.0) " " (series.currency) " on " (peak.1) } }
                span { (last) }
            }
            details {
                summary { "Figures per day" }
                div.scroll {
                    table.figures {
                        caption.muted { "Gross volume per day, " (series.currency) }
                        thead { tr { th scope="col" { "Day" } th.num scope="col" { "Payments" } th.num scope="col" { "Gross" } } }
                        tbody {
                            @for day in series.days.iter().rev().filter(|d| d.count > 0) {
                                tr { th scope="row" { (day.date) } td.num { (day.count) } td.num { (day.gross) } }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Counts per status as horizontal bars, each labelled with its status and count in words.
pub fn status_chart(counts: &[(Status, i64)], days: i64) -> Markup {
    let max = counts.iter().map(|(_, c)| *c).max().unwrap_or(0).max(1);
    // Sized near a phone's width, so its words read at about their size there.
    let row = 24u32;
    let label_w = 118u32;
    let width = 320u32;
    let bar_room = width - label_w - 44;
    let height = row * counts.len().max(1) as u32;
    let total: i64 = counts.iter().map(|(_, c)| c).sum();
    let description = counts
        .iter()
        .map(|(s, c)| format!("{} {c}", status_label(*s)))
        .collect::<Vec<_>>()
        .join(", ");
    html! {
        svg.status-chart role="img" aria-labelledby="status-chart-title status-chart-desc"
            viewBox=(format!("0 0 {width} {height}")) xmlns="http://www.w3.org/2000/svg" {
            title #status-chart-title { "Payments by status, last " (days) " days" }
            desc #status-chart-desc { (total) " payments: " (description) "." }
            @for (i, (status, count)) in counts.iter().enumerate() {
                @let y = i as u32 * row;
                @let w = u32::try_from(i64::from(bar_room) * count / max).unwrap_or(0);
                text x="0" y=(y + 17) font-size="13" fill="#1c2430" { (status_label(*status)) }
                rect x=(label_w) y=(y + 5) width=(w.max(if *count > 0 { 2 } else { 0 })) height="14" rx="3"
                    fill=(status_fill(*status)) data-status=(status.as_str()) data-count=(count) {}
                text x=(label_w + w + 6) y=(y + 17) font-size="13" fill="#1c2430" { (count) }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::portal::overview::{series, Series};

    fn sample() -> Series {
        let dates: Vec<String> = ["2026-11-22", "2026-11-23"].map(String::from).to_vec();
        series(
            &dates,
            [
                ("2026-11-22".into(), "EUR".into(), 1, 1000),
                ("2026-11-23".into(), "EUR".into(), 2, 250),
            ],
        )
        .remove(0)
    }

    #[test]
    fn a_volume_chart_draws_a_bar_a_day_scaled_to_the_largest() {
        let svg = volume_chart(&sample()).into_string();
        assert_eq!(svg.matches("<rect").count(), 2, "{svg}");
        // The largest day fills the plot's height; the other a quarter of it.
        let plot = HEIGHT - TOP;
        assert!(
            svg.contains(&format!(
                "height=\"{plot}\" fill=\"#2563eb\" data-day=\"2026-11-22\""
            )),
            "{svg}"
        );
        assert!(
            svg.contains(&format!(
                "height=\"{}\" fill=\"#2563eb\" data-day=\"2026-11-23\"",
                plot / 4
            )),
            "{svg}"
        );
        assert!(
            svg.contains("<desc id=\"volume-eur-desc\">12.50 EUR from 3 payments"),
            "{svg}"
        );
        assert!(svg.contains("aria-labelledby=\"volume-eur-title volume-eur-desc\""));
    }

    #[test]
    fn the_status_chart_says_every_count_in_words() {
        let svg = status_chart(&[(Status::Paid, 4), (Status::Failed, 0)], 30).into_string();
        assert!(svg.contains("4 payments: Paid 4, Failed 0."), "{svg}");
        assert!(
            svg.contains("data-status=\"failed\" data-count=\"0\""),
            "{svg}"
        );
    }

    #[test]
    fn badges_carry_their_words() {
        assert!(status_badge(Status::PartiallyRefunded)
            .into_string()
            .contains(">Partially refunded<"));
        assert!(amount_badge(Some(AmountStatus::Underpaid))
            .into_string()
            .contains("badge a-under"));
        assert_eq!(amount_badge(None).into_string(), "");
    }
}
