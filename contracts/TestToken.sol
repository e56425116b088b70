// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// A plain ERC-20 for the local chain: the demo's and the tests' USDC and USDT (6 decimals).
/// Whoever deployed it may mint; everything else is the standard's transfer, approve and
/// transferFrom, each emitting the standard events. The deployer may also make other accounts
/// minters (a CCTP token messenger), which mint and burn what they hold.
contract TestToken {
    string public name;
    string public symbol;
    uint8 public immutable decimals;
    uint256 public totalSupply;
    address public immutable minter;

    mapping(address => uint256) public balanceOf;
    mapping(address => mapping(address => uint256)) public allowance;
    /// Minters besides the deployer. Declared after the others so that their storage slots stay
    /// where the tests expect them (`balanceOf` in slot 3).
    mapping(address => bool) public isMinter;

    event Transfer(address indexed from, address indexed to, uint256 value);
    event Approval(address indexed owner, address indexed spender, uint256 value);
    event MinterSet(address indexed account, bool allowed);

    constructor(string memory name_, string memory symbol_, uint8 decimals_) {
        name = name_;
        symbol = symbol_;
        decimals = decimals_;
        minter = msg.sender;
    }

    function mint(address to, uint256 value) external {
        require(msg.sender == minter || isMinter[msg.sender], "only the minter mints");
        totalSupply += value;
        balanceOf[to] += value;
        emit Transfer(address(0), to, value);
    }

    /// Lets `account` mint and burn (or stops it); the deployer only.
    function setMinter(address account, bool allowed) external {
        require(msg.sender == minter, "only the deployer sets minters");
        isMinter[account] = allowed;
        emit MinterSet(account, allowed);
    }

    /// Burns `value` of the caller's own tokens; minters only.
    function burn(uint256 value) external {
        require(msg.sender == minter || isMinter[msg.sender], "only a minter burns");
        require(balanceOf[msg.sender] >= value, "balance too small");
        balanceOf[msg.sender] -= value;
        totalSupply -= value;
        emit Transfer(msg.sender, address(0), value);
    }

    function transfer(address to, uint256 value) external returns (bool) {
        _move(msg.sender, to, value);
        return true;
    }

    function approve(address spender, uint256 value) external returns (bool) {
        allowance[msg.sender][spender] = value;
        emit Approval(msg.sender, spender, value);
        return true;
    }

    function transferFrom(address from, address to, uint256 value) external returns (bool) {
        uint256 allowed = allowance[from][msg.sender];
        require(allowed >= value, "allowance too small");
        if (allowed != type(uint256).max) {
            allowance[from][msg.sender] = allowed - value;
        }
        _move(from, to, value);
        return true;
    }

    function _move(address from, address to, uint256 value) private {
        require(to != address(0), "transfer to the zero address");
        require(balanceOf[from] >= value, "balance too small");
        balanceOf[from] -= value;
        balanceOf[to] += value;
        emit Transfer(from, to, value);
    }
}
