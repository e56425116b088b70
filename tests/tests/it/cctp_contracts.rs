//! Our own CCTP V2-compatible contracts (`contracts/CctpMessageTransmitter.sol`,
//! `contracts/CctpTokenMessenger.sol`) between two real anvil nodes, from the outside: USDC
//! burnt on chain A (domain 0) leaves as a V2 burn message in `MessageSent` that
//! `payrail_evm::cctp` reads; attested here as Circle's service would (nonce, executed finality
//! and fee filled in, signed by two of three attesters in ascending address order), it mints on
//! chain B (domain 6) for whoever submits it, once; every way of getting the message or its
//! attestation wrong is refused on chain B, on chain, without minting anything.

use k256::ecdsa::SigningKey;
use payrail_evm::cctp::{self, BurnBody, BurnMessage, Message, U256};
use payrail_evm::{address_bytes, address_of};
use payrail_tests::chain::{logs_of, Anvil, Cctp};
use serde_json::Value;
use sha3::{Digest, Keccak256};

/// Chain A's CCTP domain (Ethereum's number).
const DOMAIN_A: u32 = 0;
/// Chain B's CCTP domain (Base's number).
const DOMAIN_B: u32 = 6;
/// Signatures an attestation needs, of the three attesters.
const THRESHOLD: u32 = 2;
/// secp256k1's order: `n − s` is the high-s twin of a signature's `s`.
const CURVE_ORDER: [u8; 32] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe,
    0xba, 0xae, 0xdc, 0xe6, 0xaf, 0x48, 0xa0, 0x3b, 0xbf, 0xd2, 0x5e, 0x8c, 0xd0, 0x36, 0x41, 0x41,
];

/// Two nodes with USDC and our CCTP contracts on each, linked both ways.
struct Bridge {
    a: Anvil,
    b: Anvil,
    usdc_a: String,
    usdc_b: String,
    cctp_a: Cctp,
    cctp_b: Cctp,
    /// The attesters' keys, by ascending address.
    attesters: Vec<SigningKey>,
    /// Burns on A (account 1).
    depositor: String,
    /// Receives the USDC on B (account 2).
    recipient: String,
    /// Submits messages on B: anybody (account 5).
    relayer: String,
    /// Receives the fees on B (account 7).
    fee_recipient: String,
}

/// A key derived from a label: the same attesters every run.
fn key(label: &str) -> SigningKey {
    SigningKey::from_slice(&Keccak256::digest(label.as_bytes())).expect("a valid key")
}

fn address_of_key(key: &SigningKey) -> [u8; 20] {
    address_bytes(&address_of(key.verifying_key())).unwrap()
}

fn bytes20(address: &str) -> [u8; 20] {
    address_bytes(address).unwrap_or_else(|| panic!("{address} is not an address"))
}

fn bytes32(address: &str) -> [u8; 32] {
    cctp::address_to_bytes32(bytes20(address))
}

/// A 32-byte word as a log topic: `0x` and lower-case hex.
fn topic(word: [u8; 32]) -> String {
    format!("0x{}", hex::encode(word))
}

fn number_topic(value: u128) -> String {
    topic(U256::from(value).0)
}

fn nonce(n: u8) -> [u8; 32] {
    Keccak256::digest([b'n', n]).into()
}

/// A log's data as bytes.
fn data_of(log: &Value) -> Vec<u8> {
    hex::decode(log["data"].as_str().unwrap().trim_start_matches("0x")).unwrap()
}

/// The `index`th 32-byte word of ABI-encoded `data`.
fn word_at(data: &[u8], index: usize) -> [u8; 32] {
    data[index * 32..index * 32 + 32].try_into().unwrap()
}

fn number_at(data: &[u8], index: usize) -> u128 {
    U256(word_at(data, index))
        .to_u128()
        .expect("a number that fits u128")
}

/// The `bytes` whose offset is the `index`th word of ABI-encoded `data`.
fn bytes_at(data: &[u8], index: usize) -> Vec<u8> {
    let offset = number_at(data, index) as usize;
    let len = number_at(&data[offset..], 0) as usize;
    data[offset + 32..offset + 32 + len].to_vec()
}

/// The only log of `topic` that `address` emitted in `receipt`.
fn one_log(receipt: &Value, address: &str, topic: &str) -> Value {
    let logs = logs_of(receipt, address, topic);
    assert_eq!(logs.len(), 1, "one {topic} log from {address}: {receipt}");
    logs[0].clone()
}

/// `message` as the attestation service signs it: its `nonce`, executed `finality` and, in its
/// burn message, the executed `fee` filled in (checked as a transfer between known domains).
fn attested(message: &[u8], nonce: [u8; 32], finality: u32, fee: u128) -> Vec<u8> {
    let mut header = Message::decode(message).unwrap();
    let mut body = BurnBody::decode(&header.message_body).unwrap();
    header.nonce = nonce;
    header.finality_threshold_executed = finality;
    body.fee_executed = U256::from(fee);
    BurnMessage::new(header, body).unwrap().encode()
}

/// `message` with its burn message changed by `change` (its header kept).
fn with_body(message: &[u8], change: impl FnOnce(&mut BurnBody)) -> Vec<u8> {
    let mut header = Message::decode(message).unwrap();
    let mut body = BurnBody::decode(&header.message_body).unwrap();
    change(&mut body);
    header.message_body = body.encode();
    header.encode()
}

/// Signatures of `message` by `keys`, in that order: `r ‖ s ‖ v` each, `v` 27 or 28.
fn sign(message: &[u8], keys: &[&SigningKey]) -> Vec<u8> {
    let digest = cctp::message_hash(message);
    keys.iter()
        .flat_map(|key| {
            let (signature, recovery) = key.sign_prehash_recoverable(&digest).unwrap();
            let mut bytes = signature.to_bytes().to_vec();
            bytes.push(27 + recovery.to_byte());
            bytes
        })
        .collect()
}

/// `n − s`, big-endian.
fn negate(s: &[u8]) -> [u8; 32] {
    let mut out = [0u8; 32];
    let mut borrow = 0i16;
    for i in (0..32).rev() {
        let mut digit = i16::from(CURVE_ORDER[i]) - i16::from(s[i]) - borrow;
        borrow = i16::from(digit < 0);
        if digit < 0 {
            digit += 256;
        }
        out[i] = digit as u8;
    }
    out
}

fn bridge() -> Bridge {
    let (a, b) = (Anvil::start(), Anvil::start());
    // Account 0 deploys everything on both nodes, so one transaction more on B first keeps any
    // contract from having the same address on both (minting A's token address on B by mistake
    // would otherwise go unnoticed).
    b.pay_ether(&b.account(0), &b.account(0), 1);
    let mut attesters: Vec<SigningKey> = (0..3)
        .map(|i| key(&format!("payrail cctp attester {i}")))
        .collect();
    attesters.sort_by_key(address_of_key);
    let addresses: Vec<String> = attesters
        .iter()
        .map(|k| format!("0x{}", hex::encode(address_of_key(k))))
        .collect();
    let addresses: Vec<&str> = addresses.iter().map(String::as_str).collect();
    let fee_recipient = b.account(7);

    let usdc_a = a.token("USD Coin", "USDC");
    let usdc_b = b.token("USD Coin", "USDC");
    let cctp_a = a.cctp(DOMAIN_A, &addresses, THRESHOLD, &usdc_a, &fee_recipient);
    let cctp_b = b.cctp(DOMAIN_B, &addresses, THRESHOLD, &usdc_b, &fee_recipient);
    a.cctp_link(&cctp_a, &usdc_a, &cctp_b, &usdc_b);
    b.cctp_link(&cctp_b, &usdc_b, &cctp_a, &usdc_a);
    for (on_a, on_b) in [
        (&usdc_a, &usdc_b),
        (&cctp_a.transmitter, &cctp_b.transmitter),
        (&cctp_a.messenger, &cctp_b.messenger),
    ] {
        assert_ne!(bytes20(on_a), bytes20(on_b));
    }
    Bridge {
        depositor: a.account(1),
        recipient: b.account(2),
        relayer: b.account(5),
        fee_recipient,
        a,
        b,
        usdc_a,
        usdc_b,
        cctp_a,
        cctp_b,
        attesters,
    }
}

impl Bridge {
    /// Mints `amount` of USDC to the depositor on A.
    fn fund(&self, amount: u128) {
        self.a.mint(&self.usdc_a, &self.depositor, amount);
    }

    /// The depositor burns `amount` on A for the recipient on B; returns the receipt and the
    /// message `MessageSent` carries.
    fn burn(
        &self,
        amount: u128,
        destination_caller: [u8; 32],
        max_fee: u128,
        min_finality: u32,
    ) -> (Value, Vec<u8>) {
        self.a.approve(
            &self.usdc_a,
            &self.depositor,
            &self.cctp_a.messenger,
            amount,
        );
        let call = cctp::deposit_for_burn_call(
            U256::from(amount),
            DOMAIN_B,
            bytes20(&self.recipient),
            bytes20(&self.usdc_a),
            destination_caller,
            U256::from(max_fee),
            min_finality,
        );
        let receipt = self
            .a
            .send(&self.depositor, Some(&self.cctp_a.messenger), &call);
        let sent = one_log(&receipt, &self.cctp_a.transmitter, cctp::MESSAGE_SENT_TOPIC);
        let message = bytes_at(&data_of(&sent), 0);
        (receipt, message)
    }

    /// Signatures by the first and the last attester, ascending: a good attestation.
    fn attest(&self, message: &[u8]) -> Vec<u8> {
        let attestation = sign(message, &[&self.attesters[0], &self.attesters[2]]);
        let attesters: Vec<[u8; 20]> = self.attesters.iter().map(address_of_key).collect();
        cctp::check_attestation(message, &attestation, &attesters, THRESHOLD as usize)
            .expect("the codec takes the attestation");
        attestation
    }

    /// `receiveMessage(message, attestation)` on B from `from`, which must succeed.
    fn receive(&self, from: &str, message: &[u8], attestation: &[u8]) -> Value {
        let call = cctp::receive_message_call(message, attestation);
        self.b.send(from, Some(&self.cctp_b.transmitter), &call)
    }

    /// What a refusal must leave alone on B: the recipient's, the fee recipient's and the
    /// destination caller's balances, and the supply.
    fn b_state(&self) -> [u128; 4] {
        [
            self.b.balance_of(&self.usdc_b, &self.recipient),
            self.b.balance_of(&self.usdc_b, &self.fee_recipient),
            self.b.balance_of(&self.usdc_b, &self.b.account(6)),
            self.b.total_supply(&self.usdc_b),
        ]
    }

    /// `usedNonces(nonce)` on B.
    fn used(&self, nonce: [u8; 32]) -> u128 {
        let data = format!(
            "0x{}{}",
            hex::encode(cctp::selector("usedNonces(bytes32)")),
            hex::encode(nonce)
        );
        let word = self.b.call(&self.cctp_b.transmitter, &data);
        u128::from_str_radix(word.trim_start_matches("0x"), 16).unwrap()
    }

    /// Submits `message` with `attestation` on B from `from`, expecting a refusal: checks that
    /// the transaction reverts on chain, emits nothing, mints nothing and spends no nonce;
    /// returns the reason a call gives.
    fn refused(&self, from: &str, message: &[u8], attestation: &[u8]) -> String {
        let nonce: [u8; 32] = message[12..44].try_into().unwrap();
        let used = self.used(nonce);
        let before = self.b_state();
        let call = cctp::receive_message_call(message, attestation);
        let reason = self
            .b
            .revert_reason(from, &self.cctp_b.transmitter, &call)
            .expect("receiveMessage refuses");
        let receipt = self
            .b
            .send_may_revert(from, &self.cctp_b.transmitter, &call);
        assert_eq!(receipt["status"], "0x0", "reverts on chain: {receipt}");
        assert_eq!(receipt["logs"], serde_json::json!([]), "{receipt}");
        assert_eq!(self.b_state(), before, "nothing moved ({reason})");
        assert_eq!(self.used(nonce), used, "no nonce spent ({reason})");
        reason
    }
}

fn assert_reason(reason: &str, expected: &str) {
    assert!(
        reason.contains(expected),
        "refused for {reason:?}, not {expected:?}"
    );
}

#[test]
fn a_standard_transfer_burns_on_one_chain_and_mints_on_the_other() {
    let bridge = bridge();
    let amount = 25_000_000;
    bridge.fund(amount);
    let supply = bridge.a.total_supply(&bridge.usdc_a);
    assert_eq!(supply, amount);

    let (receipt, message) = bridge.burn(amount, [0; 32], 0, 2000);

    // A: burnt, not held.
    assert_eq!(bridge.a.total_supply(&bridge.usdc_a), supply - amount);
    assert_eq!(bridge.a.balance_of(&bridge.usdc_a, &bridge.depositor), 0);
    assert_eq!(
        bridge
            .a
            .balance_of(&bridge.usdc_a, &bridge.cctp_a.messenger),
        0
    );
    // DepositForBurn(address indexed burnToken, uint256 amount, address indexed depositor,
    // bytes32 mintRecipient, uint32 destinationDomain, bytes32 destinationTokenMessenger,
    // bytes32 destinationCaller, uint256 maxFee, uint32 indexed minFinalityThreshold, bytes
    // hookData)
    let deposit = one_log(
        &receipt,
        &bridge.cctp_a.messenger,
        cctp::DEPOSIT_FOR_BURN_TOPIC,
    );
    let topics = deposit["topics"].as_array().unwrap();
    assert_eq!(topics.len(), 4, "{deposit}");
    assert_eq!(topics[1], topic(bytes32(&bridge.usdc_a)));
    assert_eq!(topics[2], topic(bytes32(&bridge.depositor)));
    assert_eq!(topics[3], number_topic(2000));
    let data = data_of(&deposit);
    assert_eq!(number_at(&data, 0), amount);
    assert_eq!(word_at(&data, 1), bytes32(&bridge.recipient));
    assert_eq!(number_at(&data, 2), u128::from(DOMAIN_B));
    assert_eq!(word_at(&data, 3), bytes32(&bridge.cctp_b.messenger));
    assert_eq!(word_at(&data, 4), [0; 32]);
    assert_eq!(number_at(&data, 5), 0);
    assert_eq!(bytes_at(&data, 6), Vec::<u8>::new());

    // The message, as the codec reads it: placeholders where the attestation service writes.
    let transfer = BurnMessage::decode(&message).expect("a V2 burn message");
    assert_eq!(
        (transfer.source().name, transfer.destination().name),
        ("ethereum", "base")
    );
    let header = transfer.message();
    assert!(header.has_placeholder_nonce());
    assert_eq!(header.sender, bytes32(&bridge.cctp_a.messenger));
    assert_eq!(header.recipient, bytes32(&bridge.cctp_b.messenger));
    assert!(header.is_permissionless());
    assert_eq!(header.min_finality_threshold, 2000);
    assert_eq!(header.finality_threshold_executed, 0);
    let body = transfer.body();
    assert_eq!(body.burn_token, bytes32(&bridge.usdc_a));
    assert_eq!(body.mint_recipient, bytes32(&bridge.recipient));
    assert_eq!(body.amount, U256::from(amount));
    assert_eq!(body.message_sender, bytes32(&bridge.depositor));
    assert_eq!(body.max_fee, U256::ZERO);
    assert_eq!(body.fee_executed, U256::ZERO);
    assert_eq!(body.expiration_block, U256::ZERO);
    assert!(!body.has_hooks());
    assert_eq!(message.len(), cctp::HEADER_LEN + cctp::BURN_BODY_LEN);

    // B: anybody submits it, attested; the recipient gets exactly the amount.
    let message = attested(&message, nonce(1), 2000, 0);
    let attestation = bridge.attest(&message);
    assert_eq!(bridge.used(nonce(1)), 0);
    let receipt = bridge.receive(&bridge.relayer, &message, &attestation);
    assert_eq!(
        bridge.b.balance_of(&bridge.usdc_b, &bridge.recipient),
        amount
    );
    assert_eq!(bridge.b.total_supply(&bridge.usdc_b), amount);
    assert_eq!(
        bridge.b.balance_of(&bridge.usdc_b, &bridge.fee_recipient),
        0
    );
    assert_eq!(bridge.used(nonce(1)), 1);

    // MintAndWithdraw(address indexed mintRecipient, uint256 amount, address indexed
    // mintToken, uint256 feeCollected)
    let mint = one_log(
        &receipt,
        &bridge.cctp_b.messenger,
        cctp::MINT_AND_WITHDRAW_TOPIC,
    );
    assert_eq!(mint["topics"][1], topic(bytes32(&bridge.recipient)));
    assert_eq!(mint["topics"][2], topic(bytes32(&bridge.usdc_b)));
    let data = data_of(&mint);
    assert_eq!((number_at(&data, 0), number_at(&data, 1)), (amount, 0));

    // MessageReceived(address indexed caller, uint32 sourceDomain, bytes32 indexed nonce,
    // bytes32 sender, uint32 indexed finalityThresholdExecuted, bytes messageBody)
    let received = one_log(
        &receipt,
        &bridge.cctp_b.transmitter,
        cctp::MESSAGE_RECEIVED_TOPIC,
    );
    assert_eq!(received["topics"][1], topic(bytes32(&bridge.relayer)));
    assert_eq!(received["topics"][2], topic(nonce(1)));
    assert_eq!(received["topics"][3], number_topic(2000));
    let data = data_of(&received);
    assert_eq!(number_at(&data, 0), u128::from(DOMAIN_A));
    assert_eq!(word_at(&data, 1), bytes32(&bridge.cctp_a.messenger));
    assert_eq!(bytes_at(&data, 2), message[cctp::HEADER_LEN..].to_vec());
}

#[test]
fn a_wrong_message_or_attestation_is_refused_and_mints_nothing() {
    let bridge = bridge();
    let amount = 7_000_000;
    bridge.fund(3 * amount);
    let (_, sent) = bridge.burn(amount, [0; 32], 0, 2000);
    let message = attested(&sent, nonce(2), 2000, 0);
    let good = bridge.attest(&message);
    let [first, second, third] = [
        &bridge.attesters[0],
        &bridge.attesters[1],
        &bridge.attesters[2],
    ];
    let anyone = &bridge.relayer;

    // Signed by a key that is not an attester (with one that is, ascending).
    let stranger = key("payrail cctp stranger");
    let mut pair = [first, &stranger];
    pair.sort_by_key(|k| address_of_key(k));
    let reason = bridge.refused(anyone, &message, &sign(&message, &pair));
    assert_reason(&reason, "signer is not an enabled attester");

    // The amount changed after signing: the signatures recover to strangers (in whatever order).
    let more = with_body(&message, |body| body.amount = U256::from(amount + 1));
    let reason = bridge.refused(anyone, &more, &good);
    assert!(
        reason.contains("signer is not an enabled attester")
            || reason.contains("signers not in ascending order"),
        "{reason}"
    );

    // Good signatures, in descending order.
    let reason = bridge.refused(anyone, &message, &sign(&message, &[third, first]));
    assert_reason(&reason, "signers not in ascending order");
    // The same attester twice.
    let reason = bridge.refused(anyone, &message, &sign(&message, &[second, second]));
    assert_reason(&reason, "signers not in ascending order");

    // One signature short, one too many, and a stray byte.
    let reason = bridge.refused(anyone, &message, &sign(&message, &[second]));
    assert_reason(&reason, "attestation length");
    let reason = bridge.refused(anyone, &message, &sign(&message, &[first, second, third]));
    assert_reason(&reason, "attestation length");
    let mut long = good.clone();
    long.push(0);
    let reason = bridge.refused(anyone, &message, &long);
    assert_reason(&reason, "attestation length");

    // The first signature's malleable twin (n − s, the other v): same signer, high s.
    let mut twin = good.clone();
    let high = negate(&twin[32..64]);
    twin[32..64].copy_from_slice(&high);
    twin[64] = if twin[64] == 27 { 28 } else { 27 };
    let reason = bridge.refused(anyone, &message, &twin);
    assert_reason(&reason, "signature s is high");
    // A v that is neither 27 nor 28.
    let mut bad_v = good.clone();
    bad_v[64] += 2;
    let reason = bridge.refused(anyone, &message, &bad_v);
    assert_reason(&reason, "v is not 27 or 28");

    // Well signed, but not a message for B: another header version, another destination.
    let mut header = Message::decode(&message).unwrap();
    header.version = 2;
    let other_version = header.encode();
    let reason = bridge.refused(anyone, &other_version, &bridge.attest(&other_version));
    assert_reason(&reason, "unsupported message version");
    let mut header = Message::decode(&message).unwrap();
    header.destination_domain = DOMAIN_A;
    let to_a = header.encode();
    let reason = bridge.refused(anyone, &to_a, &bridge.attest(&to_a));
    assert_reason(&reason, "destination is not the local domain");

    // Well signed, but expired on B (the expiration block is behind it).
    let head = u128::from(bridge.b.head());
    let expired = with_body(&message, |body| body.expiration_block = U256::from(head));
    let reason = bridge.refused(anyone, &expired, &bridge.attest(&expired));
    assert_reason(&reason, "message expired");

    // Nothing of that spent the nonce: the genuine attestation mints, once.
    bridge.receive(anyone, &message, &good);
    assert_eq!(
        bridge.b.balance_of(&bridge.usdc_b, &bridge.recipient),
        amount
    );
    assert_eq!(bridge.used(nonce(2)), 1);
    let reason = bridge.refused(anyone, &message, &good);
    assert_reason(&reason, "Nonce already used");
    // The same nonce is spent whatever else the message says.
    let reason = bridge.refused(anyone, &more, &bridge.attest(&more));
    assert_reason(&reason, "Nonce already used");

    // A destination caller: refused from anyone else, taken from it.
    let caller = bridge.b.account(6);
    let (_, sent) = bridge.burn(amount, bytes32(&caller), 0, 2000);
    assert_eq!(
        Message::decode(&sent).unwrap().destination_caller,
        bytes32(&caller)
    );
    let message = attested(&sent, nonce(3), 2000, 0);
    let attestation = bridge.attest(&message);
    let reason = bridge.refused(anyone, &message, &attestation);
    assert_reason(&reason, "caller is not the destination caller");
    let receipt = bridge.receive(&caller, &message, &attestation);
    let received = one_log(
        &receipt,
        &bridge.cctp_b.transmitter,
        cctp::MESSAGE_RECEIVED_TOPIC,
    );
    assert_eq!(received["topics"][1], topic(bytes32(&caller)));
    assert_eq!(
        bridge.b.balance_of(&bridge.usdc_b, &bridge.recipient),
        2 * amount
    );
    assert_eq!(bridge.b.balance_of(&bridge.usdc_b, &caller), 0);

    // A fast transfer attested with a fee above its maxFee; then within it (at it), taken.
    let max_fee = 1_000;
    let (_, sent) = bridge.burn(amount, [0; 32], max_fee, 1000);
    let greedy = attested(&sent, nonce(4), 1000, max_fee + 1);
    let reason = bridge.refused(anyone, &greedy, &bridge.attest(&greedy));
    assert_reason(&reason, "fee above maxFee");
    let fair = attested(&sent, nonce(4), 1000, max_fee);
    bridge.receive(anyone, &fair, &bridge.attest(&fair));
    assert_eq!(
        bridge.b.balance_of(&bridge.usdc_b, &bridge.recipient),
        3 * amount - max_fee
    );
    assert_eq!(
        bridge.b.balance_of(&bridge.usdc_b, &bridge.fee_recipient),
        max_fee
    );
    assert_eq!(bridge.b.total_supply(&bridge.usdc_b), 3 * amount);
    assert_eq!(bridge.a.total_supply(&bridge.usdc_a), 0);
}

#[test]
fn a_fast_transfer_pays_its_fee_to_the_fee_recipient() {
    let bridge = bridge();
    let (amount, max_fee, fee) = (10_000_000, 5_000, 1_300);
    bridge.fund(amount);
    let (receipt, sent) = bridge.burn(amount, [0; 32], max_fee, 1000);
    assert_eq!(bridge.a.total_supply(&bridge.usdc_a), 0);
    let deposit = one_log(
        &receipt,
        &bridge.cctp_a.messenger,
        cctp::DEPOSIT_FOR_BURN_TOPIC,
    );
    assert_eq!(deposit["topics"][3], number_topic(1000));
    assert_eq!(number_at(&data_of(&deposit), 5), max_fee);
    let transfer = BurnMessage::decode(&sent).unwrap();
    assert_eq!(transfer.message().min_finality_threshold, 1000);
    assert_eq!(transfer.body().max_fee, U256::from(max_fee));
    assert_eq!(transfer.body().fee_executed, U256::ZERO);

    let message = attested(&sent, nonce(5), 1000, fee);
    assert!(Message::decode(&message).unwrap().is_fast_transfer());
    let receipt = bridge.receive(&bridge.relayer, &message, &bridge.attest(&message));

    assert_eq!(
        bridge.b.balance_of(&bridge.usdc_b, &bridge.recipient),
        amount - fee
    );
    assert_eq!(
        bridge.b.balance_of(&bridge.usdc_b, &bridge.fee_recipient),
        fee
    );
    assert_eq!(bridge.b.total_supply(&bridge.usdc_b), amount);
    let mint = one_log(
        &receipt,
        &bridge.cctp_b.messenger,
        cctp::MINT_AND_WITHDRAW_TOPIC,
    );
    assert_eq!(mint["topics"][1], topic(bytes32(&bridge.recipient)));
    assert_eq!(mint["topics"][2], topic(bytes32(&bridge.usdc_b)));
    let data = data_of(&mint);
    assert_eq!(
        (number_at(&data, 0), number_at(&data, 1)),
        (amount - fee, fee)
    );
    let received = one_log(
        &receipt,
        &bridge.cctp_b.transmitter,
        cctp::MESSAGE_RECEIVED_TOPIC,
    );
    assert_eq!(received["topics"][2], topic(nonce(5)));
    assert_eq!(received["topics"][3], number_topic(1000));
}
