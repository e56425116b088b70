// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// A price feed for the local chain with Chainlink's AggregatorV3Interface, whose answer the
/// deployer sets: the tests' source of rates (and of stale ones).
contract TestPriceFeed {
    uint8 public immutable decimals;
    string public description;
    uint256 public constant version = 4;
    address public immutable owner;

    uint80 private round;
    int256 private answer;
    uint256 private updatedAt;

    constructor(uint8 decimals_, string memory description_) {
        decimals = decimals_;
        description = description_;
        owner = msg.sender;
    }

    /// Sets the answer as of `updatedAt_` (a past time makes the feed stale).
    function set(int256 answer_, uint256 updatedAt_) external {
        require(msg.sender == owner, "only the owner sets the answer");
        round += 1;
        answer = answer_;
        updatedAt = updatedAt_;
    }

    function latestRoundData()
        external
        view
        returns (uint80 roundId, int256 answer_, uint256 startedAt, uint256 updatedAt_, uint80 answeredInRound)
    {
        return (round, answer, updatedAt, updatedAt, round);
    }
}
