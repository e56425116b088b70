// Sets up the local chains for `scripts/dev`: on the anvil node at argv[2], deploys USDC and
// USDT (the TestToken contract, 6 decimals) and price feeds for the order currencies and ether
// (TestPriceFeed, Chainlink's interface), funds the demo customer wallet and the treasury
// (anvil's accounts 1 and 2) with both tokens and the custody gas address with ether, switches
// the node to a block every two seconds, and prints the worker's PAYRAIL_CHAINS, the demo
// wallet, the treasury's and the custody gas address on stdout. Each chain also gets a sanctions
// oracle (SanctionsList, the interface of Chainalysis's; the deployer owns it, so the demo and
// the tests can list an address), named in its network's `sanctions_oracle`. argv[3] (default
// polygon) is the network that takes the tokens, argv[4] (default base) the one that takes
// ether (anvil's accounts hold 10,000 each). argv[5], when given, is a second anvil node (another chain id)
// for the ether network, set up the same way with its own feeds: each network then has a chain
// of its own, as in production, and reconciliation counts each coin once; without it both
// networks are served by the first node.
//
// With two nodes, the ether network takes USDC too, and both get the project's CCTP V2
// contracts (contracts/Cctp*.sol: a message transmitter whose one attester is the local
// attester, LOCAL_ATTESTER below, and a token messenger that mints and burns the chain's USDC),
// linked to each other under Circle's domains for the two networks, so USDC paid on one can be
// settled on the other. Each network's `cctp` names its contracts and the local attestation
// service at argv[6] (default http://127.0.0.1:8547), and the output's `attestation` holds the
// arguments `xtask attestation` serves both chains with (scripts/dev and the tests start it).
//
// Everything is local: a fresh anvil gets the same contract addresses every time (same
// deployer, same nonces).
"use strict";
const fs = require("fs");
const path = require("path");

const tokenNode = process.argv[2];
const network = process.argv[3] || "polygon";
const etherNetwork = process.argv[4] || "base";
const etherNode = process.argv[5] || tokenNode;
const attestationUrl = process.argv[6] || "http://127.0.0.1:8547";
const contracts = path.resolve(__dirname, "..", ".cache", "contracts");
// Demo rates (USD per unit of the currency, 8 decimals): the local chain's feeds, not a market.
const FEEDS = {
  "EUR/USD": 108000000n,
  "GBP/USD": 127000000n,
  "CHF/USD": 113000000n,
  "JPY/USD": 670000n,
  "ETH/USD": 300000000000n,
  "POL/USD": 50000000n,
};
const MINTED = 1000000n * 1000000n; // one million of each token, 6 decimals
// The custody gas address of the local custody mnemonic (BIP39's "abandon … about"): child
// 2147483647 of m/44'/60'/0'/0, from which `xtask sweep` pays token deposits' gas.
const CUSTODY_GAS = "0x8848bfc75a28756b521b09afdc120bddddc7d7c9";
const CUSTODY_GAS_WEI = 10n * 10n ** 18n;
// The local attestation service's one attester: anvil's well-known account 9 (its key is
// public, like every key here; scripts/dev hands it to `xtask attestation`).
const LOCAL_ATTESTER = "0xa0ee7a142d267c1f36714e4a8f75612f20a79720";
// Circle's CCTP domains for the networks Payrail knows.
const CCTP_DOMAINS = { ethereum: 0, arbitrum: 3, base: 6, polygon: 7 };

let id = 0;
async function call(node, method, params) {
  const response = await fetch(node, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: ++id, method, params }),
  });
  const body = await response.json();
  if (body.error) throw new Error(`${method}: ${body.error.message}`);
  return body.result;
}

const word = (n) => BigInt(n).toString(16).padStart(64, "0");
const addressWord = (a) => a.toLowerCase().replace(/^0x/, "").padStart(64, "0");
function string(text) {
  const hex = Buffer.from(text, "utf8").toString("hex");
  return word(text.length) + hex.padEnd(Math.max(64, Math.ceil(hex.length / 64) * 64), "0");
}
const artefact = (name) => JSON.parse(fs.readFileSync(path.join(contracts, `${name}.json`), "utf8"));

async function send(rpc, from, to, data, value = 0n) {
  const tx = { from, data, gas: "0x2dc6c0", value: "0x" + value.toString(16) };
  if (to) tx.to = to;
  const hash = await rpc("eth_sendTransaction", [tx]);
  for (let i = 0; i < 100; i++) {
    const receipt = await rpc("eth_getTransactionReceipt", [hash]);
    if (receipt) {
      if (receipt.status !== "0x1") throw new Error(`transaction ${hash} reverted`);
      return receipt;
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`no receipt for ${hash}`);
}

// Sets up one node: waits for it, funds the custody gas address, deploys the price feeds and
// the tokens named in `symbols`, after `skip` transactions of the deployer to itself (a second
// chain's contracts then never share the first's addresses, so a contract of the wrong chain
// cannot pass unnoticed). Its JSON-RPC call, deployer, chain id, the customer's and the
// treasury's addresses, its tokens, its feeds and its sanctions oracle.
async function setUp(node, symbols, skip = 0) {
  const rpc = (method, params) => call(node, method, params);
  // The node was just started: give it up to ten seconds to answer.
  for (let i = 0; ; i++) {
    try {
      await rpc("eth_chainId", []);
      break;
    } catch (err) {
      if (i >= 100) throw err;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  const chainId = Number(BigInt(await rpc("eth_chainId", [])));
  const [deployer, customer, treasury] = await rpc("eth_accounts", []);
  const token = artefact("TestToken");
  const feed = artefact("TestPriceFeed");
  for (let i = 0; i < skip; i++) await send(rpc, deployer, deployer, "0x");
  const tokens = {};
  const names = { USDC: "USD Coin (local)", USDT: "Tether USD (local)" };
  for (const symbol of symbols) {
    const args = word(0x60) + word(0xa0) + word(6) + string(names[symbol]) + string(symbol);
    const receipt = await send(rpc, deployer, null, token.bytecode + args);
    tokens[symbol] = { address: receipt.contractAddress };
    const mint = token.selectors["mint(address,uint256)"];
    for (const holder of [customer, treasury])
      await send(rpc, deployer, receipt.contractAddress, "0x" + mint + addressWord(holder) + word(MINTED));
  }
  await send(rpc, deployer, CUSTODY_GAS, "0x", CUSTODY_GAS_WEI);
  const block = await rpc("eth_getBlockByNumber", ["latest", false]);
  const now = BigInt(block.timestamp);
  const feeds = {};
  for (const [pair, answer] of Object.entries(FEEDS)) {
    const receipt = await send(rpc, deployer, null, feed.bytecode + word(8) + word(0x40) + string(pair));
    const set = feed.selectors["set(int256,uint256)"];
    await send(rpc, deployer, receipt.contractAddress, "0x" + set + word(answer) + word(now));
    // The demo's feeds are set once: let them count for thirty days.
    feeds[pair] = { address: receipt.contractAddress, max_age_seconds: 30 * 86400 };
  }
  const oracle = await send(rpc, deployer, null, artefact("SanctionsList").bytecode);
  return { rpc, deployer, chainId, customer, treasury, tokens, feeds, oracle: oracle.contractAddress };
}

// Deploys the CCTP contracts on a set-up chain as CCTP domain `domain`: the transmitter (the
// local attester, threshold one) and the messenger paired with it, which burns and mints the
// chain's USDC and pays fast fees to the deployer.
async function deployCctp(chain, domain) {
  const { rpc, deployer } = chain;
  const transmitter = artefact("CctpMessageTransmitter");
  const messenger = artefact("CctpTokenMessenger");
  // constructor(uint32 domain, address[] attesters, uint256 threshold)
  const transmitterArgs = word(domain) + word(0x60) + word(1) + word(1) + addressWord(LOCAL_ATTESTER);
  const t = (await send(rpc, deployer, null, transmitter.bytecode + transmitterArgs)).contractAddress;
  // constructor(address transmitter, address feeRecipient)
  const m = (await send(rpc, deployer, null, messenger.bytecode + addressWord(t) + addressWord(deployer)))
    .contractAddress;
  const usdc = chain.tokens.USDC.address;
  await send(rpc, deployer, t, "0x" + transmitter.selectors["setTokenMessenger(address)"] + addressWord(m));
  await send(rpc, deployer, m, "0x" + messenger.selectors["setLocalToken(address,bool)"] + addressWord(usdc) + word(1));
  const setMinter = artefact("TestToken").selectors["setMinter(address,bool)"];
  await send(rpc, deployer, usdc, "0x" + setMinter + addressWord(m) + word(1));
  return { domain, contracts: { token_messenger: m, message_transmitter: t } };
}

// Lets `local`'s messenger send to and take messages from `remote`'s, minting local USDC for
// remote USDC burnt.
async function linkCctp(local, localCctp, remote, remoteCctp) {
  const messenger = artefact("CctpTokenMessenger");
  const { rpc, deployer } = local;
  const add = messenger.selectors["addRemoteTokenMessenger(uint32,bytes32)"];
  await send(rpc, deployer, localCctp.contracts.token_messenger,
    "0x" + add + word(remoteCctp.domain) + addressWord(remoteCctp.contracts.token_messenger));
  const link = messenger.selectors["linkTokenPair(address,uint32,bytes32)"];
  await send(rpc, deployer, localCctp.contracts.token_messenger,
    "0x" + link + addressWord(local.tokens.USDC.address) + word(remoteCctp.domain)
      + addressWord(remote.tokens.USDC.address));
}

async function main() {
  const twoNodes = etherNode !== tokenNode;
  const tokenChain = await setUp(tokenNode, ["USDC", "USDT"]);
  // With a chain of its own, the ether network has USDC too (CCTP settles it there).
  const etherChain = twoNodes ? await setUp(etherNode, ["USDC"], 1) : tokenChain;
  const { customer, treasury } = tokenChain;
  const tokenFeeds = Object.fromEntries(
    Object.entries(tokenChain.feeds).filter(([pair]) => pair !== "ETH/USD"),
  );
  // The node is also the URL a browser wallet is asked to add the local network with (on this
  // machine nothing in it is secret; in production public_rpc_url is a public endpoint).
  const chains = {
    [network]: {
      rpc_url: tokenNode, public_rpc_url: tokenNode, chain_id: tokenChain.chainId,
      confirmations: 2, tokens: tokenChain.tokens, feeds: tokenFeeds,
      sanctions_oracle: tokenChain.oracle,
    },
    [etherNetwork]: {
      rpc_url: etherNode, public_rpc_url: etherNode, chain_id: etherChain.chainId,
      confirmations: 2, native: "ETH", feeds: etherChain.feeds,
      sanctions_oracle: etherChain.oracle,
    },
  };
  const out = { chains, customer, treasury, custody_gas: CUSTODY_GAS };
  if (twoNodes) {
    chains[etherNetwork].tokens = etherChain.tokens;
    const tokenCctp = await deployCctp(tokenChain, CCTP_DOMAINS[network]);
    const etherCctp = await deployCctp(etherChain, CCTP_DOMAINS[etherNetwork]);
    await linkCctp(tokenChain, tokenCctp, etherChain, etherCctp);
    await linkCctp(etherChain, etherCctp, tokenChain, tokenCctp);
    // The treasury's one-time approval, as the operator gives it once per network in
    // production (OPERATIONS.md): each chain's messenger may burn the treasury's USDC.
    const approve = artefact("TestToken").selectors["approve(address,uint256)"];
    for (const [chain, cctp] of [[tokenChain, tokenCctp], [etherChain, etherCctp]])
      await send(chain.rpc, chain.treasury, chain.tokens.USDC.address,
        "0x" + approve + addressWord(cctp.contracts.token_messenger) + "f".repeat(64));
    chains[network].cctp = { ...tokenCctp.contracts, attestation_url: attestationUrl };
    chains[etherNetwork].cctp = { ...etherCctp.contracts, attestation_url: attestationUrl };
    // What `xtask attestation` serves: each chain as its domain, at its network's
    // confirmations (standard) and one (fast), and its transmitter.
    const listen = new URL(attestationUrl).host;
    out.attestation = ["--listen", listen];
    for (const [name, cctp] of [[network, tokenCctp], [etherNetwork, etherCctp]]) {
      const c = chains[name];
      out.attestation.push("--chain", `${cctp.domain}=${c.rpc_url},${c.confirmations},1`,
        "--transmitter", `${cctp.domain}=${cctp.contracts.message_transmitter}`);
    }
  }
  // Deployed: from now on a block every two seconds, like a real chain, so payments confirm by
  // themselves.
  for (const chain of twoNodes ? [tokenChain, etherChain] : [tokenChain])
    await chain.rpc("evm_setIntervalMining", [2]);
  process.stdout.write(JSON.stringify(out) + "\n");
}

main().catch((err) => {
  console.error(`local chain set-up failed: ${err.message}`);
  process.exit(1);
});
