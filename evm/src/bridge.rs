//! Settling a payment from one network to another with CCTP V2, as the treasury checks it: the
//! pure decisions around the three steps of a transfer ([`cctp`] has the bytes). The treasury
//! burns USDC on the source network (`TokenMessengerV2.depositForBurn`), waits for Circle's
//! attestation service ("Iris") to sign the message that burn emitted, and mints the USDC on
//! the destination network (`MessageTransmitterV2.receiveMessage`).
//!
//! Here, in the order the treasury needs them: what it asks for ([`Burn`]), and the most fee it
//! accepts ([`max_fee`]) from the fee Iris quotes for the route ([`fee_quote`]); Iris's answer
//! about the burn's transaction ([`attested`]), and the attested message checked field by field
//! against what was asked, and its attestation against the attesters ([`check_attested`]); and
//! the receipts read back: the burn and its message on the source network ([`burnt`],
//! [`message_sent`]), the mint and the message's receipt on the destination network
//! ([`minted`], [`received`]). The last one is how the treasury learns that a message it did
//! not mint itself was received (a third party may call `receiveMessage` with the same message
//! and attestation, and the treasury's own call then fails with "Nonce already used").
//!
//! Every reader is bounded and total: an answer or log of any size and any content is read or
//! refused for a named reason, never with a panic. A refusal of [`check_attested`] is a
//! sentence naming the field, shown to operators as the reason a batch is held. Pure, no I/O,
//! and wasm-friendly; the worker does the HTTP and the JSON-RPC, and converts a receipt's logs
//! into [`Log`]s.

use crate::cctp::{
    self, address_to_bytes32, bytes32_to_address, AttestationError, BurnMessage, MessageError, U256,
};
use serde_json::Value;
use std::fmt;

/// Basis points in a whole.
pub const BPS: u32 = 10_000;
/// The most bytes of a fee quote read: a quote has a few short entries.
pub const MAX_QUOTE_LEN: usize = 64 * 1024;
/// The most entries a fee quote may have (Circle quotes one per finality threshold).
pub const MAX_QUOTE_ENTRIES: usize = 16;
/// The most bytes of a messages answer read: one message of at most
/// [`cctp::MAX_MESSAGE_LEN`] bytes, shown twice in hex (whole and decoded), and its attestation.
pub const MAX_MESSAGES_ANSWER_LEN: usize = 512 * 1024;
/// The most bytes an attestation may have to be read: [`cctp::MAX_SIGNATURES`] signatures.
pub const MAX_ATTESTATION_LEN: usize = cctp::MAX_SIGNATURES * cctp::SIGNATURE_LEN;

/// A burn as the treasury asks for it: `depositForBurn` of `amount` of `burn_token` by the
/// treasury (`depositor`) through the source network's token messenger, to be minted to
/// `mint_recipient` on the destination network, receivable by anyone (destination caller
/// zero), without hook data. Both ends are EVM networks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Burn {
    /// The source network's CCTP domain.
    pub source_domain: u32,
    /// The destination network's CCTP domain.
    pub destination_domain: u32,
    /// The USDC contract burnt from, on the source network.
    pub burn_token: [u8; 20],
    /// Who the USDC is minted to, on the destination network.
    pub mint_recipient: [u8; 20],
    /// How much is burnt, in the token's units (the recipient gets it less the fee executed).
    pub amount: u128,
    /// The most fee accepted, out of `amount` ([`max_fee`]).
    pub max_fee: u128,
    /// The finality asked for: 1000 (fast) or 2000 (standard), see [`cctp::Finality`].
    pub min_finality_threshold: u32,
    /// The source network's `TokenMessengerV2`: `depositForBurn` is called on it, and it is the
    /// message's sender.
    pub source_messenger: [u8; 20],
    /// The destination network's `TokenMessengerV2`: the message's recipient.
    pub destination_messenger: [u8; 20],
    /// The treasury's address on the source network: who calls `depositForBurn`, the burn
    /// message's sender.
    pub depositor: [u8; 20],
}

impl Burn {
    /// The call data of the burn (`depositForBurn` on [`Burn::source_messenger`]), `0x` hex.
    pub fn deposit_for_burn_call(&self) -> String {
        cctp::deposit_for_burn_call(
            U256::from(self.amount),
            self.destination_domain,
            self.mint_recipient,
            self.burn_token,
            [0; 32],
            U256::from(self.max_fee),
            self.min_finality_threshold,
        )
    }
}

/// Why no max fee is given for a burn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FeeRefused {
    /// The quoted fee is above the most the treasury is configured to pay.
    AboveCeiling {
        /// The quoted fee, in basis points.
        quoted_bps: u32,
        /// The most accepted, in basis points.
        ceiling_bps: u32,
    },
    /// The fee would not be below the amount, which `depositForBurn` refuses (`maxFee` must be
    /// below `amount`): an amount too small for the fee, or a fee of the whole amount.
    NotBelowAmount {
        /// The amount to burn.
        amount: u128,
        /// The quoted fee, in basis points.
        quoted_bps: u32,
    },
}

impl fmt::Display for FeeRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FeeRefused::AboveCeiling {
                quoted_bps,
                ceiling_bps,
            } => write!(
                f,
                "the quoted CCTP fee of {quoted_bps} basis points is above the ceiling of \
                 {ceiling_bps}"
            ),
            FeeRefused::NotBelowAmount { amount, quoted_bps } => write!(
                f,
                "a CCTP fee of {quoted_bps} basis points of {amount} units is not below the \
                 amount, which depositForBurn refuses"
            ),
        }
    }
}

impl std::error::Error for FeeRefused {}

/// The `maxFee` of a `depositForBurn` of `amount` when the route's fee is `quoted_bps` basis
/// points and the treasury pays at most `ceiling_bps`: `ceil(amount × quoted_bps / 10 000)`,
/// so that the fee charged (Circle rounds it its own way) is never above it for want of a unit.
/// A quote of 0 gives 0. Refused when the quote is above the ceiling, or when the fee would not
/// be below the amount (a quote of 10 000 or more, or an amount of a few units). Never
/// overflows: for a quote below 10 000 the fee is at most the amount.
pub fn max_fee(amount: u128, quoted_bps: u32, ceiling_bps: u32) -> Result<u128, FeeRefused> {
    if quoted_bps > ceiling_bps {
        return Err(FeeRefused::AboveCeiling {
            quoted_bps,
            ceiling_bps,
        });
    }
    if quoted_bps == 0 {
        return Ok(0);
    }
    let refused = FeeRefused::NotBelowAmount { amount, quoted_bps };
    if quoted_bps >= BPS {
        return Err(refused);
    }
    // amount = q × 10 000 + r, so ceil(amount × bps / 10 000) = q × bps + ceil(r × bps / 10 000),
    // at most q × 10 000 + r = amount.
    let bps = u128::from(quoted_bps);
    let (quotient, remainder) = (amount / u128::from(BPS), amount % u128::from(BPS));
    let fee = quotient * bps + (remainder * bps).div_ceil(u128::from(BPS));
    if fee >= amount {
        return Err(refused);
    }
    Ok(fee)
}

/// Why an answer of Iris (the fee quote, or the messages of a transaction) is not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnswerError {
    /// More bytes than are read of such an answer; none was read.
    TooLarge {
        /// Its length.
        len: usize,
        /// The most read.
        most: usize,
    },
    /// It is not JSON.
    NotJson,
    /// The fee quote is not a list.
    NotFeeList,
    /// The fee quote has more entries than [`MAX_QUOTE_ENTRIES`].
    TooManyFees {
        /// How many it has.
        count: usize,
    },
    /// An entry of the fee quote lacks a field, or has it in another form than a number.
    BadFeeEntry {
        /// Which entry, from 0.
        index: usize,
        /// The field.
        field: &'static str,
    },
    /// The fee quote has two entries for one finality threshold.
    DuplicateThreshold {
        /// The threshold.
        finality: u32,
    },
    /// The fee quote has no entry for the finality threshold asked for.
    NoFeeFor {
        /// The threshold.
        finality: u32,
    },
    /// The quoted fee is negative or above 10 000 basis points (the whole amount).
    FeeOutOfRange {
        /// The threshold.
        finality: u32,
        /// The fee, as the answer writes it.
        fee: String,
    },
    /// The messages answer has no `messages` list.
    NoMessageList,
    /// The messages answer's list is empty.
    NoMessage,
    /// The messages answer has more than one message: the treasury burns once per transaction.
    TooManyMessages {
        /// How many it has.
        count: usize,
    },
    /// The message lacks a field, or has it in another form than a string.
    MissingField {
        /// The field.
        field: &'static str,
    },
    /// A field is not `0x` and hex digits.
    NotHex {
        /// The field.
        field: &'static str,
    },
    /// A field has more bytes than it may have; it was not decoded.
    FieldTooLong {
        /// The field.
        field: &'static str,
        /// Its length, in bytes.
        len: usize,
        /// The most it may have.
        most: usize,
    },
    /// A field of a complete message is empty.
    EmptyField {
        /// The field.
        field: &'static str,
    },
    /// The message is of another CCTP version than 2.
    NotV2 {
        /// The version, as the answer writes it.
        version: String,
    },
}

impl fmt::Display for AnswerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AnswerError::TooLarge { len, most } => write!(
                f,
                "the attestation service's answer is {len} bytes, more than the {most} read"
            ),
            AnswerError::NotJson => f.write_str("the attestation service's answer is not JSON"),
            AnswerError::NotFeeList => {
                f.write_str("the attestation service's fee quote is not a list of fees")
            }
            AnswerError::TooManyFees { count } => write!(
                f,
                "the attestation service's fee quote has {count} entries, more than the \
                 {MAX_QUOTE_ENTRIES} read"
            ),
            AnswerError::BadFeeEntry { index, field } => write!(
                f,
                "entry {} of the attestation service's fee quote has no numeric {field}",
                index + 1
            ),
            AnswerError::DuplicateThreshold { finality } => write!(
                f,
                "the attestation service's fee quote has more than one entry for finality \
                 threshold {finality}"
            ),
            AnswerError::NoFeeFor { finality } => write!(
                f,
                "the attestation service's fee quote has no entry for finality threshold \
                 {finality}"
            ),
            AnswerError::FeeOutOfRange { finality, fee } => write!(
                f,
                "the attestation service quotes a fee of {fee} basis points for finality \
                 threshold {finality}, not from 0 to {BPS}"
            ),
            AnswerError::NoMessageList => {
                f.write_str("the attestation service's answer has no list of messages")
            }
            AnswerError::NoMessage => {
                f.write_str("the attestation service's answer lists no message")
            }
            AnswerError::TooManyMessages { count } => write!(
                f,
                "the attestation service's answer lists {count} messages for the transaction, \
                 not the one burn the treasury makes in a transaction"
            ),
            AnswerError::MissingField { field } => {
                write!(f, "the attestation service's message has no {field} string")
            }
            AnswerError::NotHex { field } => write!(
                f,
                "the attestation service's message has a {field} that is not 0x and hex digits"
            ),
            AnswerError::FieldTooLong { field, len, most } => write!(
                f,
                "the attestation service's message has a {field} of {len} bytes, more than the \
                 {most} it may have"
            ),
            AnswerError::EmptyField { field } => write!(
                f,
                "the attestation service's complete message has an empty {field}"
            ),
            AnswerError::NotV2 { version } => write!(
                f,
                "the attestation service's message is of CCTP version {version}, not 2"
            ),
        }
    }
}

impl std::error::Error for AnswerError {}

/// The JSON of an answer of at most `most` bytes.
fn json(body: &[u8], most: usize) -> Result<Value, AnswerError> {
    if body.len() > most {
        return Err(AnswerError::TooLarge {
            len: body.len(),
            most,
        });
    }
    serde_json::from_slice(body).map_err(|_| AnswerError::NotJson)
}

/// The fee, in whole basis points, that Iris's quote of a route (the 200 answer of
/// `GET /v2/burn/USDC/fees/{source}/{destination}`:
/// `[{"finalityThreshold": 1000, "minimumFee": 1}, {"finalityThreshold": 2000, "minimumFee": 0}]`)
/// gives for transfers attested at `finality`. The fee is a JSON number of basis points of the
/// amount, which Circle may give with a fraction (`1.3`): it is rounded up to the next whole
/// basis point (`2`), so that a max fee made of it ([`max_fee`]) is never below the fee
/// charged. Other fields of an entry are not read. Refused: an answer over
/// [`MAX_QUOTE_LEN`] bytes, or with more than [`MAX_QUOTE_ENTRIES`] entries; an entry without
/// both numbers (its threshold a whole number below 2³²); two entries for one threshold; no
/// entry for `finality`; and a fee below 0 or above 10 000.
pub fn fee_quote(body: &[u8], finality: u32) -> Result<u32, AnswerError> {
    let Value::Array(entries) = json(body, MAX_QUOTE_LEN)? else {
        return Err(AnswerError::NotFeeList);
    };
    if entries.len() > MAX_QUOTE_ENTRIES {
        return Err(AnswerError::TooManyFees {
            count: entries.len(),
        });
    }
    let mut found = None;
    for (index, entry) in entries.iter().enumerate() {
        let threshold = entry
            .get("finalityThreshold")
            .and_then(Value::as_u64)
            .and_then(|t| u32::try_from(t).ok())
            .ok_or(AnswerError::BadFeeEntry {
                index,
                field: "finalityThreshold",
            })?;
        let fee = match entry.get("minimumFee") {
            Some(Value::Number(fee)) => fee,
            _ => {
                return Err(AnswerError::BadFeeEntry {
                    index,
                    field: "minimumFee",
                })
            }
        };
        if threshold != finality {
            continue;
        }
        if found.is_some() {
            return Err(AnswerError::DuplicateThreshold { finality });
        }
        found = Some(fee);
    }
    let fee = found.ok_or(AnswerError::NoFeeFor { finality })?;
    let out_of_range = || AnswerError::FeeOutOfRange {
        finality,
        fee: fee.to_string(),
    };
    let value = fee.as_f64().ok_or_else(out_of_range)?;
    if !(0.0..=f64::from(BPS)).contains(&value) {
        return Err(out_of_range());
    }
    // In range, so the cast is exact; `-0` reads as 0.
    Ok(value.ceil() as u32)
}

/// A message attested by Iris, and its attestation, as `receiveMessage` takes them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attested {
    /// The message, its nonce and executed finality (and, for a burn, fee) filled in.
    pub message: Vec<u8>,
    /// The attesters' signatures of it.
    pub attestation: Vec<u8>,
}

/// The bytes of a `0x` hex field of a message, at most `most` of them.
fn hex_field(entry: &Value, field: &'static str, most: usize) -> Result<Vec<u8>, AnswerError> {
    let text = entry
        .get(field)
        .and_then(Value::as_str)
        .ok_or(AnswerError::MissingField { field })?;
    let digits = text
        .strip_prefix("0x")
        .ok_or(AnswerError::NotHex { field })?;
    if digits.len() > most.saturating_mul(2) {
        return Err(AnswerError::FieldTooLong {
            field,
            len: digits.len() / 2,
            most,
        });
    }
    let bytes = hex::decode(digits).map_err(|_| AnswerError::NotHex { field })?;
    if bytes.is_empty() {
        return Err(AnswerError::EmptyField { field });
    }
    Ok(bytes)
}

/// What Iris's answer about the burn's transaction (the 200 answer of
/// `GET /v2/messages/{source domain}?transactionHash=0x…`: `{"messages": [{"message": "0x…",
/// "attestation": "0x…", "status": "complete", "eventNonce": …, "cctpVersion": 2,
/// "decodedMessage": …}]}`) gives: `None` while the message is not attested (a `status` other
/// than `complete`, such as `pending_confirmations`, or an attestation of `PENDING`), else the
/// message and its attestation, as bytes. (While Iris has not seen the transaction it answers
/// 404, `{"error": "Message hash not found"}`, which is the caller's to read as "not yet".)
///
/// Only `message`, `attestation`, `status` and `cctpVersion` are read: the decoded fields are
/// Iris's reading of the message, and the message itself is what [`check_attested`] checks and
/// what the attesters signed. Refused: an answer over [`MAX_MESSAGES_ANSWER_LEN`] bytes; no
/// message, or more than one (the treasury burns once per transaction); a missing `status`; a
/// `cctpVersion` other than 2; and, once complete, a message or attestation that is missing,
/// empty, not `0x` and hex, or longer than [`cctp::MAX_MESSAGE_LEN`] and
/// [`MAX_ATTESTATION_LEN`] bytes.
pub fn attested(body: &[u8]) -> Result<Option<Attested>, AnswerError> {
    let answer = json(body, MAX_MESSAGES_ANSWER_LEN)?;
    let Some(Value::Array(messages)) = answer.get("messages") else {
        return Err(AnswerError::NoMessageList);
    };
    let entry = match messages.as_slice() {
        [] => return Err(AnswerError::NoMessage),
        [entry] => entry,
        more => return Err(AnswerError::TooManyMessages { count: more.len() }),
    };
    if let Some(version) = entry.get("cctpVersion") {
        if version.as_u64() != Some(2) {
            return Err(AnswerError::NotV2 {
                version: version.to_string(),
            });
        }
    }
    let status = entry
        .get("status")
        .and_then(Value::as_str)
        .ok_or(AnswerError::MissingField { field: "status" })?;
    if status != "complete" || entry.get("attestation").and_then(Value::as_str) == Some("PENDING") {
        return Ok(None);
    }
    let message = hex_field(entry, "message", cctp::MAX_MESSAGE_LEN)?;
    let attestation = hex_field(entry, "attestation", MAX_ATTESTATION_LEN)?;
    Ok(Some(Attested {
        message,
        attestation,
    }))
}

/// What an attested message checked by [`check_attested`] says the transfer became.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checked {
    /// The message's nonce, which `receiveMessage` spends (and `MessageReceived` shows).
    pub nonce: [u8; 32],
    /// The fee charged, out of the amount: the recipient gets the amount less it.
    pub fee_executed: u128,
    /// The finality it was attested at.
    pub finality_executed: u32,
}

/// Why an attested message is not the one of the treasury's burn, or its attestation does not
/// stand. Each is a sentence naming the field, shown to operators as why a batch is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mismatch {
    /// The message is not a CCTP V2 USDC transfer at all.
    Undecodable(MessageError),
    /// Another source domain.
    SourceDomain {
        /// The burn's.
        expected: u32,
        /// The message's.
        found: u32,
    },
    /// Another destination domain.
    DestinationDomain {
        /// The burn's.
        expected: u32,
        /// The message's.
        found: u32,
    },
    /// Another sender than the source token messenger.
    Sender {
        /// The source token messenger.
        expected: [u8; 20],
        /// The message's sender.
        found: [u8; 32],
    },
    /// Another recipient than the destination token messenger.
    Recipient {
        /// The destination token messenger.
        expected: [u8; 20],
        /// The message's recipient.
        found: [u8; 32],
    },
    /// A destination caller: the message is not receivable by anyone.
    DestinationCaller {
        /// The message's destination caller.
        found: [u8; 32],
    },
    /// Another burn token.
    BurnToken {
        /// The burn's.
        expected: [u8; 20],
        /// The message's.
        found: [u8; 32],
    },
    /// Another mint recipient.
    MintRecipient {
        /// The burn's.
        expected: [u8; 20],
        /// The message's.
        found: [u8; 32],
    },
    /// Another amount.
    Amount {
        /// The burn's.
        expected: u128,
        /// The message's.
        found: U256,
    },
    /// Another max fee.
    MaxFee {
        /// The burn's.
        expected: u128,
        /// The message's.
        found: U256,
    },
    /// Another requested finality.
    MinFinality {
        /// The burn's.
        expected: u32,
        /// The message's.
        found: u32,
    },
    /// Another message sender than the treasury.
    MessageSender {
        /// The treasury's address.
        expected: [u8; 20],
        /// The message's.
        found: [u8; 32],
    },
    /// Hook data, which the treasury's burn has none of.
    HookData {
        /// Its length.
        len: usize,
    },
    /// The nonce is the all-zero placeholder of a message not yet attested.
    PlaceholderNonce,
    /// It was attested at a lower finality than the burn asked for.
    FinalityBelowMinimum {
        /// The finality asked for.
        requested: u32,
        /// The finality attested at.
        executed: u32,
    },
    /// The fee charged is above the burn's max fee.
    FeeAboveMax {
        /// The fee charged.
        fee: U256,
        /// The burn's max fee.
        max_fee: u128,
    },
    /// The attestation does not stand.
    Attestation(AttestationError),
}

/// `0x` and the bytes' hex.
fn hex0x(bytes: &[u8]) -> String {
    format!("0x{}", hex::encode(bytes))
}

/// A message's 32-byte word as shown: the address when it is one, else the whole word.
fn shown(word: &[u8; 32]) -> String {
    match bytes32_to_address(word) {
        Some(address) => hex0x(&address),
        None => hex0x(word),
    }
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let message = "the attested CCTP message";
        match self {
            Mismatch::Undecodable(error) => {
                write!(f, "{message} is not a CCTP V2 USDC transfer: {error}")
            }
            Mismatch::SourceDomain { expected, found } => write!(
                f,
                "{message}'s source domain is {found}, not {expected} where the USDC was burnt"
            ),
            Mismatch::DestinationDomain { expected, found } => write!(
                f,
                "{message}'s destination domain is {found}, not {expected} where the USDC is \
                 to be minted"
            ),
            Mismatch::Sender { expected, found } => write!(
                f,
                "{message}'s sender is {}, not the source token messenger {}",
                shown(found),
                hex0x(expected)
            ),
            Mismatch::Recipient { expected, found } => write!(
                f,
                "{message}'s recipient is {}, not the destination token messenger {}",
                shown(found),
                hex0x(expected)
            ),
            Mismatch::DestinationCaller { found } => write!(
                f,
                "{message}'s destination caller is {}, not zero (receivable by anyone)",
                shown(found)
            ),
            Mismatch::BurnToken { expected, found } => write!(
                f,
                "{message}'s burn token is {}, not {}",
                shown(found),
                hex0x(expected)
            ),
            Mismatch::MintRecipient { expected, found } => write!(
                f,
                "{message}'s mint recipient is {}, not {}",
                shown(found),
                hex0x(expected)
            ),
            Mismatch::Amount { expected, found } => {
                write!(f, "{message}'s amount is {found}, not the {expected} burnt")
            }
            Mismatch::MaxFee { expected, found } => write!(
                f,
                "{message}'s max fee is {found}, not the {expected} the burn allowed"
            ),
            Mismatch::MinFinality { expected, found } => write!(
                f,
                "{message}'s minimum finality threshold is {found}, not the {expected} the \
                 burn asked for"
            ),
            Mismatch::MessageSender { expected, found } => write!(
                f,
                "{message}'s message sender is {}, not the treasury {}",
                shown(found),
                hex0x(expected)
            ),
            Mismatch::HookData { len } => write!(
                f,
                "{message} carries {len} bytes of hook data, which the treasury's burn has none of"
            ),
            Mismatch::PlaceholderNonce => write!(
                f,
                "{message}'s nonce is the all-zero placeholder of a message not yet attested"
            ),
            Mismatch::FinalityBelowMinimum {
                requested,
                executed,
            } => write!(
                f,
                "{message}'s executed finality threshold is {executed}, below the {requested} \
                 the burn asked for"
            ),
            Mismatch::FeeAboveMax { fee, max_fee } => write!(
                f,
                "{message}'s executed fee is {fee}, above the max fee of {max_fee}"
            ),
            Mismatch::Attestation(error) => {
                write!(f, "{message}'s attestation does not stand: {error}")
            }
        }
    }
}

impl std::error::Error for Mismatch {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Mismatch::Undecodable(error) => Some(error),
            Mismatch::Attestation(error) => Some(error),
            _ => None,
        }
    }
}

/// Whether `attested` is the message of `burn`, attested by at least `threshold` of
/// `attesters`: it is a CCTP V2 USDC transfer ([`BurnMessage::decode`]); every field the
/// treasury chose is the burn's (the domains, the sender and recipient token messengers, a zero
/// destination caller, the burn token, the mint recipient, the amount, the max fee, the minimum
/// finality, the treasury as message sender, no hook data); what the attestation service filled
/// in holds (a nonce other than the zero placeholder, a finality at least the one asked for, a
/// fee at most the max fee); and the attestation's signers are attesters, enough of them
/// ([`cctp::check_attestation`]). The first field that differs is the refusal, in that order.
pub fn check_attested(
    burn: &Burn,
    attested: &Attested,
    attesters: &[[u8; 20]],
    threshold: usize,
) -> Result<Checked, Mismatch> {
    let transfer = BurnMessage::decode(&attested.message).map_err(Mismatch::Undecodable)?;
    let (message, body) = (transfer.message(), transfer.body());
    let differs = |found: &[u8; 32], expected: [u8; 20]| *found != address_to_bytes32(expected);

    if message.source_domain != burn.source_domain {
        return Err(Mismatch::SourceDomain {
            expected: burn.source_domain,
            found: message.source_domain,
        });
    }
    if message.destination_domain != burn.destination_domain {
        return Err(Mismatch::DestinationDomain {
            expected: burn.destination_domain,
            found: message.destination_domain,
        });
    }
    if differs(&message.sender, burn.source_messenger) {
        return Err(Mismatch::Sender {
            expected: burn.source_messenger,
            found: message.sender,
        });
    }
    if differs(&message.recipient, burn.destination_messenger) {
        return Err(Mismatch::Recipient {
            expected: burn.destination_messenger,
            found: message.recipient,
        });
    }
    if !message.is_permissionless() {
        return Err(Mismatch::DestinationCaller {
            found: message.destination_caller,
        });
    }
    if differs(&body.burn_token, burn.burn_token) {
        return Err(Mismatch::BurnToken {
            expected: burn.burn_token,
            found: body.burn_token,
        });
    }
    if differs(&body.mint_recipient, burn.mint_recipient) {
        return Err(Mismatch::MintRecipient {
            expected: burn.mint_recipient,
            found: body.mint_recipient,
        });
    }
    if body.amount != U256::from(burn.amount) {
        return Err(Mismatch::Amount {
            expected: burn.amount,
            found: body.amount,
        });
    }
    if body.max_fee != U256::from(burn.max_fee) {
        return Err(Mismatch::MaxFee {
            expected: burn.max_fee,
            found: body.max_fee,
        });
    }
    if message.min_finality_threshold != burn.min_finality_threshold {
        return Err(Mismatch::MinFinality {
            expected: burn.min_finality_threshold,
            found: message.min_finality_threshold,
        });
    }
    if differs(&body.message_sender, burn.depositor) {
        return Err(Mismatch::MessageSender {
            expected: burn.depositor,
            found: body.message_sender,
        });
    }
    if body.has_hooks() {
        return Err(Mismatch::HookData {
            len: body.hook_data.len(),
        });
    }
    if message.has_placeholder_nonce() {
        return Err(Mismatch::PlaceholderNonce);
    }
    if message.finality_threshold_executed < burn.min_finality_threshold {
        return Err(Mismatch::FinalityBelowMinimum {
            requested: burn.min_finality_threshold,
            executed: message.finality_threshold_executed,
        });
    }
    let fee_above = Mismatch::FeeAboveMax {
        fee: body.fee_executed,
        max_fee: burn.max_fee,
    };
    let fee_executed = body
        .fee_executed
        .to_u128()
        .filter(|fee| *fee <= burn.max_fee)
        .ok_or(fee_above)?;
    cctp::check_attestation(
        &attested.message,
        &attested.attestation,
        attesters,
        threshold,
    )
    .map_err(Mismatch::Attestation)?;
    Ok(Checked {
        nonce: message.nonce,
        fee_executed,
        finality_executed: message.finality_threshold_executed,
    })
}

/// One log of a transaction's receipt, as the node gives it (`address`, `topics`, `data`),
/// decoded from hex by the caller.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Log {
    /// The contract that emitted it.
    pub address: [u8; 20],
    /// Its topics: the event's topic, then its indexed arguments.
    pub topics: Vec<[u8; 32]>,
    /// Its other arguments, ABI-encoded.
    pub data: Vec<u8>,
}

/// The logs of `address` with `event`'s topic and exactly `topics` topics, in log order.
fn events<'a>(
    logs: &'a [Log],
    address: [u8; 20],
    event: &str,
    topics: usize,
) -> impl Iterator<Item = &'a Log> {
    let topic = cctp::event_topic(event);
    logs.iter().filter(move |log| {
        log.address == address && log.topics.len() == topics && log.topics.first() == Some(&topic)
    })
}

/// Word `index` of ABI data, if it has it.
fn word(data: &[u8], index: usize) -> Option<&[u8; 32]> {
    let start = index.checked_mul(32)?;
    data.get(start..start.checked_add(32)?)?.try_into().ok()
}

/// An ABI `uint256` word as a `u128`, if it fits.
fn word_u128(word: &[u8; 32]) -> Option<u128> {
    U256(*word).to_u128()
}

/// An ABI `uint32` word, if it is one (its first 28 bytes zero).
fn word_u32(word: &[u8; 32]) -> Option<u32> {
    let (padding, value) = word.split_last_chunk::<4>().map(|(p, v)| (p, *v))?;
    padding
        .iter()
        .all(|b| *b == 0)
        .then_some(u32::from_be_bytes(value))
}

/// An ABI offset or length word, if it fits a `usize`.
fn word_usize(word: &[u8; 32]) -> Option<usize> {
    word_u128(word).and_then(|n| usize::try_from(n).ok())
}

/// The `bytes` of ABI data whose head is `head_words` words, the offset of the `bytes` being
/// word `at` of it: encoded as Solidity encodes an event's data, the offset pointing just past
/// the head, then the length, then the bytes, zero-padded to whole words, and nothing else. At
/// most [`cctp::MAX_MESSAGE_LEN`] bytes; `None` for anything else.
fn abi_bytes(data: &[u8], head_words: usize, at: usize) -> Option<&[u8]> {
    let head = head_words.checked_mul(32)?;
    if word_usize(word(data, at)?)? != head {
        return None;
    }
    let len = word_usize(word(data, head_words)?)?;
    if len > cctp::MAX_MESSAGE_LEN {
        return None;
    }
    let start = head.checked_add(32)?;
    if data.len() != start.checked_add(len.div_ceil(32) * 32)? {
        return None;
    }
    let (bytes, padding) = data.get(start..)?.split_at_checked(len)?;
    padding.iter().all(|b| *b == 0).then_some(bytes)
}

/// A mint on the destination network, as its `MintAndWithdraw` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Minted {
    /// What the mint recipient received: the amount burnt less the fee.
    pub amount: u128,
    /// The fee collected (minted to the messenger's fee recipient).
    pub fee: u128,
}

/// The mint of `token` to `recipient` in a destination network's receipt: the first
/// `MintAndWithdraw(address indexed mintRecipient, uint256 amount, address indexed mintToken,
/// uint256 feeCollected)` of the token messenger `messenger` for them (a receipt of one
/// `receiveMessage` has one). A log of another contract, or not so encoded, or with numbers
/// above `u128`, is not one.
pub fn minted(
    logs: &[Log],
    messenger: [u8; 20],
    recipient: [u8; 20],
    token: [u8; 20],
) -> Option<Minted> {
    let (recipient, token) = (address_to_bytes32(recipient), address_to_bytes32(token));
    events(logs, messenger, cctp::MINT_AND_WITHDRAW_EVENT, 3).find_map(|log| {
        if log.topics.get(1) != Some(&recipient)
            || log.topics.get(2) != Some(&token)
            || log.data.len() != 64
        {
            return None;
        }
        Some(Minted {
            amount: word_u128(word(&log.data, 0)?)?,
            fee: word_u128(word(&log.data, 1)?)?,
        })
    })
}

/// Whether a destination network's receipt shows the message of nonce `nonce` received: a
/// `MessageReceived(address indexed caller, uint32 sourceDomain, bytes32 indexed nonce, bytes32
/// sender, uint32 indexed finalityThresholdExecuted, bytes messageBody)` of the message
/// transmitter `transmitter` with that nonce, whoever called it. How the treasury learns that
/// a message was received by someone else's call (and its own refused as "Nonce already
/// used"), once it has the receipt of that call.
pub fn received(logs: &[Log], transmitter: [u8; 20], nonce: [u8; 32]) -> bool {
    events(logs, transmitter, cctp::MESSAGE_RECEIVED_EVENT, 4)
        .any(|log| log.topics.get(2) == Some(&nonce))
}

/// A burn on the source network, as its `DepositForBurn` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Burnt {
    /// How much was burnt.
    pub amount: u128,
    /// Who it is to be minted to, as a 32-byte word.
    pub mint_recipient: [u8; 32],
    /// The destination network's CCTP domain.
    pub destination_domain: u32,
    /// The destination network's token messenger, as a 32-byte word.
    pub destination_messenger: [u8; 32],
    /// The only caller who may receive it; all zero for anyone.
    pub destination_caller: [u8; 32],
    /// The most fee accepted.
    pub max_fee: u128,
    /// The finality asked for.
    pub min_finality_threshold: u32,
    /// Hook data for the destination; empty for none.
    pub hook_data: Vec<u8>,
}

impl Burnt {
    /// Whether it is the burn the treasury asked for: the same amount, mint recipient,
    /// destination domain and messenger, max fee and finality, receivable by anyone, without
    /// hook data. (Its token, depositor and messenger are what [`burnt`] found it by.)
    pub fn is(&self, burn: &Burn) -> bool {
        self.amount == burn.amount
            && self.mint_recipient == address_to_bytes32(burn.mint_recipient)
            && self.destination_domain == burn.destination_domain
            && self.destination_messenger == address_to_bytes32(burn.destination_messenger)
            && self.destination_caller == [0; 32]
            && self.max_fee == burn.max_fee
            && self.min_finality_threshold == burn.min_finality_threshold
            && self.hook_data.is_empty()
    }
}

/// The burn of `token` by `depositor` in a source network's receipt: the first
/// `DepositForBurn(address indexed burnToken, uint256 amount, address indexed depositor,
/// bytes32 mintRecipient, uint32 destinationDomain, bytes32 destinationTokenMessenger, bytes32
/// destinationCaller, uint256 maxFee, uint32 indexed minFinalityThreshold, bytes hookData)` of
/// the token messenger `messenger` for them. A log of another contract, or not so encoded, or
/// with numbers above `u128`, is not one.
pub fn burnt(
    logs: &[Log],
    messenger: [u8; 20],
    token: [u8; 20],
    depositor: [u8; 20],
) -> Option<Burnt> {
    let (token, depositor) = (address_to_bytes32(token), address_to_bytes32(depositor));
    events(logs, messenger, cctp::DEPOSIT_FOR_BURN_EVENT, 4).find_map(|log| {
        if log.topics.get(1) != Some(&token) || log.topics.get(2) != Some(&depositor) {
            return None;
        }
        let data = &log.data;
        Some(Burnt {
            amount: word_u128(word(data, 0)?)?,
            mint_recipient: *word(data, 1)?,
            destination_domain: word_u32(word(data, 2)?)?,
            destination_messenger: *word(data, 3)?,
            destination_caller: *word(data, 4)?,
            max_fee: word_u128(word(data, 5)?)?,
            min_finality_threshold: word_u32(log.topics.get(3)?)?,
            hook_data: abi_bytes(data, 7, 6)?.to_vec(),
        })
    })
}

/// The message of the first `MessageSent(bytes message)` of the message transmitter
/// `transmitter` in a source network's receipt: the message as emitted, its nonce and executed
/// finality still zero (Iris fills them in; [`attested`] gives the message as signed). A log of
/// another contract, or whose data is not one ABI-encoded `bytes` of at most
/// [`cctp::MAX_MESSAGE_LEN`] bytes, is not one.
pub fn message_sent(logs: &[Log], transmitter: [u8; 20]) -> Option<Vec<u8>> {
    events(logs, transmitter, cctp::MESSAGE_SENT_EVENT, 1)
        .find_map(|log| abi_bytes(&log.data, 1, 0).map(<[u8]>::to_vec))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cctp::test_attesters::attest as attest_by;
    use crate::cctp::{BurnBody, Message, BURN_BODY_VERSION, HEADER_LEN, MESSAGE_VERSION};
    use serde_json::json;
    use sha3::{Digest, Keccak256};

    const TREASURY: [u8; 20] = [0x7e; 20];
    const SOURCE_MESSENGER: [u8; 20] = [0x51; 20];
    const DESTINATION_MESSENGER: [u8; 20] = [0xd1; 20];
    const SOURCE_USDC: [u8; 20] = [0x5c; 20];
    const DESTINATION_USDC: [u8; 20] = [0xdc; 20];
    const MERCHANT: [u8; 20] = [0x3e; 20];
    const TRANSMITTER: [u8; 20] = [0x7a; 20];
    const NONCE: [u8; 32] = [0x4e; 32];

    /// A fast burn of 2.5 USDC from Polygon PoS (7) to Base (6).
    fn burn() -> Burn {
        Burn {
            source_domain: 7,
            destination_domain: 6,
            burn_token: SOURCE_USDC,
            mint_recipient: MERCHANT,
            amount: 2_500_000,
            max_fee: 250,
            min_finality_threshold: 1000,
            source_messenger: SOURCE_MESSENGER,
            destination_messenger: DESTINATION_MESSENGER,
            depositor: TREASURY,
        }
    }

    /// The message of `burn()` as Iris attests it at 1000, for a fee of 200.
    fn header() -> Message {
        Message {
            version: MESSAGE_VERSION,
            source_domain: 7,
            destination_domain: 6,
            nonce: NONCE,
            sender: address_to_bytes32(SOURCE_MESSENGER),
            recipient: address_to_bytes32(DESTINATION_MESSENGER),
            destination_caller: [0; 32],
            min_finality_threshold: 1000,
            finality_threshold_executed: 1000,
            message_body: Vec::new(),
        }
    }

    fn body() -> BurnBody {
        BurnBody {
            version: BURN_BODY_VERSION,
            burn_token: address_to_bytes32(SOURCE_USDC),
            mint_recipient: address_to_bytes32(MERCHANT),
            amount: U256::from(2_500_000),
            message_sender: address_to_bytes32(TREASURY),
            max_fee: U256::from(250),
            fee_executed: U256::from(200),
            expiration_block: U256::ZERO,
            hook_data: Vec::new(),
        }
    }

    fn raw(message: Message, body: BurnBody) -> Vec<u8> {
        let mut message = message;
        message.message_body = body.encode();
        message.encode()
    }

    /// The attesters' addresses, ascending, and `message` attested by all of them.
    fn attest(message: &[u8]) -> (Vec<[u8; 20]>, Attested) {
        let (addresses, signatures) = attest_by(b'b', 2, message);
        let attested = Attested {
            message: message.to_vec(),
            attestation: signatures.concat(),
        };
        (addresses, attested)
    }

    fn check(message: Message, body: BurnBody) -> Result<Checked, Mismatch> {
        let (attesters, attested) = attest(&raw(message, body));
        check_attested(&burn(), &attested, &attesters, 2)
    }

    #[test]
    fn the_max_fee_is_the_quote_rounded_up() {
        assert_eq!(max_fee(1_000_000, 1, 10), Ok(100));
        assert_eq!(max_fee(1_000_001, 1, 10), Ok(101));
        // 12 345 × 3 / 10 000 = 3.7035: 4.
        assert_eq!(max_fee(12_345, 3, 3), Ok(4));
        assert_eq!(max_fee(2_500_000, 14, 20), Ok(3_500));
        assert_eq!(max_fee(1, 0, 0), Ok(0));
        assert_eq!(max_fee(0, 0, 0), Ok(0));
        assert_eq!(max_fee(u128::MAX, 0, 5), Ok(0));
        // The widest amount, the widest quote below the whole: no overflow, and exactly
        // ceil(amount × 9 999 / 10 000) = amount − floor(amount / 10 000).
        assert_eq!(
            max_fee(u128::MAX, 9_999, u32::MAX),
            Ok(u128::MAX - u128::MAX / 10_000)
        );
        assert_eq!(
            max_fee(u128::MAX, 1, 1),
            Ok(u128::MAX / 10_000 + 1),
            "the remainder rounds up"
        );
    }

    #[test]
    fn a_fee_above_the_ceiling_or_not_below_the_amount_is_refused() {
        assert_eq!(
            max_fee(1_000_000, 15, 14),
            Err(FeeRefused::AboveCeiling {
                quoted_bps: 15,
                ceiling_bps: 14
            })
        );
        assert_eq!(
            max_fee(1_000_000, 1, 0),
            Err(FeeRefused::AboveCeiling {
                quoted_bps: 1,
                ceiling_bps: 0
            })
        );
        // One unit at one basis point: a fee of one unit, not below the amount.
        assert_eq!(
            max_fee(1, 1, 10),
            Err(FeeRefused::NotBelowAmount {
                amount: 1,
                quoted_bps: 1
            })
        );
        assert_eq!(max_fee(2, 1, 10), Ok(1));
        for quoted in [BPS, BPS + 1, u32::MAX] {
            assert_eq!(
                max_fee(u128::MAX, quoted, u32::MAX),
                Err(FeeRefused::NotBelowAmount {
                    amount: u128::MAX,
                    quoted_bps: quoted
                })
            );
        }
        assert_eq!(
            FeeRefused::AboveCeiling {
                quoted_bps: 15,
                ceiling_bps: 14
            }
            .to_string(),
            "the quoted CCTP fee of 15 basis points is above the ceiling of 14"
        );
        assert_ne!(
            FeeRefused::NotBelowAmount {
                amount: 1,
                quoted_bps: 1
            }
            .to_string(),
            ""
        );
    }

    fn quote(body: &Value, finality: u32) -> Result<u32, AnswerError> {
        fee_quote(body.to_string().as_bytes(), finality)
    }

    #[test]
    fn the_fee_quote_gives_the_thresholds_fee_rounded_up() {
        let answer = br#"[{"finalityThreshold":1000,"minimumFee":1},{"finalityThreshold":2000,"minimumFee":0}]"#;
        assert_eq!(fee_quote(answer, 1000), Ok(1));
        assert_eq!(fee_quote(answer, 2000), Ok(0));
        assert_eq!(
            fee_quote(answer, 1500),
            Err(AnswerError::NoFeeFor { finality: 1500 })
        );
        let one = |fee: Value| json!([{"finalityThreshold": 1000, "minimumFee": fee}]);
        assert_eq!(quote(&one(json!(1.3)), 1000), Ok(2));
        assert_eq!(quote(&one(json!(2.0)), 1000), Ok(2));
        assert_eq!(quote(&one(json!(0.0001)), 1000), Ok(1));
        assert_eq!(quote(&one(json!(10_000)), 1000), Ok(10_000));
        assert_eq!(
            fee_quote(b"[{\"finalityThreshold\":1000,\"minimumFee\":-0}]", 1000),
            Ok(0)
        );
        // Other fields are not read; Circle's answer may carry more.
        let more = json!([{"finalityThreshold": 1000, "minimumFee": 1, "forwardFee": {"low": 3}}]);
        assert_eq!(quote(&more, 1000), Ok(1));
        // The standard-only quote of a route without fast transfers.
        let standard = json!([{"finalityThreshold": 2000, "minimumFee": 0}]);
        assert_eq!(
            quote(&standard, 1000),
            Err(AnswerError::NoFeeFor { finality: 1000 })
        );
    }

    #[test]
    fn a_fee_quote_out_of_shape_is_refused_by_name() {
        let one = |fee: Value| json!([{"finalityThreshold": 1000, "minimumFee": fee}]);
        for fee in [json!(-1), json!(-0.5), json!(10_000.5), json!(1e300)] {
            assert_eq!(
                quote(&one(fee.clone()), 1000),
                Err(AnswerError::FeeOutOfRange {
                    finality: 1000,
                    fee: fee.to_string()
                }),
                "{fee}"
            );
        }
        for fee in [json!("1"), json!(null), json!([1]), json!(true)] {
            assert_eq!(
                quote(&one(fee.clone()), 1000),
                Err(AnswerError::BadFeeEntry {
                    index: 0,
                    field: "minimumFee"
                }),
                "{fee}"
            );
        }
        for threshold in [
            json!("1000"),
            json!(-1),
            json!(1000.5),
            json!(4_294_967_296u64),
        ] {
            let entry = json!([{"finalityThreshold": 2000, "minimumFee": 0},
                               {"finalityThreshold": threshold, "minimumFee": 1}]);
            assert_eq!(
                quote(&entry, 2000),
                Err(AnswerError::BadFeeEntry {
                    index: 1,
                    field: "finalityThreshold"
                }),
                "{threshold}"
            );
        }
        let twice = json!([{"finalityThreshold": 1000, "minimumFee": 1},
                           {"finalityThreshold": 1000, "minimumFee": 2}]);
        assert_eq!(
            quote(&twice, 1000),
            Err(AnswerError::DuplicateThreshold { finality: 1000 })
        );
        assert_eq!(
            quote(&json!({"fees": []}), 1000),
            Err(AnswerError::NotFeeList)
        );
        assert_eq!(
            quote(&json!([]), 1000),
            Err(AnswerError::NoFeeFor { finality: 1000 })
        );
        assert_eq!(
            quote(&json!([1]), 1000).unwrap_err(),
            AnswerError::BadFeeEntry {
                index: 0,
                field: "finalityThreshold"
            }
        );
        let many = Value::Array(vec![json!({"finalityThreshold": 1, "minimumFee": 0}); 17]);
        assert_eq!(quote(&many, 1), Err(AnswerError::TooManyFees { count: 17 }));
        assert_eq!(fee_quote(b"", 1000), Err(AnswerError::NotJson));
        assert_eq!(
            fee_quote(b"[{\"finalityThreshold\":", 1000),
            Err(AnswerError::NotJson)
        );
        let huge = vec![b' '; MAX_QUOTE_LEN + 1];
        assert_eq!(
            fee_quote(&huge, 1000),
            Err(AnswerError::TooLarge {
                len: MAX_QUOTE_LEN + 1,
                most: MAX_QUOTE_LEN
            })
        );
    }

    /// One entry of Iris's answer, in its V2 shape (as `xtask attestation` gives it).
    fn entry(attested: &Attested, status: &str) -> Value {
        json!({
            "message": hex0x(&attested.message),
            "eventNonce": hex0x(&NONCE),
            "attestation": hex0x(&attested.attestation),
            "decodedMessage": {"sourceDomain": "7", "destinationDomain": "6"},
            "cctpVersion": 2,
            "status": status,
            "delayReason": null,
        })
    }

    fn answer(entries: Vec<Value>) -> Vec<u8> {
        json!({ "messages": entries }).to_string().into_bytes()
    }

    #[test]
    fn irises_answer_is_nothing_until_complete_then_the_message() {
        let (_, signed) = attest(&raw(header(), body()));
        assert_eq!(
            attested(&answer(vec![entry(&signed, "complete")])),
            Ok(Some(signed.clone()))
        );
        // Waiting: Iris's pending shape, and a complete status whose attestation is not in yet.
        let pending = json!({"message": "0x", "attestation": "PENDING", "eventNonce": "0x",
                             "cctpVersion": 2, "status": "pending_confirmations"});
        assert_eq!(attested(&answer(vec![pending])), Ok(None));
        let mut early = entry(&signed, "complete");
        early["attestation"] = json!("PENDING");
        assert_eq!(attested(&answer(vec![early])), Ok(None));
        // A status other than complete is waiting, whatever the rest holds.
        let mut odd = entry(&signed, "pending");
        odd["message"] = json!("garbage");
        assert_eq!(attested(&answer(vec![odd])), Ok(None));
        // Without cctpVersion, the message is read all the same.
        let mut unversioned = entry(&signed, "complete");
        unversioned.as_object_mut().unwrap().remove("cctpVersion");
        assert_eq!(
            attested(&answer(vec![unversioned])),
            Ok(Some(signed.clone()))
        );
    }

    #[test]
    fn irises_answer_out_of_shape_is_refused_by_name() {
        let (_, signed) = attest(&raw(header(), body()));
        let complete = entry(&signed, "complete");
        let two = answer(vec![complete.clone(), complete.clone()]);
        assert_eq!(
            attested(&two),
            Err(AnswerError::TooManyMessages { count: 2 })
        );
        let pending = entry(&signed, "pending_confirmations");
        assert_eq!(
            attested(&answer(vec![pending.clone(), pending])),
            Err(AnswerError::TooManyMessages { count: 2 })
        );
        assert_eq!(attested(&answer(vec![])), Err(AnswerError::NoMessage));
        for body in [json!({}), json!({"messages": {}}), json!([]), json!(null)] {
            assert_eq!(
                attested(body.to_string().as_bytes()),
                Err(AnswerError::NoMessageList),
                "{body}"
            );
        }
        assert_eq!(attested(b"{\"messages\":["), Err(AnswerError::NotJson));
        assert_eq!(attested(b"\xff\xfe"), Err(AnswerError::NotJson));

        let changed = |field: &str, value: Value| {
            let mut e = complete.clone();
            e[field] = value;
            attested(&answer(vec![e]))
        };
        let without = |field: &str| {
            let mut e = complete.clone();
            e.as_object_mut().unwrap().remove(field);
            attested(&answer(vec![e]))
        };
        assert_eq!(
            without("status"),
            Err(AnswerError::MissingField { field: "status" })
        );
        assert_eq!(
            changed("status", json!(1)),
            Err(AnswerError::MissingField { field: "status" })
        );
        for field in ["message", "attestation"] {
            assert_eq!(
                without(field),
                Err(AnswerError::MissingField { field }),
                "{field}"
            );
            assert_eq!(
                changed(field, json!(7)),
                Err(AnswerError::MissingField { field })
            );
            for bad in ["0xzz", "0x123", "abcd", "", "0X12"] {
                assert_eq!(
                    changed(field, json!(bad)),
                    Err(AnswerError::NotHex { field }),
                    "{field} {bad}"
                );
            }
            assert_eq!(
                changed(field, json!("0x")),
                Err(AnswerError::EmptyField { field })
            );
        }
        let long = |len: usize| json!(hex0x(&vec![0xab; len]));
        assert_eq!(
            changed("message", long(cctp::MAX_MESSAGE_LEN + 1)),
            Err(AnswerError::FieldTooLong {
                field: "message",
                len: cctp::MAX_MESSAGE_LEN + 1,
                most: cctp::MAX_MESSAGE_LEN
            })
        );
        assert!(changed("message", long(cctp::MAX_MESSAGE_LEN))
            .unwrap()
            .is_some());
        assert_eq!(
            changed("attestation", long(MAX_ATTESTATION_LEN + 65)),
            Err(AnswerError::FieldTooLong {
                field: "attestation",
                len: MAX_ATTESTATION_LEN + 65,
                most: MAX_ATTESTATION_LEN
            })
        );
        for version in [json!(1), json!("2"), json!(null)] {
            assert_eq!(
                changed("cctpVersion", version.clone()),
                Err(AnswerError::NotV2 {
                    version: version.to_string()
                }),
                "{version}"
            );
        }
        let huge = vec![b' '; MAX_MESSAGES_ANSWER_LEN + 1];
        assert_eq!(
            attested(&huge),
            Err(AnswerError::TooLarge {
                len: MAX_MESSAGES_ANSWER_LEN + 1,
                most: MAX_MESSAGES_ANSWER_LEN
            })
        );
    }

    #[test]
    fn every_answer_refusal_is_a_sentence_of_its_own() {
        let sentences = [
            AnswerError::TooLarge { len: 2, most: 1 },
            AnswerError::NotJson,
            AnswerError::NotFeeList,
            AnswerError::TooManyFees { count: 17 },
            AnswerError::BadFeeEntry {
                index: 0,
                field: "minimumFee",
            },
            AnswerError::DuplicateThreshold { finality: 1000 },
            AnswerError::NoFeeFor { finality: 1000 },
            AnswerError::FeeOutOfRange {
                finality: 1000,
                fee: "-1".into(),
            },
            AnswerError::NoMessageList,
            AnswerError::NoMessage,
            AnswerError::TooManyMessages { count: 2 },
            AnswerError::MissingField { field: "message" },
            AnswerError::NotHex { field: "message" },
            AnswerError::FieldTooLong {
                field: "message",
                len: 2,
                most: 1,
            },
            AnswerError::EmptyField { field: "message" },
            AnswerError::NotV2 {
                version: "1".into(),
            },
        ]
        .map(|e| e.to_string());
        for (i, sentence) in sentences.iter().enumerate() {
            assert!(sentence.starts_with("the ") || sentence.starts_with("entry "));
            assert!(!sentences[..i].contains(sentence), "{sentence}");
        }
        assert_eq!(
            AnswerError::NoFeeFor { finality: 1000 }.to_string(),
            "the attestation service's fee quote has no entry for finality threshold 1000"
        );
    }

    #[test]
    fn the_treasurys_attested_burn_is_checked() {
        assert_eq!(
            check(header(), body()),
            Ok(Checked {
                nonce: NONCE,
                fee_executed: 200,
                finality_executed: 1000
            })
        );
        // Attested at a higher finality than asked for, with no fee; a fee of the max fee.
        let standard = Message {
            finality_threshold_executed: 2000,
            ..header()
        };
        let free = BurnBody {
            fee_executed: U256::ZERO,
            ..body()
        };
        assert_eq!(
            check(standard, free),
            Ok(Checked {
                nonce: NONCE,
                fee_executed: 0,
                finality_executed: 2000
            })
        );
        let most = BurnBody {
            fee_executed: U256::from(250),
            expiration_block: U256::from(123_456),
            ..body()
        };
        assert_eq!(check(header(), most).map(|c| c.fee_executed), Ok(250));
        // The call the treasury burns with.
        assert_eq!(
            burn().deposit_for_burn_call(),
            cctp::deposit_for_burn_call(
                U256::from(2_500_000),
                6,
                MERCHANT,
                SOURCE_USDC,
                [0; 32],
                U256::from(250),
                1000
            )
        );
    }

    #[test]
    fn every_field_that_differs_is_refused_by_name() {
        let word = |byte: u8| address_to_bytes32([byte; 20]);
        let h = header;
        let b = body;
        let cases: Vec<(Message, BurnBody, Mismatch)> = vec![
            (
                Message {
                    source_domain: 0,
                    ..h()
                },
                b(),
                Mismatch::SourceDomain {
                    expected: 7,
                    found: 0,
                },
            ),
            (
                Message {
                    destination_domain: 3,
                    ..h()
                },
                b(),
                Mismatch::DestinationDomain {
                    expected: 6,
                    found: 3,
                },
            ),
            (
                Message {
                    sender: word(0x99),
                    ..h()
                },
                b(),
                Mismatch::Sender {
                    expected: SOURCE_MESSENGER,
                    found: word(0x99),
                },
            ),
            (
                Message {
                    recipient: [0xff; 32],
                    ..h()
                },
                b(),
                Mismatch::Recipient {
                    expected: DESTINATION_MESSENGER,
                    found: [0xff; 32],
                },
            ),
            (
                Message {
                    destination_caller: word(0x01),
                    ..h()
                },
                b(),
                Mismatch::DestinationCaller { found: word(0x01) },
            ),
            (
                h(),
                BurnBody {
                    burn_token: word(0x98),
                    ..b()
                },
                Mismatch::BurnToken {
                    expected: SOURCE_USDC,
                    found: word(0x98),
                },
            ),
            (
                h(),
                BurnBody {
                    mint_recipient: word(0x97),
                    ..b()
                },
                Mismatch::MintRecipient {
                    expected: MERCHANT,
                    found: word(0x97),
                },
            ),
            (
                h(),
                BurnBody {
                    amount: U256::MAX,
                    ..b()
                },
                Mismatch::Amount {
                    expected: 2_500_000,
                    found: U256::MAX,
                },
            ),
            (
                h(),
                BurnBody {
                    max_fee: U256::from(251),
                    ..b()
                },
                Mismatch::MaxFee {
                    expected: 250,
                    found: U256::from(251),
                },
            ),
            (
                Message {
                    min_finality_threshold: 2000,
                    finality_threshold_executed: 2000,
                    ..h()
                },
                b(),
                Mismatch::MinFinality {
                    expected: 1000,
                    found: 2000,
                },
            ),
            (
                h(),
                BurnBody {
                    message_sender: word(0x96),
                    ..b()
                },
                Mismatch::MessageSender {
                    expected: TREASURY,
                    found: word(0x96),
                },
            ),
            (
                h(),
                BurnBody {
                    hook_data: vec![1, 2, 3],
                    ..b()
                },
                Mismatch::HookData { len: 3 },
            ),
            (
                Message {
                    nonce: [0; 32],
                    ..h()
                },
                b(),
                Mismatch::PlaceholderNonce,
            ),
            (
                Message {
                    finality_threshold_executed: 999,
                    ..h()
                },
                b(),
                Mismatch::FinalityBelowMinimum {
                    requested: 1000,
                    executed: 999,
                },
            ),
            (
                Message {
                    finality_threshold_executed: 0,
                    ..h()
                },
                b(),
                Mismatch::FinalityBelowMinimum {
                    requested: 1000,
                    executed: 0,
                },
            ),
            (
                h(),
                BurnBody {
                    fee_executed: U256::from(251),
                    ..b()
                },
                Mismatch::FeeAboveMax {
                    fee: U256::from(251),
                    max_fee: 250,
                },
            ),
            (
                h(),
                BurnBody {
                    fee_executed: U256::MAX,
                    ..b()
                },
                Mismatch::FeeAboveMax {
                    fee: U256::MAX,
                    max_fee: 250,
                },
            ),
        ];
        for (message, body, mismatch) in cases {
            assert_eq!(check(message, body), Err(mismatch), "{mismatch}");
        }

        // Not a transfer at all.
        let (attesters, mut attested) = attest(&raw(header(), body()));
        attested.message.truncate(HEADER_LEN);
        assert_eq!(
            check_attested(&burn(), &attested, &attesters, 2),
            Err(Mismatch::Undecodable(MessageError::TooShortBody { len: 0 }))
        );
        let unknown = Message {
            destination_domain: 4,
            ..header()
        };
        assert_eq!(
            check(unknown, body()),
            Err(Mismatch::Undecodable(
                MessageError::UnknownDestinationDomain { domain: 4 }
            ))
        );
    }

    #[test]
    fn the_attestation_must_stand() {
        let message = raw(header(), body());
        let (attesters, attested) = attest(&message);
        let burn = burn();
        assert!(check_attested(&burn, &attested, &attesters, 2).is_ok());
        assert_eq!(
            check_attested(&burn, &attested, &attesters, 3),
            Err(Mismatch::Attestation(AttestationError::BelowThreshold {
                signatures: 2,
                threshold: 3
            }))
        );
        assert_eq!(
            check_attested(&burn, &attested, &attesters[..1], 1),
            Err(Mismatch::Attestation(AttestationError::NotAttester {
                index: 1,
                signer: attesters[1]
            }))
        );
        // Signed for another message (the fee changed after signing).
        let other = raw(
            header(),
            BurnBody {
                fee_executed: U256::from(1),
                ..body()
            },
        );
        let forged = Attested {
            message: other,
            attestation: attested.attestation.clone(),
        };
        assert!(matches!(
            check_attested(&burn, &forged, &attesters, 2),
            Err(Mismatch::Attestation(_))
        ));
        let empty = Attested {
            attestation: Vec::new(),
            ..attested
        };
        assert_eq!(
            check_attested(&burn, &empty, &attesters, 2),
            Err(Mismatch::Attestation(AttestationError::Empty))
        );
    }

    #[test]
    fn every_mismatch_is_a_sentence_naming_its_field() {
        let w = [0xab; 32];
        let a = [0xcd; 20];
        let cases = [
            (
                Mismatch::Undecodable(MessageError::TooShortHeader { len: 3 }),
                "not a CCTP V2 USDC transfer",
            ),
            (
                Mismatch::SourceDomain {
                    expected: 7,
                    found: 0,
                },
                "source domain is 0, not 7",
            ),
            (
                Mismatch::DestinationDomain {
                    expected: 6,
                    found: 3,
                },
                "destination domain is 3, not 6",
            ),
            (
                Mismatch::Sender {
                    expected: a,
                    found: w,
                },
                "sender is 0xabab",
            ),
            (
                Mismatch::Recipient {
                    expected: a,
                    found: w,
                },
                "recipient is",
            ),
            (
                Mismatch::DestinationCaller { found: w },
                "destination caller",
            ),
            (
                Mismatch::BurnToken {
                    expected: a,
                    found: w,
                },
                "burn token",
            ),
            (
                Mismatch::MintRecipient {
                    expected: a,
                    found: address_to_bytes32([0x12; 20]),
                },
                "mint recipient is 0x1212121212121212121212121212121212121212, not 0xcdcd",
            ),
            (
                Mismatch::Amount {
                    expected: 5,
                    found: U256::from(6),
                },
                "amount is 6, not the 5 burnt",
            ),
            (
                Mismatch::MaxFee {
                    expected: 5,
                    found: U256::from(6),
                },
                "max fee is 6",
            ),
            (
                Mismatch::MinFinality {
                    expected: 1000,
                    found: 2000,
                },
                "minimum finality threshold is 2000",
            ),
            (
                Mismatch::MessageSender {
                    expected: a,
                    found: w,
                },
                "message sender",
            ),
            (Mismatch::HookData { len: 3 }, "hook data"),
            (Mismatch::PlaceholderNonce, "nonce"),
            (
                Mismatch::FinalityBelowMinimum {
                    requested: 1000,
                    executed: 500,
                },
                "executed finality threshold is 500",
            ),
            (
                Mismatch::FeeAboveMax {
                    fee: U256::from(9),
                    max_fee: 8,
                },
                "executed fee is 9, above the max fee of 8",
            ),
            (
                Mismatch::Attestation(AttestationError::Empty),
                "attestation does not stand: the attestation has no signature",
            ),
        ];
        let sentences: Vec<String> = cases.iter().map(|(m, _)| m.to_string()).collect();
        for (i, ((mismatch, says), sentence)) in cases.iter().zip(&sentences).enumerate() {
            assert!(
                sentence.starts_with("the attested CCTP message"),
                "{sentence}"
            );
            assert!(sentence.contains(says), "{sentence} / {says}");
            assert!(!sentences[..i].contains(sentence), "{sentence}");
            let nested = std::error::Error::source(mismatch).is_some();
            assert_eq!(
                nested,
                matches!(
                    mismatch,
                    Mismatch::Undecodable(_) | Mismatch::Attestation(_)
                )
            );
        }
    }

    /// ABI data: the words, then a `bytes` tail of `tail` (its length, it padded).
    fn abi(words: &[[u8; 32]], tail: &[u8]) -> Vec<u8> {
        let mut out: Vec<u8> = words.concat();
        out.extend_from_slice(&U256::from(tail.len() as u128).0);
        out.extend_from_slice(tail);
        out.resize(out.len() + (tail.len().div_ceil(32) * 32 - tail.len()), 0);
        out
    }

    fn u32_word(value: u32) -> [u8; 32] {
        U256::from(u128::from(value)).0
    }

    fn mint_log() -> Log {
        Log {
            address: DESTINATION_MESSENGER,
            topics: vec![
                cctp::event_topic(cctp::MINT_AND_WITHDRAW_EVENT),
                address_to_bytes32(MERCHANT),
                address_to_bytes32(DESTINATION_USDC),
            ],
            data: [U256::from(2_499_800).0, U256::from(200).0].concat(),
        }
    }

    fn received_log() -> Log {
        Log {
            address: TRANSMITTER,
            topics: vec![
                cctp::event_topic(cctp::MESSAGE_RECEIVED_EVENT),
                address_to_bytes32([0x0c; 20]),
                NONCE,
                u32_word(1000),
            ],
            data: abi(
                &[
                    u32_word(7),
                    address_to_bytes32(SOURCE_MESSENGER),
                    U256::from(96).0,
                ],
                &body().encode(),
            ),
        }
    }

    fn deposit_log() -> Log {
        Log {
            address: SOURCE_MESSENGER,
            topics: vec![
                cctp::event_topic(cctp::DEPOSIT_FOR_BURN_EVENT),
                address_to_bytes32(SOURCE_USDC),
                address_to_bytes32(TREASURY),
                u32_word(1000),
            ],
            data: abi(
                &[
                    U256::from(2_500_000).0,
                    address_to_bytes32(MERCHANT),
                    u32_word(6),
                    address_to_bytes32(DESTINATION_MESSENGER),
                    [0; 32],
                    U256::from(250).0,
                    U256::from(224).0,
                ],
                &[],
            ),
        }
    }

    fn sent_log() -> Log {
        let mut emitted = header();
        emitted.nonce = [0; 32];
        emitted.finality_threshold_executed = 0;
        Log {
            address: TRANSMITTER,
            topics: vec![cctp::event_topic(cctp::MESSAGE_SENT_EVENT)],
            data: abi(&[U256::from(32).0], &raw(emitted, body())),
        }
    }

    /// An ERC-20 `Transfer` of the same token: another event, in every receipt.
    fn transfer_log() -> Log {
        Log {
            address: DESTINATION_USDC,
            topics: vec![
                cctp::event_topic("Transfer(address,address,uint256)"),
                [0; 32],
                address_to_bytes32(MERCHANT),
            ],
            data: U256::from(2_499_800).0.to_vec(),
        }
    }

    #[test]
    fn the_topics_are_cctps() {
        for (event, text) in [
            (cctp::DEPOSIT_FOR_BURN_EVENT, cctp::DEPOSIT_FOR_BURN_TOPIC),
            (cctp::MESSAGE_SENT_EVENT, cctp::MESSAGE_SENT_TOPIC),
            (cctp::MINT_AND_WITHDRAW_EVENT, cctp::MINT_AND_WITHDRAW_TOPIC),
            (cctp::MESSAGE_RECEIVED_EVENT, cctp::MESSAGE_RECEIVED_TOPIC),
        ] {
            assert_eq!(hex0x(&cctp::event_topic(event)), text);
        }
    }

    #[test]
    fn the_mint_is_read_from_the_messengers_log() {
        let receipt = [transfer_log(), received_log(), mint_log()];
        let mint = Some(Minted {
            amount: 2_499_800,
            fee: 200,
        });
        assert_eq!(
            minted(&receipt, DESTINATION_MESSENGER, MERCHANT, DESTINATION_USDC),
            mint
        );
        // Another recipient, token or messenger: none.
        assert_eq!(
            minted(&receipt, DESTINATION_MESSENGER, TREASURY, DESTINATION_USDC),
            None
        );
        assert_eq!(
            minted(&receipt, DESTINATION_MESSENGER, MERCHANT, SOURCE_USDC),
            None
        );
        assert_eq!(
            minted(&receipt, TRANSMITTER, MERCHANT, DESTINATION_USDC),
            None
        );
        assert_eq!(
            minted(&[], DESTINATION_MESSENGER, MERCHANT, DESTINATION_USDC),
            None
        );
        // The same event from another contract is ignored; the messenger's after it is read.
        let forged = Log {
            address: [0x66; 20],
            data: [U256::from(9).0, U256::ZERO.0].concat(),
            ..mint_log()
        };
        assert_eq!(
            minted(
                &[forged.clone(), mint_log()],
                DESTINATION_MESSENGER,
                MERCHANT,
                DESTINATION_USDC
            ),
            mint
        );
        assert_eq!(
            minted(&[forged], DESTINATION_MESSENGER, MERCHANT, DESTINATION_USDC),
            None
        );
        // Garbage data: short, long, or a number above u128.
        for data in [
            vec![],
            vec![0; 63],
            vec![0; 65],
            [U256::MAX.0, U256::ZERO.0].concat(),
            [U256::ZERO.0, U256::MAX.0].concat(),
        ] {
            let log = Log { data, ..mint_log() };
            assert_eq!(
                minted(&[log], DESTINATION_MESSENGER, MERCHANT, DESTINATION_USDC),
                None
            );
        }
    }

    #[test]
    fn a_received_message_is_found_by_its_nonce() {
        let receipt = [transfer_log(), received_log(), mint_log()];
        assert!(received(&receipt, TRANSMITTER, NONCE));
        assert!(!received(&receipt, TRANSMITTER, [0x4f; 32]));
        assert!(!received(&receipt, DESTINATION_MESSENGER, NONCE));
        assert!(!received(&[], TRANSMITTER, NONCE));
        let other = Log {
            address: [0x66; 20],
            ..received_log()
        };
        assert!(!received(&[other], TRANSMITTER, NONCE));
        // Its topics, not its data, say it: a log with three topics is another event.
        let mut short = received_log();
        short.topics.pop();
        assert!(!received(&[short], TRANSMITTER, NONCE));
        let garbage = Log {
            data: vec![0xff; 7],
            ..received_log()
        };
        assert!(received(&[garbage], TRANSMITTER, NONCE));
    }

    #[test]
    fn the_burn_is_read_from_the_messengers_log() {
        let receipt = [transfer_log(), sent_log(), deposit_log()];
        let found = burnt(&receipt, SOURCE_MESSENGER, SOURCE_USDC, TREASURY).unwrap();
        assert_eq!(
            found,
            Burnt {
                amount: 2_500_000,
                mint_recipient: address_to_bytes32(MERCHANT),
                destination_domain: 6,
                destination_messenger: address_to_bytes32(DESTINATION_MESSENGER),
                destination_caller: [0; 32],
                max_fee: 250,
                min_finality_threshold: 1000,
                hook_data: Vec::new(),
            }
        );
        assert!(found.is(&burn()));
        for changed in [
            Burnt {
                amount: 1,
                ..found.clone()
            },
            Burnt {
                destination_caller: [1; 32],
                ..found.clone()
            },
            Burnt {
                hook_data: vec![1],
                ..found.clone()
            },
            Burnt {
                min_finality_threshold: 2000,
                ..found.clone()
            },
            Burnt {
                destination_domain: 3,
                ..found.clone()
            },
        ] {
            assert!(!changed.is(&burn()), "{changed:?}");
        }
        assert_eq!(
            burnt(&receipt, SOURCE_MESSENGER, SOURCE_USDC, MERCHANT),
            None
        );
        assert_eq!(
            burnt(&receipt, SOURCE_MESSENGER, DESTINATION_USDC, TREASURY),
            None
        );
        assert_eq!(burnt(&receipt, TRANSMITTER, SOURCE_USDC, TREASURY), None);
        let other = Log {
            address: [0x66; 20],
            ..deposit_log()
        };
        assert_eq!(
            burnt(&[other], SOURCE_MESSENGER, SOURCE_USDC, TREASURY),
            None
        );

        // Hook data is read as its bytes.
        let mut hooked = deposit_log();
        let head: Vec<[u8; 32]> = hooked.data[..224]
            .chunks_exact(32)
            .map(|c| c.try_into().unwrap())
            .collect();
        hooked.data = abi(&head, &[0xde, 0xad]);
        assert_eq!(
            burnt(&[hooked], SOURCE_MESSENGER, SOURCE_USDC, TREASURY).map(|b| b.hook_data),
            Some(vec![0xde, 0xad])
        );

        // Garbage: a domain or threshold word above u32, an amount above u128, a wrong offset,
        // a short tail, nonzero padding.
        let spoilt = |at: usize, bytes: &[u8]| {
            let mut log = deposit_log();
            log.data[at..at + bytes.len()].copy_from_slice(bytes);
            burnt(&[log], SOURCE_MESSENGER, SOURCE_USDC, TREASURY)
        };
        assert_eq!(spoilt(64, &[1]), None, "destination domain above u32");
        assert_eq!(spoilt(0, &[1]), None, "amount above u128");
        assert_eq!(spoilt(160, &[1]), None, "max fee above u128");
        assert_eq!(spoilt(6 * 32 + 31, &[0xc0]), None, "offset");
        assert_eq!(spoilt(7 * 32 + 31, &[1]), None, "length past the end");
        let mut threshold = deposit_log();
        threshold.topics[3][0] = 1;
        assert_eq!(
            burnt(&[threshold], SOURCE_MESSENGER, SOURCE_USDC, TREASURY),
            None
        );
        let mut padded = deposit_log();
        padded.data.extend_from_slice(&[0; 32]);
        assert_eq!(
            burnt(&[padded], SOURCE_MESSENGER, SOURCE_USDC, TREASURY),
            None
        );
    }

    #[test]
    fn the_message_sent_is_read_as_its_bytes() {
        let receipt = [transfer_log(), deposit_log(), sent_log()];
        let sent = message_sent(&receipt, TRANSMITTER).unwrap();
        let message = BurnMessage::decode(&sent).unwrap();
        assert!(message.message().has_placeholder_nonce());
        assert_eq!(message.body(), &body());
        assert_eq!(message_sent(&receipt, SOURCE_MESSENGER), None);
        assert_eq!(message_sent(&[], TRANSMITTER), None);
        let other = Log {
            address: [0x66; 20],
            ..sent_log()
        };
        assert_eq!(message_sent(&[other], TRANSMITTER), None);
        // A message of a whole number of words: no padding.
        let whole = Log {
            data: abi(&[U256::from(32).0], &[7; 64]),
            ..sent_log()
        };
        assert_eq!(message_sent(&[whole], TRANSMITTER), Some(vec![7; 64]));
        let empty = Log {
            data: abi(&[U256::from(32).0], &[]),
            ..sent_log()
        };
        assert_eq!(message_sent(&[empty], TRANSMITTER), Some(vec![]));
        // Nonzero padding, a message over the most read, a bad offset: none.
        let mut padding = sent_log();
        *padding.data.last_mut().unwrap() = 1;
        assert_eq!(message_sent(&[padding], TRANSMITTER), None);
        let long = Log {
            data: abi(&[U256::from(32).0], &vec![0; cctp::MAX_MESSAGE_LEN + 1]),
            ..sent_log()
        };
        assert_eq!(message_sent(&[long], TRANSMITTER), None);
        let offset = Log {
            data: abi(&[U256::from(64).0], &[1, 2]),
            ..sent_log()
        };
        assert_eq!(message_sent(&[offset], TRANSMITTER), None);
        // A garbage log first does not hide a good one after it.
        let garbage = Log {
            data: vec![1, 2, 3],
            ..sent_log()
        };
        assert_eq!(
            message_sent(&[garbage, sent_log()], TRANSMITTER),
            message_sent(&[sent_log()], TRANSMITTER)
        );
    }

    /// Deterministic garbage of `len` bytes.
    fn garbage(seed: u8, len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len + 32);
        let mut state: [u8; 32] = Keccak256::digest([seed]).into();
        while out.len() < len {
            out.extend_from_slice(&state);
            state = Keccak256::digest(state).into();
        }
        out.truncate(len);
        out
    }

    #[test]
    fn truncated_and_garbage_input_never_panics() {
        // Every prefix of every good input, and garbage of many lengths, through every reader.
        let (attesters, signed) = attest(&raw(header(), body()));
        let quote = br#"[{"finalityThreshold":1000,"minimumFee":1.3},{"finalityThreshold":2000,"minimumFee":0}]"#;
        let messages = answer(vec![entry(&signed, "complete")]);
        let mut inputs: Vec<Vec<u8>> = Vec::new();
        for good in [&quote[..], &messages, &signed.message, &signed.attestation] {
            inputs.extend((0..=good.len()).map(|n| good[..n].to_vec()));
        }
        inputs.extend((0..64u8).map(|seed| garbage(seed, usize::from(seed) * 13)));
        for input in &inputs {
            let _ = fee_quote(input, 1000);
            let _ = attested(input);
            let as_message = Attested {
                message: input.clone(),
                attestation: signed.attestation.clone(),
            };
            let _ = check_attested(&burn(), &as_message, &attesters, 2);
            let as_attestation = Attested {
                message: signed.message.clone(),
                attestation: input.clone(),
            };
            assert!(
                check_attested(&burn(), &as_attestation, &attesters, 2).is_err()
                    || *input == signed.attestation
            );
        }

        for good in [mint_log(), received_log(), deposit_log(), sent_log()] {
            let mut logs = Vec::new();
            for n in 0..=good.data.len() {
                logs.push(Log {
                    data: good.data[..n].to_vec(),
                    ..good.clone()
                });
            }
            for n in 0..=good.topics.len() {
                logs.push(Log {
                    topics: good.topics[..n].to_vec(),
                    ..good.clone()
                });
            }
            for seed in 0..32u8 {
                logs.push(Log {
                    data: garbage(seed, usize::from(seed) * 11),
                    ..good.clone()
                });
            }
            // One at a time, so that a garbage log is not hidden by the good one.
            for log in &logs {
                let one = std::slice::from_ref(log);
                let _ = minted(one, log.address, MERCHANT, DESTINATION_USDC);
                let _ = received(one, log.address, NONCE);
                let _ = burnt(one, log.address, SOURCE_USDC, TREASURY);
                let _ = message_sent(one, log.address);
            }
        }
        // Offsets and lengths at the top of the range do not overflow.
        let max = Log {
            data: [U256::MAX.0; 9].concat(),
            ..sent_log()
        };
        assert_eq!(message_sent(std::slice::from_ref(&max), TRANSMITTER), None);
        let huge_len = Log {
            data: [U256::from(32).0, U256::from(u128::MAX).0].concat(),
            ..sent_log()
        };
        assert_eq!(message_sent(&[huge_len], TRANSMITTER), None);
        let deposit_max = Log {
            data: [U256::MAX.0; 9].concat(),
            ..deposit_log()
        };
        assert_eq!(
            burnt(&[deposit_max], SOURCE_MESSENGER, SOURCE_USDC, TREASURY),
            None
        );
    }
}
