//! Circle's Cross-Chain Transfer Protocol, version 2 (CCTP V2), as bytes: the groundwork for
//! settling USDC from one network to another. USDC is burnt on the source network
//! (`TokenMessengerV2.depositForBurn`), whose `MessageTransmitterV2` emits the transfer as a
//! message (`MessageSent(bytes)`); Circle's attestation service signs the message; anyone with
//! the message and its attestation mints the USDC on the destination network
//! (`MessageTransmitterV2.receiveMessage`).
//!
//! Here: the message's 148-byte header ([`Message`]) and the burn message it carries
//! ([`BurnBody`]), decoded and encoded byte for byte; a whole transfer checked against the
//! domains Circle assigns ([`BurnMessage`]); the attestation's signers recovered and checked
//! ([`recover_signers`], [`check_attestation`]); the call data of `depositForBurn` and
//! `receiveMessage`, and the topics of the events around them. Written from Circle's documented
//! format (`MessageV2`, `BurnMessageV2`); pure, no I/O, and wasm-friendly. The accept and reject
//! vectors that the crate `cctp-rs` 8.0.0 publishes pin it in `tests/cctp_vectors.rs`.

use k256::ecdsa::{RecoveryId, Signature, VerifyingKey};
use sha3::{Digest, Keccak256};
use std::fmt;

/// Bytes of a message's header: version, source and destination domains (4 each), nonce,
/// sender, recipient, destination caller (32 each), the two finality thresholds (4 each).
pub const HEADER_LEN: usize = 148;
/// Bytes of a burn message's fixed part, before its hook data: version (4), burn token, mint
/// recipient, amount, message sender, max fee, fee executed, expiration block (32 each).
pub const BURN_BODY_LEN: usize = 228;
/// The most bytes a message (or a burn message body) may have to be read at all: far above
/// what a USDC transfer takes (376 bytes and its hook data), it only keeps absurd input out.
pub const MAX_MESSAGE_LEN: usize = 64 * 1024;
/// The header version of CCTP V2 messages (V1's was 0).
pub const MESSAGE_VERSION: u32 = 1;
/// The burn message version of CCTP V2 (V1's was 0).
pub const BURN_BODY_VERSION: u32 = 1;
/// Bytes of one attester's signature: `r ‖ s ‖ v`.
pub const SIGNATURE_LEN: usize = 65;
/// The most signatures an attestation may have to be read (Circle's has a few).
pub const MAX_SIGNATURES: usize = 64;
/// The executed finality threshold at and above which a message is finalized: below it,
/// `MessageTransmitterV2` hands the message on as unfinalized (a fast transfer).
pub const FINALIZED_THRESHOLD: u32 = 2000;

/// A 256-bit unsigned number (an amount, a fee, a block), as its 32 big-endian bytes.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct U256(pub [u8; 32]);

impl U256 {
    /// Zero.
    pub const ZERO: U256 = U256([0; 32]);
    /// 2²⁵⁶ − 1.
    pub const MAX: U256 = U256([0xff; 32]);

    /// The number as a `u128`, or `None` when it does not fit.
    pub fn to_u128(&self) -> Option<u128> {
        let (high, low) = self.0.split_at(16);
        if high.iter().any(|b| *b != 0) {
            return None;
        }
        let mut bytes = [0u8; 16];
        bytes.copy_from_slice(low);
        Some(u128::from_be_bytes(bytes))
    }

    /// Whether it is zero.
    pub fn is_zero(&self) -> bool {
        self.0.iter().all(|b| *b == 0)
    }
}

impl From<u128> for U256 {
    fn from(value: u128) -> U256 {
        let mut bytes = [0u8; 32];
        bytes[16..].copy_from_slice(&value.to_be_bytes());
        U256(bytes)
    }
}

impl fmt::Display for U256 {
    /// In decimal.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Long division by ten, a digit at a time, least significant first.
        let mut number = self.0;
        let mut digits = Vec::with_capacity(78);
        loop {
            let mut remainder = 0u16;
            for byte in number.iter_mut() {
                let current = remainder * 256 + u16::from(*byte);
                *byte = (current / 10) as u8;
                remainder = current % 10;
            }
            digits.push(char::from(b'0' + remainder as u8));
            if number.iter().all(|b| *b == 0) {
                break;
            }
        }
        let text: String = digits.iter().rev().collect();
        f.pad(&text)
    }
}

impl fmt::Debug for U256 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "U256({self})")
    }
}

/// A CCTP domain: Circle's number for a network CCTP V2 runs on (not its chain id).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Domain {
    /// Circle's domain number.
    pub id: u32,
    /// The network's name, lower-case with underscores.
    pub name: &'static str,
    /// Whether it is an EVM network: its addresses are 20 bytes, which a message's 32-byte
    /// words carry after 12 zero bytes.
    pub evm: bool,
}

const fn evm(id: u32, name: &'static str) -> Domain {
    Domain {
        id,
        name,
        evm: true,
    }
}

const fn other(id: u32, name: &'static str) -> Domain {
    Domain {
        id,
        name,
        evm: false,
    }
}

/// The CCTP V2 domains this code knows, by number. Domain 4 (Noble) is CCTP V1 only, and the
/// gaps are numbers Circle has not assigned; a transfer from or to any number not here is
/// refused ([`BurnMessage::decode`]) until the table learns it.
pub const DOMAINS: &[Domain] = &[
    evm(0, "ethereum"),
    evm(1, "avalanche"),
    evm(2, "optimism"),
    evm(3, "arbitrum"),
    other(5, "solana"),
    evm(6, "base"),
    evm(7, "polygon"),
    other(8, "sui"),
    other(9, "aptos"),
    evm(10, "unichain"),
    evm(11, "linea"),
    evm(12, "codex"),
    evm(13, "sonic"),
    evm(14, "world_chain"),
    evm(15, "monad"),
    evm(16, "sei"),
    evm(17, "bnb_smart_chain"),
    evm(18, "xdc"),
    evm(19, "hyper_evm"),
    evm(21, "ink"),
    evm(22, "plume"),
    other(25, "starknet"),
    evm(26, "arc"),
    other(27, "stellar"),
    evm(28, "edge"),
    evm(29, "injective"),
    evm(30, "morph"),
    evm(31, "pharos"),
    evm(32, "cronos"),
    evm(33, "plasma"),
    evm(37, "x_layer"),
];

/// The domain of that number, if it is a CCTP V2 domain this code knows.
pub fn domain(id: u32) -> Option<&'static Domain> {
    DOMAINS.iter().find(|d| d.id == id)
}

/// The domain of that name (as [`Domain::name`] spells it), if this code knows it.
pub fn domain_named(name: &str) -> Option<&'static Domain> {
    DOMAINS.iter().find(|d| d.name == name)
}

/// The two finality levels a CCTP V2 transfer asks for and is attested at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Finality {
    /// Threshold 1000, "confirmed": a Fast Transfer, attested before the source block is
    /// final, for a fee.
    Fast,
    /// Threshold 2000, "finalized": a Standard Transfer, attested once the source block is final.
    Standard,
}

impl Finality {
    /// Its threshold, as a message carries it.
    pub const fn threshold(self) -> u32 {
        match self {
            Finality::Fast => 1000,
            Finality::Standard => 2000,
        }
    }

    /// The level of exactly that threshold; `None` for any other number.
    pub fn from_threshold(threshold: u32) -> Option<Finality> {
        match threshold {
            1000 => Some(Finality::Fast),
            2000 => Some(Finality::Standard),
            _ => None,
        }
    }

    /// `fast` or `standard`.
    pub const fn name(self) -> &'static str {
        match self {
            Finality::Fast => "fast",
            Finality::Standard => "standard",
        }
    }
}

/// Why bytes are not a CCTP V2 message (or burn message) this code takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageError {
    /// More bytes than [`MAX_MESSAGE_LEN`]; nothing of them was read.
    TooLong {
        /// Their length.
        len: usize,
    },
    /// Fewer bytes than the 148-byte header.
    TooShortHeader {
        /// Their length.
        len: usize,
    },
    /// A header version other than CCTP V2's ([`MESSAGE_VERSION`]).
    UnsupportedHeaderVersion {
        /// The version read.
        version: u32,
    },
    /// A message body shorter than a burn message's 228-byte fixed part.
    TooShortBody {
        /// The body's length.
        len: usize,
    },
    /// A burn message version other than CCTP V2's ([`BURN_BODY_VERSION`]).
    UnsupportedBodyVersion {
        /// The version read.
        version: u32,
    },
    /// A source domain not in [`DOMAINS`].
    UnknownSourceDomain {
        /// The domain number read.
        domain: u32,
    },
    /// A destination domain not in [`DOMAINS`].
    UnknownDestinationDomain {
        /// The domain number read.
        domain: u32,
    },
    /// The burn token, from an EVM source domain, is not an address after 12 zero bytes.
    NonCanonicalBurnToken,
    /// The mint recipient, on an EVM destination domain, is not an address after 12 zero bytes.
    NonCanonicalMintRecipient,
    /// The message sender, on an EVM source domain, is not an address after 12 zero bytes.
    NonCanonicalMessageSender,
}

impl fmt::Display for MessageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MessageError::TooLong { len } => write!(
                f,
                "the message is {len} bytes, more than the {MAX_MESSAGE_LEN} a CCTP message may \
                 have here"
            ),
            MessageError::TooShortHeader { len } => write!(
                f,
                "the message is {len} bytes, shorter than the {HEADER_LEN}-byte CCTP V2 header"
            ),
            MessageError::UnsupportedHeaderVersion { version } => write!(
                f,
                "the message header is version {version}, not CCTP V2's version {MESSAGE_VERSION}"
            ),
            MessageError::TooShortBody { len } => write!(
                f,
                "the message body is {len} bytes, shorter than the {BURN_BODY_LEN}-byte fixed \
                 part of a burn message"
            ),
            MessageError::UnsupportedBodyVersion { version } => write!(
                f,
                "the burn message is version {version}, not CCTP V2's version \
                 {BURN_BODY_VERSION}"
            ),
            MessageError::UnknownSourceDomain { domain } => {
                write!(
                    f,
                    "the source domain {domain} is not a known CCTP V2 domain"
                )
            }
            MessageError::UnknownDestinationDomain { domain } => {
                write!(
                    f,
                    "the destination domain {domain} is not a known CCTP V2 domain"
                )
            }
            MessageError::NonCanonicalBurnToken => f.write_str(
                "the burn token is not an address after 12 zero bytes, as its EVM source \
                 domain requires",
            ),
            MessageError::NonCanonicalMintRecipient => f.write_str(
                "the mint recipient is not an address after 12 zero bytes, as its EVM \
                 destination domain requires",
            ),
            MessageError::NonCanonicalMessageSender => f.write_str(
                "the message sender is not an address after 12 zero bytes, as its EVM source \
                 domain requires",
            ),
        }
    }
}

impl std::error::Error for MessageError {}

/// Reads fixed-size fields off the front of bytes; `None` when too few are left.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = self.0.split_first_chunk::<N>()?;
        self.0 = rest;
        Some(*head)
    }

    fn u32(&mut self) -> Option<u32> {
        self.array().map(u32::from_be_bytes)
    }

    fn rest(self) -> &'a [u8] {
        self.0
    }
}

/// A CCTP V2 message: the header every message has, and its body as bytes (for a USDC
/// transfer, a burn message: [`BurnBody`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The header version ([`MESSAGE_VERSION`]).
    pub version: u32,
    /// The domain the message comes from.
    pub source_domain: u32,
    /// The domain the message goes to.
    pub destination_domain: u32,
    /// Its nonce, unique per source domain; all zero until attested (the source network's
    /// `MessageSent` leaves it for the attestation service to fill in).
    pub nonce: [u8; 32],
    /// Who sent it on the source domain (for a transfer, the `TokenMessengerV2`).
    pub sender: [u8; 32],
    /// Who handles it on the destination domain (for a transfer, the `TokenMessengerV2`).
    pub recipient: [u8; 32],
    /// The only caller who may receive it on the destination domain; all zero for anyone.
    pub destination_caller: [u8; 32],
    /// The finality the sender asked to be attested at (see [`Finality`]).
    pub min_finality_threshold: u32,
    /// The finality it was attested at; 0 until attested.
    pub finality_threshold_executed: u32,
    /// The body, for the recipient.
    pub message_body: Vec<u8>,
}

impl Message {
    /// Reads a message: the 148-byte header in CCTP V2's version, and whatever follows as its
    /// body. Input over [`MAX_MESSAGE_LEN`] is refused unread.
    pub fn decode(raw: &[u8]) -> Result<Message, MessageError> {
        if raw.len() > MAX_MESSAGE_LEN {
            return Err(MessageError::TooLong { len: raw.len() });
        }
        let short = MessageError::TooShortHeader { len: raw.len() };
        let mut reader = Reader(raw);
        let version = reader.u32().ok_or(short)?;
        let source_domain = reader.u32().ok_or(short)?;
        let destination_domain = reader.u32().ok_or(short)?;
        let nonce = reader.array().ok_or(short)?;
        let sender = reader.array().ok_or(short)?;
        let recipient = reader.array().ok_or(short)?;
        let destination_caller = reader.array().ok_or(short)?;
        let min_finality_threshold = reader.u32().ok_or(short)?;
        let finality_threshold_executed = reader.u32().ok_or(short)?;
        if version != MESSAGE_VERSION {
            return Err(MessageError::UnsupportedHeaderVersion { version });
        }
        Ok(Message {
            version,
            source_domain,
            destination_domain,
            nonce,
            sender,
            recipient,
            destination_caller,
            min_finality_threshold,
            finality_threshold_executed,
            message_body: reader.rest().to_vec(),
        })
    }

    /// The message's bytes, as it is signed and as `receiveMessage` takes it.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_LEN + self.message_body.len());
        out.extend_from_slice(&self.version.to_be_bytes());
        out.extend_from_slice(&self.source_domain.to_be_bytes());
        out.extend_from_slice(&self.destination_domain.to_be_bytes());
        out.extend_from_slice(&self.nonce);
        out.extend_from_slice(&self.sender);
        out.extend_from_slice(&self.recipient);
        out.extend_from_slice(&self.destination_caller);
        out.extend_from_slice(&self.min_finality_threshold.to_be_bytes());
        out.extend_from_slice(&self.finality_threshold_executed.to_be_bytes());
        out.extend_from_slice(&self.message_body);
        out
    }

    /// Whether anyone may receive it on the destination domain: its destination caller is all
    /// zero.
    pub fn is_permissionless(&self) -> bool {
        self.destination_caller.iter().all(|b| *b == 0)
    }

    /// Whether its nonce is all zero: the placeholder of a message not yet attested.
    pub fn has_placeholder_nonce(&self) -> bool {
        self.nonce.iter().all(|b| *b == 0)
    }

    /// The finality the sender asked for, if its threshold is exactly one of the two levels.
    pub fn requested_finality(&self) -> Option<Finality> {
        Finality::from_threshold(self.min_finality_threshold)
    }

    /// The finality it was attested at, if its threshold is exactly one of the two levels.
    pub fn attested_finality(&self) -> Option<Finality> {
        Finality::from_threshold(self.finality_threshold_executed)
    }

    /// Whether the destination takes it as a fast (unfinalized) transfer, which may charge a
    /// fee: it was attested below [`FINALIZED_THRESHOLD`]. Meaningful once attested only.
    pub fn is_fast_transfer(&self) -> bool {
        self.finality_threshold_executed < FINALIZED_THRESHOLD
    }

    /// Its Keccak-256 hash: what attesters sign.
    pub fn hash(&self) -> [u8; 32] {
        message_hash(&self.encode())
    }
}

/// A CCTP V2 burn message: the body of a USDC transfer's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BurnBody {
    /// The burn message version ([`BURN_BODY_VERSION`]).
    pub version: u32,
    /// The token burnt, on the source domain.
    pub burn_token: [u8; 32],
    /// Who the USDC is minted to, on the destination domain.
    pub mint_recipient: [u8; 32],
    /// How much was burnt, in the token's units.
    pub amount: U256,
    /// Who burnt it, on the source domain.
    pub message_sender: [u8; 32],
    /// The most fee the sender accepts, out of the amount.
    pub max_fee: U256,
    /// The fee charged; 0 until attested.
    pub fee_executed: U256,
    /// The destination block after which the message expires; 0 for never.
    pub expiration_block: U256,
    /// Data for a hook on the destination domain; empty for none.
    pub hook_data: Vec<u8>,
}

impl BurnBody {
    /// Reads a burn message: its 228-byte fixed part in CCTP V2's version, and whatever follows
    /// as hook data. Input over [`MAX_MESSAGE_LEN`] is refused unread.
    pub fn decode(raw: &[u8]) -> Result<BurnBody, MessageError> {
        if raw.len() > MAX_MESSAGE_LEN {
            return Err(MessageError::TooLong { len: raw.len() });
        }
        let short = MessageError::TooShortBody { len: raw.len() };
        let mut reader = Reader(raw);
        let version = reader.u32().ok_or(short)?;
        let burn_token = reader.array().ok_or(short)?;
        let mint_recipient = reader.array().ok_or(short)?;
        let amount = U256(reader.array().ok_or(short)?);
        let message_sender = reader.array().ok_or(short)?;
        let max_fee = U256(reader.array().ok_or(short)?);
        let fee_executed = U256(reader.array().ok_or(short)?);
        let expiration_block = U256(reader.array().ok_or(short)?);
        if version != BURN_BODY_VERSION {
            return Err(MessageError::UnsupportedBodyVersion { version });
        }
        Ok(BurnBody {
            version,
            burn_token,
            mint_recipient,
            amount,
            message_sender,
            max_fee,
            fee_executed,
            expiration_block,
            hook_data: reader.rest().to_vec(),
        })
    }

    /// The burn message's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(BURN_BODY_LEN + self.hook_data.len());
        out.extend_from_slice(&self.version.to_be_bytes());
        out.extend_from_slice(&self.burn_token);
        out.extend_from_slice(&self.mint_recipient);
        out.extend_from_slice(&self.amount.0);
        out.extend_from_slice(&self.message_sender);
        out.extend_from_slice(&self.max_fee.0);
        out.extend_from_slice(&self.fee_executed.0);
        out.extend_from_slice(&self.expiration_block.0);
        out.extend_from_slice(&self.hook_data);
        out
    }

    /// Whether it carries hook data.
    pub fn has_hooks(&self) -> bool {
        !self.hook_data.is_empty()
    }
}

/// A USDC transfer's message, whole and checked: a CCTP V2 header between two known domains,
/// a CCTP V2 burn message as its body, and, on an EVM domain, the burn token, the message
/// sender (source) and the mint recipient (destination) as addresses after 12 zero bytes: the
/// only form such a word has there, so that one transfer has one encoding and one hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BurnMessage {
    message: Message,
    body: BurnBody,
    source: &'static Domain,
    destination: &'static Domain,
}

impl BurnMessage {
    /// Reads and checks a transfer's message. The checks, in order: length, header version,
    /// domains, body length, body version, address words.
    pub fn decode(raw: &[u8]) -> Result<BurnMessage, MessageError> {
        let message = Message::decode(raw)?;
        let source = domain(message.source_domain).ok_or(MessageError::UnknownSourceDomain {
            domain: message.source_domain,
        })?;
        let destination =
            domain(message.destination_domain).ok_or(MessageError::UnknownDestinationDomain {
                domain: message.destination_domain,
            })?;
        let body = BurnBody::decode(&message.message_body)?;
        if source.evm && bytes32_to_address(&body.burn_token).is_none() {
            return Err(MessageError::NonCanonicalBurnToken);
        }
        if destination.evm && bytes32_to_address(&body.mint_recipient).is_none() {
            return Err(MessageError::NonCanonicalMintRecipient);
        }
        if source.evm && bytes32_to_address(&body.message_sender).is_none() {
            return Err(MessageError::NonCanonicalMessageSender);
        }
        Ok(BurnMessage {
            message,
            body,
            source,
            destination,
        })
    }

    /// A transfer's message from a header and a burn message (the header's own body is
    /// replaced by `body`'s bytes), checked as [`BurnMessage::decode`] checks one.
    pub fn new(mut message: Message, body: BurnBody) -> Result<BurnMessage, MessageError> {
        message.message_body = body.encode();
        BurnMessage::decode(&message.encode())
    }

    /// The message, its body being the burn message's bytes.
    pub fn message(&self) -> &Message {
        &self.message
    }

    /// The burn message.
    pub fn body(&self) -> &BurnBody {
        &self.body
    }

    /// The source domain.
    pub fn source(&self) -> &'static Domain {
        self.source
    }

    /// The destination domain.
    pub fn destination(&self) -> &'static Domain {
        self.destination
    }

    /// The message's bytes.
    pub fn encode(&self) -> Vec<u8> {
        self.message.encode()
    }

    /// The message's Keccak-256 hash: what attesters sign.
    pub fn hash(&self) -> [u8; 32] {
        self.message.hash()
    }
}

/// The Keccak-256 hash of a message's bytes: what attesters sign.
pub fn message_hash(message: &[u8]) -> [u8; 32] {
    Keccak256::digest(message).into()
}

/// An EVM address as a message's 32-byte word: 12 zero bytes, then the address.
pub fn address_to_bytes32(address: [u8; 20]) -> [u8; 32] {
    let mut word = [0u8; 32];
    word[12..].copy_from_slice(&address);
    word
}

/// The EVM address in a 32-byte word, or `None` when its first 12 bytes are not all zero.
pub fn bytes32_to_address(word: &[u8; 32]) -> Option<[u8; 20]> {
    let (padding, address) = word.split_at(12);
    if padding.iter().any(|b| *b != 0) {
        return None;
    }
    <[u8; 20]>::try_from(address).ok()
}

/// Why an attestation does not stand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttestationError {
    /// It has no signature at all.
    Empty,
    /// Its length is not a whole number of 65-byte signatures.
    BadLength {
        /// Its length.
        len: usize,
    },
    /// It has more than [`MAX_SIGNATURES`] signatures; none was read.
    TooManySignatures {
        /// How many it has.
        count: usize,
    },
    /// A signature's `v` is neither 27 nor 28.
    BadV {
        /// Which signature, from 0.
        index: usize,
        /// The `v` read.
        v: u8,
    },
    /// A signature's `s` is in the upper half of the curve's order (a malleable signature,
    /// which Circle's contracts refuse).
    HighS {
        /// Which signature, from 0.
        index: usize,
    },
    /// No key is recoverable from a signature.
    Unrecoverable {
        /// Which signature, from 0.
        index: usize,
    },
    /// A signer's address is not above the one before it: the signatures are out of order, or
    /// one signer signed twice.
    NotAscending {
        /// Which signature, from 0.
        index: usize,
    },
    /// A signer is not one of the attesters.
    NotAttester {
        /// Which signature, from 0.
        index: usize,
        /// Its signer.
        signer: [u8; 20],
    },
    /// Fewer signatures than the threshold.
    BelowThreshold {
        /// How many it has.
        signatures: usize,
        /// How many it needs.
        threshold: usize,
    },
}

impl fmt::Display for AttestationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttestationError::Empty => f.write_str("the attestation has no signature"),
            AttestationError::BadLength { len } => write!(
                f,
                "the attestation is {len} bytes, not a whole number of {SIGNATURE_LEN}-byte \
                 signatures"
            ),
            AttestationError::TooManySignatures { count } => write!(
                f,
                "the attestation has {count} signatures, more than the {MAX_SIGNATURES} read here"
            ),
            AttestationError::BadV { index, v } => write!(
                f,
                "signature {} of the attestation has v = {v}, not 27 or 28",
                index + 1
            ),
            AttestationError::HighS { index } => write!(
                f,
                "signature {} of the attestation has a high s, which is refused as malleable",
                index + 1
            ),
            AttestationError::Unrecoverable { index } => write!(
                f,
                "no signer can be recovered from signature {} of the attestation",
                index + 1
            ),
            AttestationError::NotAscending { index } => write!(
                f,
                "the signer of signature {} of the attestation is not above the one before it \
                 (out of order, or signed twice)",
                index + 1
            ),
            AttestationError::NotAttester { index, signer } => write!(
                f,
                "signature {} of the attestation is by 0x{}, which is not an attester",
                index + 1,
                hex::encode(signer)
            ),
            AttestationError::BelowThreshold {
                signatures,
                threshold,
            } => write!(
                f,
                "the attestation has {signatures} signatures, fewer than the {threshold} needed"
            ),
        }
    }
}

impl std::error::Error for AttestationError {}

/// The address of a public key: the last 20 bytes of the Keccak-256 of its uncompressed point.
fn address_of_key(key: &VerifyingKey) -> [u8; 20] {
    let point = key.to_encoded_point(false);
    let hash = Keccak256::digest(point.as_bytes().get(1..).unwrap_or_default());
    let mut address = [0u8; 20];
    address.copy_from_slice(&hash[12..]);
    address
}

/// The signer of one 65-byte signature over `digest`.
fn recover_signer(
    digest: &[u8; 32],
    signature: &[u8],
    index: usize,
) -> Result<[u8; 20], AttestationError> {
    let Some((&v, rs)) = signature.split_last() else {
        return Err(AttestationError::BadLength {
            len: signature.len(),
        });
    };
    let y_odd = match v {
        27 => false,
        28 => true,
        _ => return Err(AttestationError::BadV { index, v }),
    };
    let signature =
        Signature::from_slice(rs).map_err(|_| AttestationError::Unrecoverable { index })?;
    if signature.normalize_s().is_some() {
        return Err(AttestationError::HighS { index });
    }
    let key = VerifyingKey::recover_from_prehash(digest, &signature, RecoveryId::new(y_odd, false))
        .map_err(|_| AttestationError::Unrecoverable { index })?;
    Ok(address_of_key(&key))
}

/// The signers of an attestation of `message`: its 65-byte signatures (`r ‖ s ‖ v`, `v` 27 or
/// 28, low `s`) over the message's Keccak-256 hash, each signer's address above the one before
/// it, as Circle's `MessageTransmitterV2` requires.
pub fn recover_signers(
    message: &[u8],
    attestation: &[u8],
) -> Result<Vec<[u8; 20]>, AttestationError> {
    if attestation.is_empty() {
        return Err(AttestationError::Empty);
    }
    if !attestation.len().is_multiple_of(SIGNATURE_LEN) {
        return Err(AttestationError::BadLength {
            len: attestation.len(),
        });
    }
    let count = attestation.len() / SIGNATURE_LEN;
    if count > MAX_SIGNATURES {
        return Err(AttestationError::TooManySignatures { count });
    }
    let digest = message_hash(message);
    let mut signers: Vec<[u8; 20]> = Vec::with_capacity(count);
    for (index, signature) in attestation.chunks_exact(SIGNATURE_LEN).enumerate() {
        let signer = recover_signer(&digest, signature, index)?;
        if signers.last().is_some_and(|last| signer <= *last) {
            return Err(AttestationError::NotAscending { index });
        }
        signers.push(signer);
    }
    Ok(signers)
}

/// Whether an attestation of `message` stands: its signers recovered ([`recover_signers`]),
/// every one of them among `attesters`, and at least `threshold` of them. (The destination's
/// `receiveMessage` wants exactly its own threshold's number of signatures.)
pub fn check_attestation(
    message: &[u8],
    attestation: &[u8],
    attesters: &[[u8; 20]],
    threshold: usize,
) -> Result<(), AttestationError> {
    let signers = recover_signers(message, attestation)?;
    if let Some((index, signer)) = signers
        .iter()
        .enumerate()
        .find(|(_, signer)| !attesters.contains(signer))
    {
        return Err(AttestationError::NotAttester {
            index,
            signer: *signer,
        });
    }
    if signers.len() < threshold {
        return Err(AttestationError::BelowThreshold {
            signatures: signers.len(),
            threshold,
        });
    }
    Ok(())
}

/// `TokenMessengerV2`'s `depositForBurn`, whose selector [`deposit_for_burn_call`] takes.
pub const DEPOSIT_FOR_BURN: &str =
    "depositForBurn(uint256,uint32,bytes32,address,bytes32,uint256,uint32)";
/// `MessageTransmitterV2`'s `receiveMessage`, whose selector [`receive_message_call`] takes.
pub const RECEIVE_MESSAGE: &str = "receiveMessage(bytes,bytes)";

/// `TokenMessengerV2`'s event of a burn.
pub const DEPOSIT_FOR_BURN_EVENT: &str =
    "DepositForBurn(address,uint256,address,bytes32,uint32,bytes32,bytes32,uint256,uint32,bytes)";
/// [`DEPOSIT_FOR_BURN_EVENT`]'s topic 0.
pub const DEPOSIT_FOR_BURN_TOPIC: &str =
    "0x0c8c1cbdc5190613ebd485511d4e2812cfa45eecb79d845893331fedad5130a5";
/// `MessageTransmitterV2`'s event of a message sent: its data is the message, ABI-encoded.
pub const MESSAGE_SENT_EVENT: &str = "MessageSent(bytes)";
/// [`MESSAGE_SENT_EVENT`]'s topic 0.
pub const MESSAGE_SENT_TOPIC: &str =
    "0x8c5261668696ce22758910d05bab8f186d6eb247ceac2af2e82c7dc17669b036";
/// `TokenMessengerV2`'s event of a mint on the destination.
pub const MINT_AND_WITHDRAW_EVENT: &str = "MintAndWithdraw(address,uint256,address,uint256)";
/// [`MINT_AND_WITHDRAW_EVENT`]'s topic 0.
pub const MINT_AND_WITHDRAW_TOPIC: &str =
    "0x50c55e915134d457debfa58eb6f4342956f8b0616d51a89a3659360178e1ab63";
/// `MessageTransmitterV2`'s event of a message received.
pub const MESSAGE_RECEIVED_EVENT: &str =
    "MessageReceived(address,uint32,bytes32,bytes32,uint32,bytes)";
/// [`MESSAGE_RECEIVED_EVENT`]'s topic 0.
pub const MESSAGE_RECEIVED_TOPIC: &str =
    "0xff48c13eda96b1cceacc6b9edeedc9e9db9d6226afbc30146b720c19d3addb1c";

/// An event's topic 0: the Keccak-256 of its signature.
pub fn event_topic(signature: &str) -> [u8; 32] {
    Keccak256::digest(signature.as_bytes()).into()
}

/// A function's selector: the first 4 bytes of the Keccak-256 of its signature.
pub fn selector(signature: &str) -> [u8; 4] {
    let hash = event_topic(signature);
    [hash[0], hash[1], hash[2], hash[3]]
}

/// A `u32` as a 32-byte ABI word.
fn u32_word(value: u32) -> [u8; 32] {
    let mut word = [0u8; 32];
    word[28..].copy_from_slice(&value.to_be_bytes());
    word
}

/// A length or offset as a 32-byte ABI word.
fn usize_word(value: usize) -> [u8; 32] {
    U256::from(value as u128).0
}

/// The call data of `TokenMessengerV2.depositForBurn`, `0x` hex: burn `amount` of `burn_token`
/// (which the messenger must be allowed to spend) to be minted to `mint_recipient` on
/// `destination_domain`, receivable only by `destination_caller` (all zero: by anyone), for at
/// most `max_fee` (below `amount`), attested at `min_finality_threshold` (1000 fast, 2000
/// standard).
pub fn deposit_for_burn_call(
    amount: U256,
    destination_domain: u32,
    mint_recipient: [u8; 20],
    burn_token: [u8; 20],
    destination_caller: [u8; 32],
    max_fee: U256,
    min_finality_threshold: u32,
) -> String {
    let mut data = Vec::with_capacity(4 + 7 * 32);
    data.extend_from_slice(&selector(DEPOSIT_FOR_BURN));
    data.extend_from_slice(&amount.0);
    data.extend_from_slice(&u32_word(destination_domain));
    data.extend_from_slice(&address_to_bytes32(mint_recipient));
    data.extend_from_slice(&address_to_bytes32(burn_token));
    data.extend_from_slice(&destination_caller);
    data.extend_from_slice(&max_fee.0);
    data.extend_from_slice(&u32_word(min_finality_threshold));
    format!("0x{}", hex::encode(data))
}

/// Bytes as an ABI `bytes` tail: their length, then they, zero-padded to whole words.
fn bytes_tail(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&usize_word(bytes.len()));
    out.extend_from_slice(bytes);
    let padding = bytes.len().div_ceil(32) * 32 - bytes.len();
    out.resize(out.len() + padding, 0);
}

/// The call data of `MessageTransmitterV2.receiveMessage(message, attestation)`, `0x` hex: the
/// two `bytes` ABI-encoded (their offsets, then each one's length and padded bytes).
pub fn receive_message_call(message: &[u8], attestation: &[u8]) -> String {
    let message_tail = 32 + message.len().div_ceil(32) * 32;
    let mut data = Vec::with_capacity(4 + 64 + message_tail + 32 + attestation.len() + 32);
    data.extend_from_slice(&selector(RECEIVE_MESSAGE));
    data.extend_from_slice(&usize_word(64));
    data.extend_from_slice(&usize_word(64 + message_tail));
    bytes_tail(&mut data, message);
    bytes_tail(&mut data, attestation);
    format!("0x{}", hex::encode(data))
}

/// `MessageTransmitterV2.isEnabledAttester(address)`.
pub const IS_ENABLED_ATTESTER: &str = "isEnabledAttester(address)";
/// `MessageTransmitterV2.signatureThreshold()`.
pub const SIGNATURE_THRESHOLD: &str = "signatureThreshold()";
/// `MessageTransmitterV2.usedNonces(bytes32)`: non-zero once the message of that nonce was
/// received.
pub const USED_NONCES: &str = "usedNonces(bytes32)";

/// The call data of `isEnabledAttester(attester)`, `0x` hex.
pub fn is_enabled_attester_call(attester: [u8; 20]) -> String {
    let mut data = selector(IS_ENABLED_ATTESTER).to_vec();
    data.extend_from_slice(&address_to_bytes32(attester));
    format!("0x{}", hex::encode(data))
}

/// The call data of `signatureThreshold()`, `0x` hex.
pub fn signature_threshold_call() -> String {
    format!("0x{}", hex::encode(selector(SIGNATURE_THRESHOLD)))
}

/// The call data of `usedNonces(nonce)`, `0x` hex.
pub fn used_nonces_call(nonce: [u8; 32]) -> String {
    let mut data = selector(USED_NONCES).to_vec();
    data.extend_from_slice(&nonce);
    format!("0x{}", hex::encode(data))
}

/// Attesters with deterministic keys, for this crate's tests.
#[cfg(test)]
pub(crate) mod test_attesters {
    use super::message_hash;
    use k256::ecdsa::SigningKey;
    use sha3::{Digest, Keccak256};

    /// `count` keys, each from the Keccak-256 of `seed` and its number.
    pub fn keys(seed: u8, count: u8) -> Vec<SigningKey> {
        (0..count)
            .map(|i| SigningKey::from_slice(&Keccak256::digest([seed, i])).unwrap())
            .collect()
    }

    /// A key's address, through the crate's published derivation (independent of the
    /// recovery's own).
    pub fn address_of(key: &SigningKey) -> [u8; 20] {
        crate::address_bytes(&crate::address_of(key.verifying_key())).unwrap()
    }

    /// `r ‖ s ‖ v` over the message's Keccak-256, `v` 27 or 28.
    pub fn sign(key: &SigningKey, message: &[u8]) -> Vec<u8> {
        let (signature, recovery) = key
            .sign_prehash_recoverable(&message_hash(message))
            .unwrap();
        let mut out = signature.to_bytes().to_vec();
        out.push(27 + u8::from(recovery.is_y_odd()));
        out
    }

    /// `count` attesters of keys from `seed`, sorted by address: their addresses and their
    /// signatures of `message`.
    pub fn attest(seed: u8, count: u8, message: &[u8]) -> (Vec<[u8; 20]>, Vec<Vec<u8>>) {
        let mut signers: Vec<([u8; 20], Vec<u8>)> = keys(seed, count)
            .iter()
            .map(|key| (address_of(key), sign(key, message)))
            .collect();
        signers.sort();
        signers.into_iter().unzip()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn word(byte: u8) -> [u8; 32] {
        [byte; 32]
    }

    fn address(byte: u8) -> [u8; 32] {
        address_to_bytes32([byte; 20])
    }

    /// A fast transfer from Ethereum to Base, with hook data and every field distinct.
    fn header() -> Message {
        Message {
            version: MESSAGE_VERSION,
            source_domain: 0,
            destination_domain: 6,
            nonce: word(0x11),
            sender: address(0x22),
            recipient: address(0x33),
            destination_caller: [0; 32],
            min_finality_threshold: 1000,
            finality_threshold_executed: 1000,
            message_body: Vec::new(),
        }
    }

    fn body() -> BurnBody {
        BurnBody {
            version: BURN_BODY_VERSION,
            burn_token: address(0x44),
            mint_recipient: address(0x55),
            amount: U256::from(2_500_000),
            message_sender: address(0x66),
            max_fee: U256::from(150),
            fee_executed: U256::from(25),
            expiration_block: U256::MAX,
            hook_data: vec![0xde, 0xad, 0xbe, 0xef, 0xca, 0xfe],
        }
    }

    fn transfer() -> Vec<u8> {
        let mut message = header();
        message.message_body = body().encode();
        message.encode()
    }

    #[test]
    fn a_message_is_laid_out_at_circles_offsets() {
        let raw = transfer();
        assert_eq!(raw.len(), HEADER_LEN + BURN_BODY_LEN + 6);
        assert_eq!(raw[..4], 1u32.to_be_bytes());
        assert_eq!(raw[4..8], 0u32.to_be_bytes());
        assert_eq!(raw[8..12], 6u32.to_be_bytes());
        assert_eq!(raw[12..44], word(0x11));
        assert_eq!(raw[44..76], address(0x22));
        assert_eq!(raw[76..108], address(0x33));
        assert_eq!(raw[108..140], [0; 32]);
        assert_eq!(raw[140..144], 1000u32.to_be_bytes());
        assert_eq!(raw[144..148], 1000u32.to_be_bytes());
        let body = &raw[HEADER_LEN..];
        assert_eq!(body[..4], 1u32.to_be_bytes());
        assert_eq!(body[4..36], address(0x44));
        assert_eq!(body[36..68], address(0x55));
        assert_eq!(body[68..100], U256::from(2_500_000).0);
        assert_eq!(body[100..132], address(0x66));
        assert_eq!(body[132..164], U256::from(150).0);
        assert_eq!(body[164..196], U256::from(25).0);
        assert_eq!(body[196..228], [0xff; 32]);
        assert_eq!(body[228..], [0xde, 0xad, 0xbe, 0xef, 0xca, 0xfe]);
    }

    #[test]
    fn messages_and_bodies_round_trip() {
        let raw = transfer();
        let message = Message::decode(&raw).unwrap();
        assert_eq!(message.encode(), raw);
        let mut expected = header();
        expected.message_body = body().encode();
        assert_eq!(message, expected);
        assert_eq!(BurnBody::decode(&message.message_body).unwrap(), body());
        assert_eq!(
            BurnBody::decode(&body().encode()).unwrap().encode(),
            body().encode()
        );

        let transfer = BurnMessage::decode(&raw).unwrap();
        assert_eq!(transfer.encode(), raw);
        assert_eq!(transfer.message(), &message);
        assert_eq!(transfer.body(), &body());
        assert_eq!(
            (transfer.source().name, transfer.destination().name),
            ("ethereum", "base")
        );
        assert_eq!(BurnMessage::new(header(), body()).unwrap(), transfer);
        assert_eq!(transfer.hash(), message_hash(&raw));
        assert_eq!(message.hash(), <[u8; 32]>::from(Keccak256::digest(&raw)));

        // A message of any body, and a header alone, round-trip too.
        for body in [Vec::new(), vec![7; 1000]] {
            let mut message = header();
            message.message_body = body;
            assert_eq!(Message::decode(&message.encode()).unwrap(), message);
        }
    }

    #[test]
    fn a_messages_flags_follow_its_fields() {
        let mut message = header();
        assert!(message.is_permissionless());
        assert!(!message.has_placeholder_nonce());
        assert_eq!(message.requested_finality(), Some(Finality::Fast));
        assert_eq!(message.attested_finality(), Some(Finality::Fast));
        assert!(message.is_fast_transfer());
        message.destination_caller[31] = 1;
        message.nonce = [0; 32];
        message.min_finality_threshold = 1500;
        message.finality_threshold_executed = 2000;
        assert!(!message.is_permissionless());
        assert!(message.has_placeholder_nonce());
        assert_eq!(message.requested_finality(), None);
        assert_eq!(message.attested_finality(), Some(Finality::Standard));
        assert!(!message.is_fast_transfer());
        message.finality_threshold_executed = 1999;
        assert!(message.is_fast_transfer());
        assert!(body().has_hooks());
        assert!(!BurnBody {
            hook_data: Vec::new(),
            ..body()
        }
        .has_hooks());
    }

    #[test]
    fn finality_is_exactly_one_of_two_thresholds() {
        for level in [Finality::Fast, Finality::Standard] {
            assert_eq!(Finality::from_threshold(level.threshold()), Some(level));
        }
        for threshold in [0, 500, 999, 1001, 1999, 2001, u32::MAX] {
            assert_eq!(Finality::from_threshold(threshold), None, "{threshold}");
        }
        assert_eq!(
            (Finality::Fast.name(), Finality::Standard.name()),
            ("fast", "standard")
        );
    }

    #[test]
    fn every_refusal_names_its_problem() {
        let raw = transfer();
        let refuse = |raw: &[u8]| BurnMessage::decode(raw).unwrap_err();

        assert_eq!(refuse(&[]), MessageError::TooShortHeader { len: 0 });
        assert_eq!(
            refuse(&raw[..HEADER_LEN - 1]),
            MessageError::TooShortHeader { len: 147 }
        );
        assert_eq!(
            Message::decode(&raw[..HEADER_LEN - 1]).unwrap_err(),
            MessageError::TooShortHeader { len: 147 }
        );
        assert_eq!(
            refuse(&raw[..HEADER_LEN]),
            MessageError::TooShortBody { len: 0 }
        );
        assert_eq!(
            refuse(&raw[..HEADER_LEN + BURN_BODY_LEN - 1]),
            MessageError::TooShortBody { len: 227 }
        );
        assert_eq!(
            BurnBody::decode(&body().encode()[..100]).unwrap_err(),
            MessageError::TooShortBody { len: 100 }
        );
        // Exactly the fixed part, without hook data, is a whole transfer.
        assert!(BurnMessage::decode(&raw[..HEADER_LEN + BURN_BODY_LEN]).is_ok());

        let too_long = vec![0; MAX_MESSAGE_LEN + 1];
        assert_eq!(
            refuse(&too_long),
            MessageError::TooLong {
                len: MAX_MESSAGE_LEN + 1
            }
        );
        assert_eq!(
            BurnBody::decode(&too_long).unwrap_err(),
            MessageError::TooLong {
                len: MAX_MESSAGE_LEN + 1
            }
        );

        let changed = |at: usize, bytes: &[u8]| {
            let mut raw = transfer();
            raw[at..at + bytes.len()].copy_from_slice(bytes);
            refuse(&raw)
        };
        assert_eq!(
            changed(0, &0u32.to_be_bytes()),
            MessageError::UnsupportedHeaderVersion { version: 0 }
        );
        assert_eq!(
            changed(4, &4u32.to_be_bytes()),
            MessageError::UnknownSourceDomain { domain: 4 }
        );
        assert_eq!(
            changed(8, &20u32.to_be_bytes()),
            MessageError::UnknownDestinationDomain { domain: 20 }
        );
        assert_eq!(
            changed(HEADER_LEN, &2u32.to_be_bytes()),
            MessageError::UnsupportedBodyVersion { version: 2 }
        );
        assert_eq!(
            changed(HEADER_LEN + 4 + 11, &[1]),
            MessageError::NonCanonicalBurnToken
        );
        assert_eq!(
            changed(HEADER_LEN + 36, &[0xff]),
            MessageError::NonCanonicalMintRecipient
        );
        assert_eq!(
            changed(HEADER_LEN + 100, &[0xff]),
            MessageError::NonCanonicalMessageSender
        );

        // Words of non-EVM domains are raw 32 bytes: Solana to Starknet takes any of them.
        let mut message = header();
        message.source_domain = 5;
        message.destination_domain = 25;
        let raw_words = BurnBody {
            burn_token: word(0xcd),
            mint_recipient: word(0x42),
            message_sender: word(0xef),
            ..body()
        };
        assert!(BurnMessage::new(message, raw_words).is_ok());

        // Every refusal is a sentence of its own.
        let sentences = [
            MessageError::TooLong { len: 1 },
            MessageError::TooShortHeader { len: 1 },
            MessageError::UnsupportedHeaderVersion { version: 7 },
            MessageError::TooShortBody { len: 1 },
            MessageError::UnsupportedBodyVersion { version: 9 },
            MessageError::UnknownSourceDomain { domain: 4 },
            MessageError::UnknownDestinationDomain { domain: 999 },
            MessageError::NonCanonicalBurnToken,
            MessageError::NonCanonicalMintRecipient,
            MessageError::NonCanonicalMessageSender,
        ]
        .map(|e| e.to_string());
        for (i, sentence) in sentences.iter().enumerate() {
            assert!(sentence.starts_with("the "), "{sentence}");
            assert!(!sentences[..i].contains(sentence), "{sentence}");
        }
        assert_eq!(
            MessageError::UnknownDestinationDomain { domain: 999 }.to_string(),
            "the destination domain 999 is not a known CCTP V2 domain"
        );
    }

    #[test]
    fn numbers_print_in_decimal() {
        assert_eq!(U256::ZERO.to_string(), "0");
        assert_eq!(U256::from(1_000_000).to_string(), "1000000");
        assert_eq!(U256::from(u128::MAX).to_string(), u128::MAX.to_string());
        assert_eq!(
            U256::MAX.to_string(),
            "115792089237316195423570985008687907853269984665640564039457584007913129639935"
        );
        assert_eq!(format!("{:?}", U256::from(42)), "U256(42)");
        assert_eq!(U256::from(u128::MAX).to_u128(), Some(u128::MAX));
        assert_eq!(U256::MAX.to_u128(), None);
        assert!(U256::ZERO.is_zero() && !U256::from(1).is_zero());
        assert!(U256::from(2) < U256::from(256) && U256::from(u128::MAX) < U256::MAX);
    }

    #[test]
    fn addresses_and_words() {
        let word = address_to_bytes32([0xab; 20]);
        assert_eq!(word[..12], [0; 12]);
        assert_eq!(bytes32_to_address(&word), Some([0xab; 20]));
        let mut padded_wrong = word;
        padded_wrong[11] = 1;
        assert_eq!(bytes32_to_address(&padded_wrong), None);
        assert_eq!(domain(6).map(|d| d.name), Some("base"));
        assert_eq!(
            domain_named("solana").map(|d| (d.id, d.evm)),
            Some((5, false))
        );
        assert_eq!(domain(4), None);
        assert_eq!(domain_named("noble"), None);
        // The table has each number and each name once, in order.
        for pair in DOMAINS.windows(2) {
            assert!(pair[0].id < pair[1].id, "{pair:?}");
        }
        for d in DOMAINS {
            assert_eq!(domain_named(d.name), Some(d));
        }
    }

    fn keccak_hex(text: &str) -> String {
        format!("0x{}", hex::encode(event_topic(text)))
    }

    #[test]
    fn selectors_and_topics_are_the_keccak_of_their_signatures() {
        // Pinned from an independent Keccak-256, and computed here again.
        assert_eq!(hex::encode(selector(DEPOSIT_FOR_BURN)), "8e0250ee");
        assert_eq!(hex::encode(selector(RECEIVE_MESSAGE)), "57ecfd28");
        assert_eq!(
            format!("0x{}", hex::encode(selector("allowance(address,address)"))),
            crate::ALLOWANCE
        );
        let nonce = [7u8; 32];
        assert_eq!(
            used_nonces_call(nonce),
            format!(
                "0x{}{}",
                hex::encode(selector(USED_NONCES)),
                "07".repeat(32)
            )
        );
        assert!(is_enabled_attester_call([1; 20]).ends_with(&"01".repeat(20)));
        assert_eq!(signature_threshold_call().len(), 10);
        assert_eq!(
            hex::encode(selector("transfer(address,uint256)")),
            "a9059cbb"
        );
        for (event, topic) in [
            (DEPOSIT_FOR_BURN_EVENT, DEPOSIT_FOR_BURN_TOPIC),
            (MESSAGE_SENT_EVENT, MESSAGE_SENT_TOPIC),
            (MINT_AND_WITHDRAW_EVENT, MINT_AND_WITHDRAW_TOPIC),
            (MESSAGE_RECEIVED_EVENT, MESSAGE_RECEIVED_TOPIC),
        ] {
            assert_eq!(keccak_hex(event), topic, "{event}");
        }
        assert_eq!(
            keccak_hex(MESSAGE_SENT_EVENT),
            "0x8c5261668696ce22758910d05bab8f186d6eb247ceac2af2e82c7dc17669b036"
        );
    }

    #[test]
    fn deposit_for_burn_is_the_selector_and_seven_words() {
        let call = deposit_for_burn_call(
            U256::from(1_000_000),
            6,
            [0x7f; 20],
            [0x1c; 20],
            [0; 32],
            U256::from(150),
            1000,
        );
        let expected = [
            "0x8e0250ee".to_string(),
            format!("{:064x}", 1_000_000),
            format!("{:064x}", 6),
            format!("{:0>64}", "7f".repeat(20)),
            format!("{:0>64}", "1c".repeat(20)),
            "0".repeat(64),
            format!("{:064x}", 150),
            format!("{:064x}", 1000),
        ]
        .concat();
        assert_eq!(call, expected);
        let widest = deposit_for_burn_call(U256::MAX, 0, [0; 20], [0; 20], [0; 32], U256::MAX, 0);
        assert_eq!(&widest[10..74], "f".repeat(64));
    }

    #[test]
    fn receive_message_encodes_two_dynamic_byte_strings() {
        // 3 bytes and 65 bytes: the first pads to one word, the second to three.
        let call = receive_message_call(&[1, 2, 3], &[0xaa; 65]);
        let expected = [
            "0x57ecfd28".to_string(),
            format!("{:064x}", 0x40),
            format!("{:064x}", 0x40 + 32 + 32),
            format!("{:064x}", 3),
            format!("{:0<64}", "010203"),
            format!("{:064x}", 65),
            format!("{:0<192}", "aa".repeat(65)),
        ]
        .concat();
        assert_eq!(call, expected);
        // Empty, and a whole number of words: no padding at all.
        let call = receive_message_call(&[], &[0xbb; 32]);
        let expected = [
            "0x57ecfd28".to_string(),
            format!("{:064x}", 0x40),
            format!("{:064x}", 0x60),
            format!("{:064x}", 0),
            format!("{:064x}", 32),
            "bb".repeat(32),
        ]
        .concat();
        assert_eq!(call, expected);
    }

    /// Three signers sorted by address, and an attestation of `message` by all of them.
    fn attesters(message: &[u8]) -> (Vec<[u8; 20]>, Vec<Vec<u8>>) {
        super::test_attesters::attest(b'k', 3, message)
    }

    #[test]
    fn an_attestation_recovers_its_signers_in_order() {
        let message = transfer();
        let (addresses, signatures) = attesters(&message);
        let attestation = signatures.concat();
        assert_eq!(recover_signers(&message, &attestation).unwrap(), addresses);
        assert_eq!(
            check_attestation(&message, &attestation, &addresses, 3),
            Ok(())
        );
        assert_eq!(
            check_attestation(&message, &attestation, &addresses, 2),
            Ok(())
        );
        // One signature alone stands for a threshold of one.
        assert_eq!(
            check_attestation(&message, &signatures[1], &addresses, 1),
            Ok(())
        );
        // Another message does not recover the same signers.
        let mut other = message.clone();
        other[HEADER_LEN + 100] ^= 1;
        assert_ne!(
            recover_signers(&other, &attestation).ok(),
            Some(addresses.clone())
        );
    }

    #[test]
    fn out_of_order_and_duplicate_signatures_are_refused() {
        let message = transfer();
        let (_, signatures) = attesters(&message);
        let swapped = [
            signatures[1].clone(),
            signatures[0].clone(),
            signatures[2].clone(),
        ]
        .concat();
        assert_eq!(
            recover_signers(&message, &swapped),
            Err(AttestationError::NotAscending { index: 1 })
        );
        let twice = [signatures[0].clone(), signatures[0].clone()].concat();
        assert_eq!(
            recover_signers(&message, &twice),
            Err(AttestationError::NotAscending { index: 1 })
        );
    }

    #[test]
    fn a_signer_outside_the_attesters_or_too_few_are_refused() {
        let message = transfer();
        let (addresses, signatures) = attesters(&message);
        let attestation = signatures.concat();
        assert_eq!(
            check_attestation(&message, &attestation, &[addresses[0], addresses[2]], 2),
            Err(AttestationError::NotAttester {
                index: 1,
                signer: addresses[1]
            })
        );
        assert_eq!(
            check_attestation(&message, &attestation, &addresses, 4),
            Err(AttestationError::BelowThreshold {
                signatures: 3,
                threshold: 4
            })
        );
        let two = signatures[..2].concat();
        assert_eq!(
            check_attestation(&message, &two, &addresses, 3),
            Err(AttestationError::BelowThreshold {
                signatures: 2,
                threshold: 3
            })
        );
    }

    #[test]
    fn malformed_signatures_are_refused() {
        let message = transfer();
        let (addresses, signatures) = attesters(&message);
        let good = &signatures[0];

        assert_eq!(recover_signers(&message, &[]), Err(AttestationError::Empty));
        assert_eq!(
            recover_signers(&message, &good[..64]),
            Err(AttestationError::BadLength { len: 64 })
        );
        assert_eq!(
            recover_signers(&message, &[good.as_slice(), &[0]].concat()),
            Err(AttestationError::BadLength { len: 66 })
        );
        assert_eq!(
            recover_signers(&message, &vec![0; SIGNATURE_LEN * (MAX_SIGNATURES + 1)]),
            Err(AttestationError::TooManySignatures {
                count: MAX_SIGNATURES + 1
            })
        );

        for v in [0, 1, 26, 29, 255] {
            let mut bad = good.clone();
            bad[64] = v;
            assert_eq!(
                recover_signers(&message, &bad),
                Err(AttestationError::BadV { index: 0, v })
            );
        }

        // The same signature with s mirrored (n − s) and v flipped: valid for a lax verifier,
        // refused here as Circle's contracts refuse it.
        let signature = Signature::from_slice(&good[..64]).unwrap();
        let high_s = Signature::from_scalars(signature.r(), -signature.s()).unwrap();
        assert!(high_s.normalize_s().is_some(), "s is high");
        let mut malleable = high_s.to_bytes().to_vec();
        malleable.push(if good[64] == 27 { 28 } else { 27 });
        assert_eq!(
            recover_signers(&message, &[signatures[1].as_slice(), &malleable].concat()),
            Err(AttestationError::HighS { index: 1 })
        );
        // Its recovered key would be the signer's: the refusal is about form only.
        let lax = VerifyingKey::recover_from_prehash(
            &message_hash(&message),
            &signature,
            RecoveryId::new(good[64] == 28, false),
        )
        .unwrap();
        assert_eq!(address_of_key(&lax), addresses[0]);

        // r or s zero, or r not below the curve's order: no key.
        for (r, s) in [
            ([0u8; 32], [1u8; 32]),
            ([1u8; 32], [0u8; 32]),
            ([0xff; 32], [1u8; 32]),
        ] {
            let unrecoverable = [r.as_slice(), &s, &[27]].concat();
            assert_eq!(
                recover_signers(&message, &unrecoverable),
                Err(AttestationError::Unrecoverable { index: 0 })
            );
        }

        let sentences = [
            AttestationError::Empty,
            AttestationError::BadLength { len: 64 },
            AttestationError::TooManySignatures { count: 65 },
            AttestationError::BadV { index: 0, v: 0 },
            AttestationError::HighS { index: 0 },
            AttestationError::Unrecoverable { index: 0 },
            AttestationError::NotAscending { index: 1 },
            AttestationError::NotAttester {
                index: 0,
                signer: [0xab; 20],
            },
            AttestationError::BelowThreshold {
                signatures: 1,
                threshold: 2,
            },
        ]
        .map(|e| e.to_string());
        for (i, sentence) in sentences.iter().enumerate() {
            assert!(!sentences[..i].contains(sentence), "{sentence}");
        }
        assert_eq!(
            sentences[7],
            format!(
                "signature 1 of the attestation is by 0x{}, which is not an attester",
                "ab".repeat(20)
            )
        );
    }
}
