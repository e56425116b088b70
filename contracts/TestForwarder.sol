// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// Pays ether on from inside a contract call, as a multisig wallet or an exchange's forwarder
/// does: the payment is an internal transfer, with no transaction addressed to its receiver.
contract TestForwarder {
    error PaymentFailed();

    /// Sends everything this call carries to `to`.
    function forward(address payable to) external payable {
        (bool ok, ) = to.call{value: msg.value}("");
        if (!ok) revert PaymentFailed();
    }
}
