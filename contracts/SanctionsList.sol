// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// A sanctions oracle for the local chains with the interface of the one Chainalysis publishes
/// on EVM networks: `isSanctioned(address)`, and the owner's `addToSanctionsList(address[])` and
/// `removeFromSanctionsList(address[])`, each emitting its event. The local chain script and the
/// tests deploy it (the deployer owns it) so a test or the demo can list an address.
contract SanctionsList {
    address public immutable owner;

    mapping(address => bool) private listed;

    event SanctionedAddressesAdded(address[] addrs);
    event SanctionedAddressesRemoved(address[] addrs);

    constructor() {
        owner = msg.sender;
    }

    modifier onlyOwner() {
        require(msg.sender == owner, "only the owner changes the list");
        _;
    }

    function name() external pure returns (string memory) {
        return "Payrail local sanctions oracle";
    }

    function addToSanctionsList(address[] memory newSanctions) external onlyOwner {
        for (uint256 i = 0; i < newSanctions.length; i++) {
            listed[newSanctions[i]] = true;
        }
        emit SanctionedAddressesAdded(newSanctions);
    }

    function removeFromSanctionsList(address[] memory removeSanctions) external onlyOwner {
        for (uint256 i = 0; i < removeSanctions.length; i++) {
            listed[removeSanctions[i]] = false;
        }
        emit SanctionedAddressesRemoved(removeSanctions);
    }

    function isSanctioned(address addr) external view returns (bool) {
        return listed[addr];
    }
}
