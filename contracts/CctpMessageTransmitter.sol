// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import "./Owned.sol";

/// What a message's recipient on this chain answers to (the interface Circle's CCTP V2 message
/// handlers have): a message attested at finality 2000 or more goes to the first function, one
/// attested below that (a fast transfer) to the second.
interface ICctpMessageRecipient {
    function handleReceiveFinalizedMessage(
        uint32 sourceDomain,
        bytes32 sender,
        uint32 finalityThresholdExecuted,
        bytes calldata messageBody
    ) external returns (bool);

    function handleReceiveUnfinalizedMessage(
        uint32 sourceDomain,
        bytes32 sender,
        uint32 finalityThresholdExecuted,
        bytes calldata messageBody
    ) external returns (bool);
}

/// Payrail's stand-in for Circle's MessageTransmitterV2 on local chains, written from CCTP V2's
/// documented message format and interface.
///
/// Outgoing: the paired token messenger hands it a burn message; it wraps that in the 148-byte
/// V2 header and emits it as `MessageSent(bytes)`, with the nonce and the executed finality left
/// zero for the attestation service to fill in before it signs.
///
/// Incoming: `receiveMessage(message, attestation)` takes a message signed by exactly
/// `signatureThreshold` enabled attesters (65-byte `r ‖ s ‖ v` signatures over
/// keccak256(message), signers in strictly ascending address order, low `s` only), spends its
/// nonce, and hands its body to the header's recipient.
contract CctpMessageTransmitter is Owned {
    // ---- Message layout (byte offsets into the header) ----

    /// The header version of CCTP V2.
    uint32 public constant version = 1;
    uint256 private constant SOURCE_DOMAIN_AT = 4;
    uint256 private constant DESTINATION_DOMAIN_AT = 8;
    uint256 private constant NONCE_AT = 12;
    uint256 private constant SENDER_AT = 44;
    uint256 private constant RECIPIENT_AT = 76;
    uint256 private constant DESTINATION_CALLER_AT = 108;
    uint256 private constant MIN_FINALITY_AT = 140;
    uint256 private constant FINALITY_EXECUTED_AT = 144;
    uint256 private constant BODY_AT = 148;

    /// Executed finality at and above which a message counts as finalized.
    uint32 public constant FINALIZED_THRESHOLD = 2000;

    uint256 private constant SIGNATURE_BYTES = 65;
    /// Half the order of secp256k1: a valid `s` is at most this (the other half is the same
    /// signature's malleable twin).
    uint256 private constant HALF_CURVE_ORDER =
        0x7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0;

    // ---- State ----

    /// This chain's CCTP domain.
    uint32 public immutable localDomain;
    /// The only caller of `sendMessage`.
    address public tokenMessenger;
    /// How many signatures an attestation must have, exactly.
    uint256 public signatureThreshold;
    /// How many attesters are enabled.
    uint256 public enabledAttesterCount;
    mapping(address => bool) public isEnabledAttester;
    /// 1 for every nonce already received, 0 otherwise.
    mapping(bytes32 => uint256) public usedNonces;

    // ---- Events ----

    event MessageSent(bytes message);
    event MessageReceived(
        address indexed caller,
        uint32 sourceDomain,
        bytes32 indexed nonce,
        bytes32 sender,
        uint32 indexed finalityThresholdExecuted,
        bytes messageBody
    );
    event AttesterEnabled(address indexed attester);
    event AttesterDisabled(address indexed attester);
    event SignatureThresholdUpdated(uint256 oldSignatureThreshold, uint256 newSignatureThreshold);
    event TokenMessengerSet(address tokenMessenger);

    constructor(uint32 domain, address[] memory attesters, uint256 threshold) {
        localDomain = domain;
        for (uint256 i = 0; i < attesters.length; i++) {
            _enable(attesters[i]);
        }
        _setThreshold(threshold);
    }

    // ---- Administration ----

    /// Pairs the transmitter with its token messenger (the sender of every outgoing message).
    function setTokenMessenger(address messenger) external onlyOwner {
        require(messenger != address(0), "messenger is the zero address");
        tokenMessenger = messenger;
        emit TokenMessengerSet(messenger);
    }

    function enableAttester(address attester) external onlyOwner {
        _enable(attester);
    }

    /// Disables an attester; refused when fewer enabled attesters than the threshold would remain.
    function disableAttester(address attester) external onlyOwner {
        require(isEnabledAttester[attester], "not an enabled attester");
        require(enabledAttesterCount > signatureThreshold, "too few attesters would remain");
        isEnabledAttester[attester] = false;
        enabledAttesterCount -= 1;
        emit AttesterDisabled(attester);
    }

    function setSignatureThreshold(uint256 threshold) external onlyOwner {
        _setThreshold(threshold);
    }

    function _enable(address attester) private {
        require(attester != address(0), "attester is the zero address");
        require(!isEnabledAttester[attester], "attester already enabled");
        isEnabledAttester[attester] = true;
        enabledAttesterCount += 1;
        emit AttesterEnabled(attester);
    }

    function _setThreshold(uint256 threshold) private {
        require(threshold != 0, "threshold is zero");
        require(threshold <= enabledAttesterCount, "threshold above the enabled attesters");
        require(threshold != signatureThreshold, "threshold unchanged");
        emit SignatureThresholdUpdated(signatureThreshold, threshold);
        signatureThreshold = threshold;
    }

    // ---- Sending ----

    /// Emits a message from the paired token messenger to `recipient` on `destinationDomain`.
    /// Its nonce and executed finality are zero: the attestation service fills them in.
    function sendMessage(
        uint32 destinationDomain,
        bytes32 recipient,
        bytes32 destinationCaller,
        uint32 minFinalityThreshold,
        bytes calldata messageBody
    ) external {
        require(msg.sender == tokenMessenger, "only the token messenger sends");
        require(destinationDomain != localDomain, "destination is the local domain");
        require(recipient != bytes32(0), "recipient is zero");
        bytes memory message = abi.encodePacked(
            version,
            localDomain,
            destinationDomain,
            bytes32(0), // nonce, assigned by the attestation service
            bytes32(uint256(uint160(msg.sender))),
            recipient,
            destinationCaller,
            minFinalityThreshold,
            uint32(0), // finality executed, set by the attestation service
            messageBody
        );
        emit MessageSent(message);
    }

    // ---- Receiving ----

    /// Checks `message` and its `attestation`, spends its nonce and delivers its body.
    function receiveMessage(bytes calldata message, bytes calldata attestation) external returns (bool) {
        require(message.length >= BODY_AT, "message shorter than its header");
        require(_u32(message, 0) == version, "unsupported message version");
        require(_u32(message, DESTINATION_DOMAIN_AT) == localDomain, "destination is not the local domain");
        bytes32 destinationCaller = _b32(message, DESTINATION_CALLER_AT);
        require(
            destinationCaller == bytes32(0) || destinationCaller == bytes32(uint256(uint160(msg.sender))),
            "caller is not the destination caller"
        );
        _checkAttestation(keccak256(message), attestation);

        bytes32 nonce = _b32(message, NONCE_AT);
        require(usedNonces[nonce] == 0, "Nonce already used");
        usedNonces[nonce] = 1;

        uint32 sourceDomain = _u32(message, SOURCE_DOMAIN_AT);
        bytes32 sender = _b32(message, SENDER_AT);
        uint32 finality = _u32(message, FINALITY_EXECUTED_AT);
        bytes calldata body = message[BODY_AT:];
        ICctpMessageRecipient recipient = ICctpMessageRecipient(_addressOf(_b32(message, RECIPIENT_AT)));
        bool handled = finality >= FINALIZED_THRESHOLD
            ? recipient.handleReceiveFinalizedMessage(sourceDomain, sender, finality, body)
            : recipient.handleReceiveUnfinalizedMessage(sourceDomain, sender, finality, body);
        require(handled, "recipient refused the message");

        emit MessageReceived(msg.sender, sourceDomain, nonce, sender, finality, body);
        return true;
    }

    /// Refuses unless `attestation` is exactly `signatureThreshold` low-s signatures over
    /// `digest`, by enabled attesters, in strictly ascending signer order.
    function _checkAttestation(bytes32 digest, bytes calldata attestation) private view {
        uint256 count = signatureThreshold;
        require(attestation.length == count * SIGNATURE_BYTES, "attestation length is not the threshold's");
        address previous = address(0);
        for (uint256 i = 0; i < count; i++) {
            uint256 at = i * SIGNATURE_BYTES;
            bytes32 r = _b32(attestation, at);
            bytes32 s = _b32(attestation, at + 32);
            uint8 v = uint8(attestation[at + 64]);
            require(v == 27 || v == 28, "signature v is not 27 or 28");
            require(uint256(s) <= HALF_CURVE_ORDER, "signature s is high");
            address signer = ecrecover(digest, v, r, s);
            require(signer != address(0), "signature does not recover");
            require(signer > previous, "signers not in ascending order");
            require(isEnabledAttester[signer], "signer is not an enabled attester");
            previous = signer;
        }
    }

    // ---- Reading calldata ----

    function _u32(bytes calldata data, uint256 at) private pure returns (uint32) {
        return uint32(bytes4(data[at:at + 4]));
    }

    function _b32(bytes calldata data, uint256 at) private pure returns (bytes32) {
        return bytes32(data[at:at + 32]);
    }

    /// The EVM address a 32-byte word holds; refuses a word whose first 12 bytes are not zero.
    function _addressOf(bytes32 word) private pure returns (address) {
        require(uint256(word) >> 160 == 0, "recipient is not an address");
        return address(uint160(uint256(word)));
    }
}
