// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import "./Owned.sol";

/// The transmitter this messenger sends through (CctpMessageTransmitter.sol).
interface ICctpTransmitter {
    function localDomain() external view returns (uint32);

    function sendMessage(
        uint32 destinationDomain,
        bytes32 recipient,
        bytes32 destinationCaller,
        uint32 minFinalityThreshold,
        bytes calldata messageBody
    ) external;
}

/// A token this messenger may burn and mint: an ERC-20 that lets its minters mint and burn
/// (TestToken.sol, with this messenger as a minter).
interface IMintBurnToken {
    function transferFrom(address from, address to, uint256 value) external returns (bool);

    function mint(address to, uint256 value) external;

    function burn(uint256 value) external;
}

/// Payrail's stand-in for Circle's TokenMessengerV2 on local chains, written from CCTP V2's
/// documented interface and burn message format.
///
/// Source side: `depositForBurn` takes the depositor's tokens, burns them, and sends a V2 burn
/// message (fee executed and expiration block zero) to the destination domain's messenger
/// through the local transmitter.
///
/// Destination side: the transmitter hands it an attested burn message from a known remote
/// messenger; it mints the amount less the executed fee to the mint recipient, and the fee to
/// the fee recipient. It must be a minter of every local token it serves.
contract CctpTokenMessenger is Owned {
    // ---- Burn message layout (byte offsets into the body) ----

    /// The burn message version of CCTP V2.
    uint32 public constant messageBodyVersion = 1;
    uint256 private constant BURN_TOKEN_AT = 4;
    uint256 private constant MINT_RECIPIENT_AT = 36;
    uint256 private constant AMOUNT_AT = 68;
    uint256 private constant MAX_FEE_AT = 132;
    uint256 private constant FEE_EXECUTED_AT = 164;
    uint256 private constant EXPIRATION_BLOCK_AT = 196;
    uint256 private constant HOOK_DATA_AT = 228;

    /// The lowest executed finality an unfinalized (fast) message may be minted at.
    uint32 public constant MIN_UNFINALIZED_THRESHOLD = 500;

    // ---- State ----

    uint32 public immutable localDomain;
    address public immutable localMessageTransmitter;
    /// Who receives the executed fee of each mint.
    address public feeRecipient;
    /// The token messenger of each remote domain, as a 32-byte word; zero for none.
    mapping(uint32 => bytes32) public remoteTokenMessengers;
    /// The local tokens this messenger burns and mints.
    mapping(address => bool) public isLocalToken;
    /// The local token minted for a remote domain's burnt token, by keccak256(domain ‖ token).
    mapping(bytes32 => address) private localTokenOf;

    // ---- Events ----

    event DepositForBurn(
        address indexed burnToken,
        uint256 amount,
        address indexed depositor,
        bytes32 mintRecipient,
        uint32 destinationDomain,
        bytes32 destinationTokenMessenger,
        bytes32 destinationCaller,
        uint256 maxFee,
        uint32 indexed minFinalityThreshold,
        bytes hookData
    );
    /// `amount` is what the mint recipient received (the burnt amount less the fee).
    event MintAndWithdraw(
        address indexed mintRecipient,
        uint256 amount,
        address indexed mintToken,
        uint256 feeCollected
    );
    event RemoteTokenMessengerAdded(uint32 domain, bytes32 tokenMessenger);
    event RemoteTokenMessengerRemoved(uint32 domain, bytes32 tokenMessenger);
    event LocalTokenSet(address token, bool supported);
    event TokenPairLinked(address localToken, uint32 remoteDomain, bytes32 remoteToken);
    event TokenPairUnlinked(address localToken, uint32 remoteDomain, bytes32 remoteToken);
    event FeeRecipientSet(address feeRecipient);

    modifier onlyTransmitter() {
        require(msg.sender == localMessageTransmitter, "only the local transmitter");
        _;
    }

    constructor(address transmitter, address feeRecipient_) {
        require(transmitter != address(0), "transmitter is the zero address");
        localMessageTransmitter = transmitter;
        localDomain = ICctpTransmitter(transmitter).localDomain();
        _setFeeRecipient(feeRecipient_);
    }

    // ---- Administration ----

    function setFeeRecipient(address recipient) external onlyOwner {
        _setFeeRecipient(recipient);
    }

    function addRemoteTokenMessenger(uint32 domain, bytes32 messenger) external onlyOwner {
        require(domain != localDomain, "domain is the local domain");
        require(messenger != bytes32(0), "messenger is zero");
        require(remoteTokenMessengers[domain] == bytes32(0), "domain already has a messenger");
        remoteTokenMessengers[domain] = messenger;
        emit RemoteTokenMessengerAdded(domain, messenger);
    }

    function removeRemoteTokenMessenger(uint32 domain) external onlyOwner {
        bytes32 messenger = remoteTokenMessengers[domain];
        require(messenger != bytes32(0), "domain has no messenger");
        delete remoteTokenMessengers[domain];
        emit RemoteTokenMessengerRemoved(domain, messenger);
    }

    /// Starts (or stops) burning and minting `token`, of which this messenger must be a minter.
    function setLocalToken(address token, bool supported) external onlyOwner {
        require(token != address(0), "token is the zero address");
        isLocalToken[token] = supported;
        emit LocalTokenSet(token, supported);
    }

    /// Mints `localToken` for `remoteToken` burnt on `remoteDomain`.
    function linkTokenPair(address localToken, uint32 remoteDomain, bytes32 remoteToken) external onlyOwner {
        require(isLocalToken[localToken], "local token unsupported");
        require(remoteToken != bytes32(0), "remote token is zero");
        bytes32 key = _pairKey(remoteDomain, remoteToken);
        require(localTokenOf[key] == address(0), "remote token already linked");
        localTokenOf[key] = localToken;
        emit TokenPairLinked(localToken, remoteDomain, remoteToken);
    }

    function unlinkTokenPair(uint32 remoteDomain, bytes32 remoteToken) external onlyOwner {
        bytes32 key = _pairKey(remoteDomain, remoteToken);
        address localToken = localTokenOf[key];
        require(localToken != address(0), "remote token not linked");
        delete localTokenOf[key];
        emit TokenPairUnlinked(localToken, remoteDomain, remoteToken);
    }

    /// The local token minted for `remoteToken` burnt on `remoteDomain`; zero for none.
    function localTokenFor(uint32 remoteDomain, bytes32 remoteToken) external view returns (address) {
        return localTokenOf[_pairKey(remoteDomain, remoteToken)];
    }

    function _setFeeRecipient(address recipient) private {
        require(recipient != address(0), "fee recipient is the zero address");
        feeRecipient = recipient;
        emit FeeRecipientSet(recipient);
    }

    function _pairKey(uint32 remoteDomain, bytes32 remoteToken) private pure returns (bytes32) {
        return keccak256(abi.encodePacked(remoteDomain, remoteToken));
    }

    // ---- Burning (source side) ----

    /// One deposit's arguments (kept together, off the stack).
    struct Deposit {
        uint256 amount;
        uint32 destinationDomain;
        bytes32 mintRecipient;
        address burnToken;
        bytes32 destinationCaller;
        uint256 maxFee;
        uint32 minFinalityThreshold;
    }

    /// Burns `amount` of `burnToken` from the caller (who must have approved this messenger) to
    /// be minted to `mintRecipient` on `destinationDomain`, receivable only by
    /// `destinationCaller` (zero: by anyone), for a fee of at most `maxFee`, attested at
    /// `minFinalityThreshold` or more.
    function depositForBurn(
        uint256 amount,
        uint32 destinationDomain,
        bytes32 mintRecipient,
        address burnToken,
        bytes32 destinationCaller,
        uint256 maxFee,
        uint32 minFinalityThreshold
    ) external {
        _deposit(
            Deposit(amount, destinationDomain, mintRecipient, burnToken, destinationCaller, maxFee, minFinalityThreshold),
            ""
        );
    }

    /// The same, carrying `hookData` (not empty) in the burn message for the destination.
    function depositForBurnWithHook(
        uint256 amount,
        uint32 destinationDomain,
        bytes32 mintRecipient,
        address burnToken,
        bytes32 destinationCaller,
        uint256 maxFee,
        uint32 minFinalityThreshold,
        bytes calldata hookData
    ) external {
        require(hookData.length != 0, "hook data is empty");
        _deposit(
            Deposit(amount, destinationDomain, mintRecipient, burnToken, destinationCaller, maxFee, minFinalityThreshold),
            hookData
        );
    }

    function _deposit(Deposit memory d, bytes memory hookData) private {
        require(d.amount != 0, "amount is zero");
        require(d.mintRecipient != bytes32(0), "mint recipient is zero");
        require(d.maxFee < d.amount, "maxFee not below amount");
        bytes32 destinationMessenger = remoteTokenMessengers[d.destinationDomain];
        require(destinationMessenger != bytes32(0), "unknown destination domain");
        require(isLocalToken[d.burnToken], "burn token unsupported");

        IMintBurnToken token = IMintBurnToken(d.burnToken);
        require(token.transferFrom(msg.sender, address(this), d.amount), "transferFrom failed");
        token.burn(d.amount);

        ICctpTransmitter(localMessageTransmitter).sendMessage(
            d.destinationDomain,
            destinationMessenger,
            d.destinationCaller,
            d.minFinalityThreshold,
            _burnMessage(d, hookData)
        );
        emit DepositForBurn(
            d.burnToken,
            d.amount,
            msg.sender,
            d.mintRecipient,
            d.destinationDomain,
            destinationMessenger,
            d.destinationCaller,
            d.maxFee,
            d.minFinalityThreshold,
            hookData
        );
    }

    /// A V2 burn message from the caller, its fee executed and expiration block zero.
    function _burnMessage(Deposit memory d, bytes memory hookData) private view returns (bytes memory) {
        return abi.encodePacked(
            messageBodyVersion,
            bytes32(uint256(uint160(d.burnToken))),
            d.mintRecipient,
            d.amount,
            bytes32(uint256(uint160(msg.sender))),
            d.maxFee,
            uint256(0), // fee executed, set by the attestation service
            uint256(0), // expiration block, none
            hookData
        );
    }

    // ---- Minting (destination side) ----

    /// A burn message attested as finalized.
    function handleReceiveFinalizedMessage(
        uint32 remoteDomain,
        bytes32 sender,
        uint32, /* finalityThresholdExecuted */
        bytes calldata messageBody
    ) external onlyTransmitter returns (bool) {
        _mint(remoteDomain, sender, messageBody);
        return true;
    }

    /// A burn message attested before finality (a fast transfer).
    function handleReceiveUnfinalizedMessage(
        uint32 remoteDomain,
        bytes32 sender,
        uint32 finalityThresholdExecuted,
        bytes calldata messageBody
    ) external onlyTransmitter returns (bool) {
        require(finalityThresholdExecuted >= MIN_UNFINALIZED_THRESHOLD, "finality below the minimum");
        _mint(remoteDomain, sender, messageBody);
        return true;
    }

    function _mint(uint32 remoteDomain, bytes32 sender, bytes calldata body) private {
        require(sender != bytes32(0) && remoteTokenMessengers[remoteDomain] == sender, "unknown remote token messenger");
        require(body.length >= HOOK_DATA_AT, "burn message too short");
        require(uint32(bytes4(body[0:4])) == messageBodyVersion, "unsupported burn message version");

        uint256 amount = _uint(body, AMOUNT_AT);
        uint256 fee = _uint(body, FEE_EXECUTED_AT);
        require(fee <= _uint(body, MAX_FEE_AT), "fee above maxFee");
        require(fee == 0 || fee < amount, "fee not below amount");
        uint256 expiration = _uint(body, EXPIRATION_BLOCK_AT);
        require(expiration == 0 || block.number < expiration, "message expired");

        address localToken = localTokenOf[_pairKey(remoteDomain, bytes32(body[BURN_TOKEN_AT:BURN_TOKEN_AT + 32]))];
        require(localToken != address(0) && isLocalToken[localToken], "no local token for the burn token");
        bytes32 recipientWord = bytes32(body[MINT_RECIPIENT_AT:MINT_RECIPIENT_AT + 32]);
        require(recipientWord != bytes32(0) && uint256(recipientWord) >> 160 == 0, "mint recipient is not an address");
        address recipient = address(uint160(uint256(recipientWord)));

        IMintBurnToken(localToken).mint(recipient, amount - fee);
        if (fee != 0) {
            IMintBurnToken(localToken).mint(feeRecipient, fee);
        }
        emit MintAndWithdraw(recipient, amount - fee, localToken, fee);
    }

    function _uint(bytes calldata data, uint256 at) private pure returns (uint256) {
        return uint256(bytes32(data[at:at + 32]));
    }
}
