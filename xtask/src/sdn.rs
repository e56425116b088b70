//! `xtask screening-load`: the sanctioned EVM addresses of an OFAC SDN list (the classic
//! `sdn.xml`: a root `<sdnList>`, its `<publshInformation>`'s `<Publish_Date>`, and an
//! `<sdnEntry>` per listed person or entity whose `<idList>` names its digital currency addresses),
//! sent to the worker's operator API (`POST /operator/sanctioned-addresses`, the operator's token
//! from `PAYRAIL_OPERATOR_TOKEN`). Elements are matched on their local names: OFAC puts a default
//! namespace on the root, and has changed it before.
//!
//! `xtask screening-list` and `xtask screening-remove`: the operator's list as the worker shows it
//! (`GET /operator/sanctioned-addresses`), and one entry taken off it (`POST
//! /operator/sanctioned-addresses/remove`; the worker keeps its row, for the record).
//!
//! An EVM address is the same account on every EVM network, so every id whose type is a
//! "Digital Currency Address - …" and whose number is an EVM address is kept, whatever the
//! currency OFAC wrote beside it (ETH, ETC, USDT, USDC, ARB, BSC…); bitcoin, Tron and other
//! addresses are not EVM addresses and are left out.

use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// The largest file read: OFAC's `sdn.xml` is a few tens of MiB; a file past this is not one,
/// and is refused before it is read into memory or parsed.
pub const MAX_FILE_BYTES: u64 = 256 * 1024 * 1024;

/// The most addresses one list may name (OFAC's names a few hundred): more is refused as not an
/// SDN list.
pub const MAX_ADDRESSES: usize = 100_000;

/// The most entries the operator API takes in one request.
pub const MAX_PER_REQUEST: usize = 5_000;

/// The most entries the worker's list shows in one answer: an answer this long may leave older
/// entries out.
pub const LIST_MAX: usize = 10_000;

/// The `idType` prefix of OFAC's digital currency addresses; the currency follows it.
const DIGITAL_CURRENCY: &str = "Digital Currency Address - ";

/// What an SDN file lists for screening.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Load {
    /// The list's publication date, `YYYY-MM-DD` (from `Publish_Date`'s `MM/DD/YYYY`).
    pub published: String,
    /// The EVM addresses, each once, in the file's order.
    pub entries: Vec<Entry>,
}

/// One sanctioned address and the SDN entry that names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Entry {
    /// `0x` and 40 lower-case hex digits.
    pub address: String,
    /// The entry's uid and name, e.g. `SDN 12345: LAZARUS GROUP` (a person's first name before
    /// the last).
    pub entry: String,
}

/// What the worker did with a load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Loaded {
    /// Addresses it had not listed for the source.
    pub added: u64,
    /// Addresses it already listed.
    pub kept: u64,
    /// The source's addresses absent from the load, taken off the list (only with `replace`).
    pub removed: u64,
}

pub use shared_types::screening::ListedEntry;

/// Reads and parses the SDN file at `path`, refusing one larger than [`MAX_FILE_BYTES`] before
/// reading it.
pub fn read(path: &Path) -> Result<Load, String> {
    let name = path.display();
    let size = std::fs::metadata(path)
        .map_err(|e| format!("{name}: {e}"))?
        .len();
    if size > MAX_FILE_BYTES {
        return Err(too_large(name, size));
    }
    let xml = std::fs::read_to_string(path).map_err(|e| format!("{name}: {e}"))?;
    parse(&xml).map_err(|e| format!("{name}: {e}"))
}

fn too_large(what: impl std::fmt::Display, size: u64) -> String {
    format!(
        "{what} is {size} bytes, more than the {} MiB an SDN file may be",
        MAX_FILE_BYTES / (1024 * 1024)
    )
}

/// The publication date and the EVM addresses of an SDN list in OFAC's classic `sdn.xml` format.
/// Each address is kept once, with the first entry that names it. Fails, naming the problem, on
/// text larger than [`MAX_FILE_BYTES`], text that is not XML (or declares a DTD), a root other
/// than `sdnList`, a missing or malformed `Publish_Date`, an entry naming an address without a
/// uid, and more than [`MAX_ADDRESSES`] addresses.
pub fn parse(xml: &str) -> Result<Load, String> {
    let size = u64::try_from(xml.len()).unwrap_or(u64::MAX);
    if size > MAX_FILE_BYTES {
        return Err(too_large("the file", size));
    }
    // roxmltree's defaults refuse a DTD, and with it entity expansion.
    let doc = roxmltree::Document::parse(xml).map_err(|e| format!("not XML: {e}"))?;
    let root = doc.root_element();
    if root.tag_name().name() != "sdnList" {
        return Err(format!(
            "not an SDN list: the root element is <{}>, not <sdnList> (OFAC's classic sdn.xml, \
             not the advanced format)",
            root.tag_name().name()
        ));
    }
    let date = child(root, "publshInformation")
        .and_then(|info| child(info, "Publish_Date"))
        .map(text)
        .ok_or("no Publish_Date in <publshInformation>")?;
    let published =
        iso_date(&date).ok_or_else(|| format!("Publish_Date {date:?} is not a date MM/DD/YYYY"))?;
    let mut seen = HashSet::new();
    let mut entries = Vec::new();
    for sdn in children(root, "sdnEntry") {
        let addresses: Vec<String> = children(sdn, "idList")
            .flat_map(|list| children(list, "id"))
            .filter(|id| {
                child(*id, "idType").is_some_and(|t| text(t).starts_with(DIGITAL_CURRENCY))
            })
            .filter_map(|id| child(id, "idNumber").and_then(|n| evm_address(&text(n))))
            .collect();
        if addresses.is_empty() {
            continue;
        }
        let uid = child(sdn, "uid").map(text).filter(|u| !u.is_empty());
        let Some(uid) = uid else {
            let at = doc.text_pos_at(sdn.range().start);
            return Err(format!(
                "the sdnEntry at line {} names digital currency addresses but has no uid",
                at.row
            ));
        };
        let name = ["firstName", "lastName"]
            .iter()
            .filter_map(|part| child(sdn, part).map(text))
            .filter(|part| !part.is_empty())
            .collect::<Vec<_>>()
            .join(" ");
        let label = if name.is_empty() {
            format!("SDN {uid}")
        } else {
            format!("SDN {uid}: {name}")
        };
        for address in addresses {
            if !seen.insert(address.clone()) {
                continue;
            }
            if entries.len() == MAX_ADDRESSES {
                return Err(format!(
                    "more than {MAX_ADDRESSES} EVM addresses: more than an SDN list names"
                ));
            }
            entries.push(Entry {
                address,
                entry: label.clone(),
            });
        }
    }
    Ok(Load { published, entries })
}

/// The element children of `node` with local name `name`.
fn children<'a, 'input: 'a>(
    node: roxmltree::Node<'a, 'input>,
    name: &'a str,
) -> impl Iterator<Item = roxmltree::Node<'a, 'input>> + 'a {
    node.children()
        .filter(move |c| c.is_element() && c.tag_name().name() == name)
}

/// The first element child of `node` with local name `name`.
fn child<'a, 'input: 'a>(
    node: roxmltree::Node<'a, 'input>,
    name: &'a str,
) -> Option<roxmltree::Node<'a, 'input>> {
    children(node, name).next()
}

/// An element's text, trimmed, its runs of white space one space.
fn text(node: roxmltree::Node<'_, '_>) -> String {
    let all: String = node
        .descendants()
        .filter(roxmltree::Node::is_text)
        .filter_map(|t| t.text())
        .collect();
    all.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `0x` (or `0X`) and exactly 40 hex digits of either case, lower-cased; `None` for anything
/// else.
fn evm_address(number: &str) -> Option<String> {
    let number = number.trim();
    let hex = number
        .strip_prefix("0x")
        .or_else(|| number.strip_prefix("0X"))?;
    (hex.len() == 40 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| format!("0x{}", hex.to_ascii_lowercase()))
}

/// `MM/DD/YYYY` (month and day of one or two digits) as `YYYY-MM-DD`, if it is a calendar date.
fn iso_date(date: &str) -> Option<String> {
    let digits = |part: &str, lengths: std::ops::RangeInclusive<usize>| {
        (lengths.contains(&part.len()) && part.bytes().all(|b| b.is_ascii_digit()))
            .then(|| part.parse::<u32>().ok())
            .flatten()
    };
    let mut parts = date.split('/');
    let month = digits(parts.next()?, 1..=2)?;
    let day = digits(parts.next()?, 1..=2)?;
    let year = digits(parts.next()?, 4..=4)?;
    if parts.next().is_some() {
        return None;
    }
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return None,
    };
    (1..=days)
        .contains(&day)
        .then(|| format!("{year:04}-{month:02}-{day:02}"))
}

/// Sends `load` to the worker `base_url` with the operator's `token` as the list of `source`;
/// with `replace`, the worker also takes off the source's addresses absent from it. Refuses,
/// before sending, a load with no addresses (with `replace` it would empty the source's list) or
/// more than [`MAX_PER_REQUEST`] (the API's bound: a load split across requests would, with
/// `replace`, have each request remove the others' addresses). A refusal by the worker is its
/// error message.
pub fn send(
    base_url: &str,
    token: &str,
    source: &str,
    replace: bool,
    load: &Load,
) -> Result<Loaded, String> {
    if load.entries.is_empty() {
        return Err("the list names no EVM addresses: nothing sent".to_owned());
    }
    if load.entries.len() > MAX_PER_REQUEST {
        return Err(format!(
            "the list names {} EVM addresses, more than the {MAX_PER_REQUEST} the operator API \
             takes in one request: nothing sent (split across requests, each --replace would \
             remove the others' addresses)",
            load.entries.len()
        ));
    }
    let url = endpoint(base_url, "/operator/sanctioned-addresses");
    let body = json!({
        "source": source,
        "published": load.published,
        "replace": replace,
        "entries": load.entries,
    });
    let answer = agent()
        .post(&url)
        .set("Authorization", &format!("Bearer {token}"))
        .send_json(body);
    match answer {
        Ok(response) => {
            let report: Value = response
                .into_json()
                .map_err(|e| format!("{url}: the answer is not JSON: {e}"))?;
            let count = |name: &str| {
                report[name]
                    .as_u64()
                    .ok_or_else(|| format!("{url}: the answer has no count {name:?}: {report}"))
            };
            Ok(Loaded {
                added: count("added")?,
                kept: count("kept")?,
                removed: count("removed")?,
            })
        }
        Err(ureq::Error::Status(status, response)) => Err(refusal("the load", status, response)),
        // Names the URL (never the token).
        Err(e) => Err(e.to_string()),
    }
}

/// The operator's list at the worker `base_url`, newest first (at most [`LIST_MAX`] entries),
/// read with the operator's `token`; with `removed`, the entries taken off too. A refusal by the
/// worker is its error message.
pub fn list(base_url: &str, token: &str, removed: bool) -> Result<Vec<ListedEntry>, String> {
    let mut url = endpoint(base_url, "/operator/sanctioned-addresses");
    if removed {
        url.push_str("?removed=true");
    }
    let answer = agent()
        .get(&url)
        .set("Authorization", &format!("Bearer {token}"))
        .call();
    match answer {
        Ok(response) => {
            #[derive(Deserialize)]
            struct Answer {
                data: Vec<ListedEntry>,
            }
            // Read whole (ureq bounds a string at 10 MiB; 10,000 entries are a few MiB).
            let text = response
                .into_string()
                .map_err(|e| format!("{url}: the answer could not be read: {e}"))?;
            serde_json::from_str::<Answer>(&text)
                .map(|answer| answer.data)
                .map_err(|e| format!("{url}: the answer is not the list: {e}"))
        }
        Err(ureq::Error::Status(status, response)) => Err(refusal("the list", status, response)),
        // Names the URL (never the token).
        Err(e) => Err(e.to_string()),
    }
}

/// Takes `address` off the list `source` at the worker `base_url` with the operator's `token`
/// (the worker keeps the entry, marked taken off). Refuses, before sending, an address that is not
/// `0x` and 40 hex digits, and an empty source. A refusal by the worker (404 when the list has no
/// such entry) is its error message.
pub fn remove(base_url: &str, token: &str, address: &str, source: &str) -> Result<(), String> {
    let address = evm_address(address)
        .ok_or_else(|| format!("{address:?} is not an EVM address (0x and 40 hex digits)"))?;
    let source = source.trim();
    if source.is_empty() {
        return Err("the source must name the list".to_owned());
    }
    let url = endpoint(base_url, "/operator/sanctioned-addresses/remove");
    let answer = agent()
        .post(&url)
        .set("Authorization", &format!("Bearer {token}"))
        .send_json(json!({ "address": address, "source": source }));
    match answer {
        Ok(response) => {
            let report: Value = response
                .into_json()
                .map_err(|e| format!("{url}: the answer is not JSON: {e}"))?;
            if report["removed"] == Value::Bool(true) {
                Ok(())
            } else {
                Err(format!("{url}: the answer does not say removed: {report}"))
            }
        }
        Err(ureq::Error::Status(status, response)) => Err(refusal("the removal", status, response)),
        // Names the URL (never the token).
        Err(e) => Err(e.to_string()),
    }
}

/// `entries` as a table, a line each (address, source, publication date, entry, and for an entry
/// taken off when and by whom), then a line counting them. Control characters in the worker's
/// text are shown as `?`, so that an entry cannot move the terminal's cursor or colour it.
pub fn table(entries: &[ListedEntry]) -> String {
    let rows: Vec<[String; 5]> = entries
        .iter()
        .map(|e| {
            let removed = e.removed_at.map(|at| {
                let when = shared_types::time::format_unix(at).unwrap_or_else(|| at.to_string());
                match &e.removed_by {
                    Some(who) => format!("removed {when} by {}", printable(who)),
                    None => format!("removed {when}"),
                }
            });
            [
                printable(&e.address),
                printable(&e.source),
                printable(&e.listed_on),
                printable(&e.entry),
                removed.unwrap_or_default(),
            ]
        })
        .collect();
    let mut widths = [0; 5];
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in &rows {
        let line = row
            .iter()
            .zip(widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect::<Vec<_>>()
            .join("  ");
        out.push_str(line.trim_end());
        out.push('\n');
    }
    let taken_off = entries.iter().filter(|e| e.removed_at.is_some()).count();
    let noun = if entries.len() == 1 {
        "entry"
    } else {
        "entries"
    };
    out.push_str(&format!(
        "{} {noun} ({taken_off} taken off)\n",
        entries.len()
    ));
    out
}

/// `text` with each control character (a newline, an escape…) shown as `?`.
pub(crate) fn printable(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// The operator API's `path` at the worker `base_url`.
pub(crate) fn endpoint(base_url: &str, path: &str) -> String {
    format!("{}{path}", base_url.trim_end_matches('/'))
}

/// An HTTP client for the operator API.
pub(crate) fn agent() -> ureq::Agent {
    ureq::AgentBuilder::new()
        .timeout(Duration::from_secs(120))
        .build()
}

/// What the worker said refusing `what` with `status`: its error body's code and description
/// (`{"error": "<code>", "error_description": "<message>"}`), else the start of the body.
pub(crate) fn refusal(what: &str, status: u16, response: ureq::Response) -> String {
    let body = response.into_string().unwrap_or_default();
    let error = serde_json::from_str::<Value>(&body).ok();
    let code = error.as_ref().and_then(|e| e["error"].as_str());
    let message = error.as_ref().and_then(|e| e["error_description"].as_str());
    match (code, message) {
        (Some(code), Some(message)) => format!(
            "the worker refused {what} ({status} {}): {}",
            printable(code),
            printable(message)
        ),
        (None, Some(message)) => {
            format!(
                "the worker refused {what} ({status}): {}",
                printable(message)
            )
        }
        (Some(code), None) => format!("the worker refused {what} ({status} {})", printable(code)),
        (None, None) => {
            let body: String = body.chars().take(200).collect();
            format!("the worker refused {what} ({status}): {}", printable(&body))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::TcpListener;

    fn sample() -> String {
        let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/sdn-sample.xml");
        std::fs::read_to_string(&file).unwrap()
    }

    /// An SDN list of `entries` (each an sdnEntry's inner XML) published `date`, under `root`'s
    /// opening tag.
    fn list(root: &str, date: &str, entries: &[&str]) -> String {
        let entries: String = entries
            .iter()
            .map(|e| format!("<sdnEntry>{e}</sdnEntry>"))
            .collect();
        format!(
            "<?xml version=\"1.0\"?>{root}<publshInformation><Publish_Date>{date}</Publish_Date>\
             <Record_Count>1</Record_Count></publshInformation>{entries}</sdnList>"
        )
    }

    fn id(kind: &str, number: &str) -> String {
        format!("<id><uid>1</uid><idType>{kind}</idType><idNumber>{number}</idNumber></id>")
    }

    fn entry(address: &str, label: &str) -> Entry {
        Entry {
            address: address.into(),
            entry: label.into(),
        }
    }

    #[test]
    fn the_sample_lists_its_evm_addresses_once_each() {
        let load = parse(&sample()).unwrap();
        assert_eq!(load.published, "2025-03-14");
        assert_eq!(
            load.entries,
            [
                entry(
                    "0x5a1e5a1e5a1e5a1e5a1e5a1e5a1e5a1e5a1e5a1e",
                    "SDN 90001: SAMPLE MIXER ONE"
                ),
                entry(
                    "0x000000000000000000000000000000000000dead",
                    "SDN 90001: SAMPLE MIXER ONE"
                ),
                entry(
                    "0xa1b2c3d4e5f60718293a4b5c6d7e8f9012345678",
                    "SDN 90002: Samuel Quentin SAMPLE"
                ),
                entry(
                    "0x0b5c0b5c0b5c0b5c0b5c0b5c0b5c0b5c0b5c0b5c",
                    "SDN 90003: SAMPLE EXCHANGE TWO"
                ),
            ]
        );
        // The same through the file.
        let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/sdn-sample.xml");
        assert_eq!(read(&file).unwrap(), load);
    }

    #[test]
    fn elements_are_matched_on_local_names_in_any_namespace() {
        let inner = format!(
            "<uid>7</uid><lastName>NS TEST</lastName><idList>{}</idList>",
            id(
                "Digital Currency Address - ETH",
                "0x1111111111111111111111111111111111111111"
            )
        );
        let expected = [entry(
            "0x1111111111111111111111111111111111111111",
            "SDN 7: NS TEST",
        )];
        for root in [
            "<sdnList>",
            "<sdnList xmlns=\"http://tempuri.org/sdnList.xsd\">",
            "<sdnList xmlns=\"https://sanctionslistservice.ofac.treas.gov/api/PublicationPreview/exports/XML\">",
        ] {
            let load = parse(&list(root, "01/02/2024", &[&inner])).unwrap();
            assert_eq!(load.entries, expected, "{root}");
            assert_eq!(load.published, "2024-01-02");
        }
        // A prefixed namespace, too.
        let prefixed = list("<o:sdnList xmlns:o=\"urn:x\">", "01/02/2024", &[])
            .replace("</sdnList>", "</o:sdnList>")
            .replace("<publshInformation>", "<o:publshInformation>")
            .replace("</publshInformation>", "</o:publshInformation>");
        assert_eq!(parse(&prefixed).unwrap().published, "2024-01-02");
    }

    #[test]
    fn addresses_are_lower_cased_trimmed_and_only_evm() {
        let inner = format!(
            "<uid>8</uid><firstName> Ana </firstName><lastName>MIXED</lastName><idList>{}{}{}{}{}{}{}{}</idList>",
            id("Digital Currency Address - USDC", "  0xABCDEFabcdef0123456789ABCDEFabcdef012345\n"),
            id("Digital Currency Address - XBT", "1SampLeBitcoinAddre55Xq9Vw2Kd4Hn6J"),
            id("Digital Currency Address - TRX", "TSampLe7r0nAddre55Xq9Vw2Kd4Hn6Jp8Zc"),
            // Not 40 hex digits, or not hex.
            id("Digital Currency Address - ETH", "0x123456789012345678901234567890123456789"),
            id("Digital Currency Address - ETH", "0x12345678901234567890123456789012345678901"),
            id("Digital Currency Address - ETH", "0x123456789012345678901234567890123456789g"),
            // An EVM address, but not a digital currency id.
            id("Registration ID", "0x2222222222222222222222222222222222222222"),
            id("Digital Currency Address - ETC", "0X3333333333333333333333333333333333333333"),
        );
        let load = parse(&list("<sdnList>", "12/31/2024", &[&inner])).unwrap();
        assert_eq!(
            load.entries,
            [
                entry(
                    "0xabcdefabcdef0123456789abcdefabcdef012345",
                    "SDN 8: Ana MIXED"
                ),
                entry(
                    "0x3333333333333333333333333333333333333333",
                    "SDN 8: Ana MIXED"
                ),
            ]
        );
    }

    #[test]
    fn an_address_named_twice_keeps_its_first_entry() {
        let a = "0x4444444444444444444444444444444444444444";
        let first = format!(
            "<uid>1</uid><lastName>FIRST</lastName><idList>{}{}</idList>",
            id("Digital Currency Address - ETH", a),
            id("Digital Currency Address - USDT", a)
        );
        let second = format!(
            "<uid>2</uid><lastName>SECOND</lastName><idList>{}</idList>",
            id(
                "Digital Currency Address - ARB",
                &a.to_ascii_uppercase().replace("0X", "0x")
            )
        );
        let load = parse(&list("<sdnList>", "02/29/2024", &[&first, &second])).unwrap();
        assert_eq!(load.entries, [entry(a, "SDN 1: FIRST")]);
    }

    #[test]
    fn a_missing_or_malformed_date_is_refused() {
        for date in [
            "2024-03-14",
            "13/01/2024",
            "02/30/2024",
            "02/29/2023",
            "00/10/2024",
            "03/14/24",
            "03/14/2024/1",
            "",
        ] {
            let err = parse(&list("<sdnList>", date, &[])).unwrap_err();
            assert!(
                err.contains("Publish_Date") && err.contains("MM/DD/YYYY"),
                "{date}: {err}"
            );
        }
        assert_eq!(
            parse(&list("<sdnList>", " 3/4/2024 ", &[]))
                .unwrap()
                .published,
            "2024-03-04"
        );
        let err = parse("<sdnList><sdnEntry><uid>1</uid></sdnEntry></sdnList>").unwrap_err();
        assert!(err.contains("no Publish_Date"), "{err}");
    }

    #[test]
    fn what_is_not_an_sdn_list_is_refused() {
        let err = parse("uid,name\n1,SAMPLE\n").unwrap_err();
        assert!(err.starts_with("not XML"), "{err}");
        let err = parse("<sdnList><publshInformation>").unwrap_err();
        assert!(err.starts_with("not XML"), "{err}");
        // A DTD (and so entity expansion) is refused.
        let dtd = "<!DOCTYPE sdnList [<!ENTITY a \"aaaa\">]><sdnList>&a;</sdnList>";
        assert!(parse(dtd).unwrap_err().starts_with("not XML"));
        let err = parse("<Sanctions xmlns=\"urn:x\"/>").unwrap_err();
        assert!(err.contains("<Sanctions>"), "{err}");
        // An entry naming an address needs its uid.
        let inner = format!(
            "<lastName>NO UID</lastName><idList>{}</idList>",
            id(
                "Digital Currency Address - ETH",
                "0x1111111111111111111111111111111111111111"
            )
        );
        let err = parse(&list("<sdnList>", "01/02/2024", &[&inner])).unwrap_err();
        assert!(err.contains("no uid") && err.contains("line 1"), "{err}");
    }

    #[test]
    fn too_many_addresses_are_refused() {
        let ids: String = (0..=MAX_ADDRESSES)
            .map(|n| id("Digital Currency Address - ETH", &format!("0x{n:040x}")))
            .collect();
        let inner = format!("<uid>1</uid><lastName>MANY</lastName><idList>{ids}</idList>");
        let err = parse(&list("<sdnList>", "01/02/2024", &[&inner])).unwrap_err();
        assert!(err.contains("more than 100000"), "{err}");
    }

    /// A worker that answers one request with `status` and `body`; the request as it came.
    /// The request the fake worker received, checked to be `line` (method, path and query)
    /// with the operator's token: its JSON body, when it has one.
    fn requested(request: &str, line: &str) -> Option<Value> {
        assert!(
            request.starts_with(&format!("{line} HTTP/1.1\r\n")),
            "{request}"
        );
        assert!(
            request.contains("Authorization: Bearer op-token\r\n"),
            "{request}"
        );
        serde_json::from_str(&request[request.find("\r\n\r\n")?..]).ok()
    }

    fn worker(status: u16, body: &'static str) -> (String, std::thread::JoinHandle<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let handle = std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut head = String::new();
            let mut length = 0;
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                if let Some((name, value)) = line.split_once(':') {
                    if name.eq_ignore_ascii_case("content-length") {
                        length = value.trim().parse().unwrap();
                    }
                }
                head.push_str(&line);
                if line == "\r\n" {
                    break;
                }
            }
            let mut body_in = vec![0; length];
            reader.read_exact(&mut body_in).unwrap();
            let mut stream = stream;
            write!(
                stream,
                "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n{body}",
                body.len()
            )
            .unwrap();
            head + &String::from_utf8(body_in).unwrap()
        });
        (url, handle)
    }

    #[test]
    fn a_load_is_posted_with_the_token_and_its_counts_read() {
        let load = parse(&sample()).unwrap();
        let (url, request) = worker(200, r#"{"added": 3, "kept": 1, "removed": 2}"#);
        let loaded = send(&url, "op-token", "OFAC SDN", true, &load).unwrap();
        assert_eq!(
            loaded,
            Loaded {
                added: 3,
                kept: 1,
                removed: 2
            }
        );
        let body = requested(
            &request.join().unwrap(),
            "POST /operator/sanctioned-addresses",
        )
        .expect("a JSON body");
        assert_eq!(body["source"], "OFAC SDN");
        assert_eq!(body["published"], "2025-03-14");
        assert_eq!(body["replace"], true);
        assert_eq!(body["entries"].as_array().unwrap().len(), 4);
        assert_eq!(
            body["entries"][0],
            json!({"address": "0x5a1e5a1e5a1e5a1e5a1e5a1e5a1e5a1e5a1e5a1e",
                   "entry": "SDN 90001: SAMPLE MIXER ONE"})
        );
    }

    #[test]
    fn a_refusal_is_the_workers_message() {
        let load = parse(&sample()).unwrap();
        let (url, request) = worker(
            422,
            r#"{"error": "invalid_request", "error_description": "published is in the future"}"#,
        );
        let err = send(&url, "op-token", "OFAC SDN", false, &load).unwrap_err();
        assert_eq!(
            err,
            "the worker refused the load (422 invalid_request): published is in the future"
        );
        assert!(!err.contains("op-token"));
        request.join().unwrap();
    }

    #[test]
    fn an_empty_or_oversized_load_is_not_sent() {
        // Nothing listens at port 9: these fail before connecting.
        let url = "http://127.0.0.1:9";
        let mut load = Load {
            published: "2025-03-14".into(),
            entries: Vec::new(),
        };
        let err = send(url, "t", "OFAC SDN", true, &load).unwrap_err();
        assert!(err.contains("no EVM addresses"), "{err}");
        load.entries = (0..=MAX_PER_REQUEST)
            .map(|n| entry(&format!("0x{n:040x}"), "SDN 1: MANY"))
            .collect();
        let err = send(url, "t", "OFAC SDN", true, &load).unwrap_err();
        assert!(
            err.contains("5001 EVM addresses") && err.contains("5000"),
            "{err}"
        );
    }

    /// The list's answer: an entry on it and one taken off.
    const LISTED: &str = r#"{"data": [
        {"address": "0x5a1e5a1e5a1e5a1e5a1e5a1e5a1e5a1e5a1e5a1e", "source": "OFAC SDN",
         "entry": "SDN 90001: SAMPLE MIXER ONE", "listed_on": "2025-03-14",
         "added_at": 1767225600, "added_by": "operator", "removed_at": null, "removed_by": null},
        {"address": "0x0b5c0b5c0b5c0b5c0b5c0b5c0b5c0b5c0b5c0b5c", "source": "manual",
         "entry": "SDN 90003: SAMPLE EXCHANGE TWO", "listed_on": "2025-01-02",
         "added_at": 1767139200, "added_by": "operator", "removed_at": 1767312000,
         "removed_by": "operator"}
    ]}"#;

    fn listed(
        address: &str,
        source: &str,
        entry: &str,
        listed_on: &str,
        removed: Option<(i64, &str)>,
    ) -> ListedEntry {
        ListedEntry {
            address: address.into(),
            source: source.into(),
            entry: entry.into(),
            listed_on: listed_on.into(),
            added_at: 1_767_225_600,
            added_by: "operator".into(),
            removed_at: removed.map(|(at, _)| at),
            removed_by: removed.map(|(_, by)| by.into()),
        }
    }

    #[test]
    fn the_list_is_read_with_the_token_and_parsed() {
        let (url, request) = worker(200, LISTED);
        let entries = super::list(&url, "op-token", true).unwrap();
        requested(
            &request.join().unwrap(),
            "GET /operator/sanctioned-addresses?removed=true",
        );
        assert_eq!(entries.len(), 2);
        assert_eq!(
            entries[0],
            listed(
                "0x5a1e5a1e5a1e5a1e5a1e5a1e5a1e5a1e5a1e5a1e",
                "OFAC SDN",
                "SDN 90001: SAMPLE MIXER ONE",
                "2025-03-14",
                None
            )
        );
        assert_eq!(entries[1].removed_at, Some(1_767_312_000));
        assert_eq!(entries[1].removed_by.as_deref(), Some("operator"));
        assert_eq!(entries[1].added_at, 1_767_139_200);
        // Without --removed, no parameter.
        let (url, request) = worker(200, r#"{"data": []}"#);
        assert_eq!(super::list(&url, "op-token", false).unwrap(), []);
        let request = request.join().unwrap();
        assert!(
            request.starts_with("GET /operator/sanctioned-addresses HTTP/1.1\r\n"),
            "{request}"
        );
    }

    #[test]
    fn a_refused_or_malformed_list_is_an_error() {
        let (url, request) = worker(
            401,
            r#"{"error": "invalid_client", "error_description": "the operator's bearer token is required"}"#,
        );
        let err = super::list(&url, "op-token", false).unwrap_err();
        assert_eq!(
            err,
            "the worker refused the list (401 invalid_client): the operator's bearer token is \
             required"
        );
        assert!(!err.contains("op-token"));
        request.join().unwrap();
        // Not JSON error bodies: their start, control characters shown as `?`.
        let (url, request) = worker(502, "bad gateway\x1b[31m");
        let err = super::list(&url, "op-token", false).unwrap_err();
        assert_eq!(err, "the worker refused the list (502): bad gateway?[31m");
        request.join().unwrap();
        // A 200 that is not the list.
        let (url, request) = worker(200, r#"{"data": [{"address": "0x1"}]}"#);
        let err = super::list(&url, "op-token", false).unwrap_err();
        assert!(err.contains("not the list"), "{err}");
        request.join().unwrap();
    }

    #[test]
    fn an_entry_is_taken_off_with_the_token() {
        let (url, request) = worker(200, r#"{"removed": true}"#);
        remove(
            &url,
            "op-token",
            " 0x0B5C0B5C0B5C0B5C0B5C0B5C0B5C0B5C0B5C0B5C ",
            "OFAC SDN",
        )
        .unwrap();
        let body = requested(
            &request.join().unwrap(),
            "POST /operator/sanctioned-addresses/remove",
        )
        .expect("a JSON body");
        assert_eq!(
            body,
            json!({"address": "0x0b5c0b5c0b5c0b5c0b5c0b5c0b5c0b5c0b5c0b5c", "source": "OFAC SDN"})
        );
    }

    #[test]
    fn an_entry_not_on_the_list_is_the_workers_message() {
        let (url, request) = worker(
            404,
            r#"{"error": "not_found", "error_description": "0x0b5c0b5c0b5c0b5c0b5c0b5c0b5c0b5c0b5c0b5c is not on the list \"manual\""}"#,
        );
        let err = remove(
            &url,
            "op-token",
            "0x0b5c0b5c0b5c0b5c0b5c0b5c0b5c0b5c0b5c0b5c",
            "manual",
        )
        .unwrap_err();
        assert_eq!(
            err,
            "the worker refused the removal (404 not_found): \
             0x0b5c0b5c0b5c0b5c0b5c0b5c0b5c0b5c0b5c0b5c is not on the list \"manual\""
        );
        assert!(!err.contains("op-token"));
        request.join().unwrap();
        // A 200 that does not say removed is not taken for one.
        let (url, request) = worker(200, r#"{"removed": false}"#);
        let err = remove(
            &url,
            "t",
            "0x0b5c0b5c0b5c0b5c0b5c0b5c0b5c0b5c0b5c0b5c",
            "manual",
        )
        .unwrap_err();
        assert!(err.contains("does not say removed"), "{err}");
        request.join().unwrap();
    }

    #[test]
    fn a_malformed_address_or_empty_source_is_not_sent() {
        // Nothing listens at port 9: these fail before connecting.
        let url = "http://127.0.0.1:9";
        for address in [
            "",
            "0x123456789012345678901234567890123456789",
            "0x12345678901234567890123456789012345678901",
            "0x123456789012345678901234567890123456789g",
            "1234567890123456789012345678901234567890",
            "TSampLe7r0nAddre55Xq9Vw2Kd4Hn6Jp8Zc",
        ] {
            let err = remove(url, "t", address, "OFAC SDN").unwrap_err();
            assert!(err.contains("not an EVM address"), "{address}: {err}");
        }
        let err = remove(url, "t", "0x1111111111111111111111111111111111111111", " ").unwrap_err();
        assert!(err.contains("source"), "{err}");
    }

    #[test]
    fn the_table_has_a_line_per_entry_and_a_count() {
        let entries = [
            listed(
                "0x5a1e5a1e5a1e5a1e5a1e5a1e5a1e5a1e5a1e5a1e",
                "OFAC SDN",
                "SDN 90001: SAMPLE MIXER ONE",
                "2025-03-14",
                None,
            ),
            listed(
                "0x0b5c0b5c0b5c0b5c0b5c0b5c0b5c0b5c0b5c0b5c",
                "manual",
                "SDN 3: X\nY",
                "2025-01-02",
                Some((1_767_312_000, "operator")),
            ),
        ];
        assert_eq!(
            table(&entries),
            "0x5a1e5a1e5a1e5a1e5a1e5a1e5a1e5a1e5a1e5a1e  OFAC SDN  2025-03-14  SDN 90001: SAMPLE MIXER ONE\n\
             0x0b5c0b5c0b5c0b5c0b5c0b5c0b5c0b5c0b5c0b5c  manual    2025-01-02  SDN 3: X?Y                   \
             removed 2026-01-02T00:00:00Z by operator\n\
             2 entries (1 taken off)\n"
        );
        assert_eq!(table(&[]), "0 entries (0 taken off)\n");
        assert_eq!(
            table(&entries[..1]).lines().last(),
            Some("1 entry (0 taken off)")
        );
    }
}
