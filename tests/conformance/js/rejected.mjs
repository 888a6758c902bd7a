// The node's checks in the order the state transition runs them (docs/conformance.md, "Rejected cases"),
// as far as the rejected vectors need: the reason code (and cause / field) a message gets on a fresh
// devnet chain whose state is the file's `state`.
import { ed25519 } from "@noble/curves/ed25519.js";
import { blake3 } from "@noble/hashes/blake3.js";
import { equalBytes } from "@noble/curves/utils.js";
import { CustodyError, custodyFromProto, hex, verifyCustody } from "./custody.mjs";
import { digestOf, typedDataOf } from "./typed.mjs";

const SIGNING = 2;
const AGENT = 3;
const CUSTODY = null;
// type number -> [body oneof case, weakest scope that may sign (null: custody-authorized), stale-checked]
export const REGISTRY = {
  1: ["projectCreate", SIGNING, true],
  2: ["projectMetadata", SIGNING, false],
  3: ["projectArchive", SIGNING, false],
  4: ["fork", SIGNING, true],
  5: ["projectRemove", SIGNING, false],
  10: ["refUpdate", AGENT, false],
  11: ["refDelete", AGENT, false],
  14: ["signerAdd", CUSTODY, false],
  15: ["signerRemove", CUSTODY, false],
  16: ["keychainAuthorize", CUSTODY, false],
  17: ["keychainRevoke", CUSTODY, false],
  20: ["commitBundle", AGENT, false],
  30: ["collaboratorAdd", SIGNING, true],
  31: ["collaboratorRemove", SIGNING, true],
  40: ["accountData", SIGNING, false],
  50: ["storageGrant", SIGNING, true],
  60: ["verificationAdd", SIGNING, true],
  61: ["verificationRemove", SIGNING, true],
  80: ["linkAdd", SIGNING, true],
  81: ["linkRemove", SIGNING, true],
  82: ["reactionAdd", SIGNING, true],
  83: ["reactionRemove", SIGNING, true],
  84: ["mergeRequestAdd", SIGNING, false],
  85: ["mergeRequestRemove", SIGNING, false],
};
export const DISABLED = [12, 13, 51, 62, 63];
const MAX_DRIFT = 300n;
const MAX_WINDOW = 3600n;

class Rejected extends Error {
  constructor(reason, values = {}) {
    super(reason);
    this.reason = reason;
    this.values = values;
  }
}

// The body checks the vectors exercise (node/state/structural.py has them all): [field, proto name, length].
const BODY_LENGTHS = {
  projectArchive: [["projectId", "project_id", 32]],
  projectRemove: [["projectId", "project_id", 32]],
};

function structure(data, network) {
  const kind = REGISTRY[data.type];
  if (!kind) throw new Rejected(DISABLED.includes(data.type) ? "DISABLED_MESSAGE_TYPE" : "UNKNOWN_MESSAGE_TYPE");
  if (data.network !== network) throw new Rejected("WRONG_NETWORK");
  if (data.body.case !== kind[0]) throw new Rejected("BODY_MISMATCH");
  if (data.ownerAddress.length !== 20) throw new Rejected("INVALID_FIELD", { field: "owner_address" });
  if (data.timestamp === 0n) throw new Rejected("INVALID_FIELD", { field: "timestamp" });
  for (const [name, field, length] of BODY_LENGTHS[kind[0]] ?? [])
    if (data.body.value[name].length !== length) throw new Rejected("INVALID_FIELD", { field });
  return kind;
}

function envelope(msg, canonical) {
  if (msg.dataBytes.length && !equalBytes(msg.dataBytes, canonical)) throw new Rejected("DATA_BYTES_MISMATCH");
  if (!equalBytes(msg.hash, blake3(canonical))) throw new Rejected("HASH_MISMATCH");
  if (msg.signer.length !== 32 || msg.signature.length !== 64) throw new Rejected("INVALID_SIGNATURE");
  if (!ed25519.verify(msg.signature, msg.hash, msg.signer)) throw new Rejected("INVALID_SIGNATURE");
}

function time(data, now, stale) {
  if (data.timestamp > now + MAX_DRIFT) throw new Rejected("FUTURE_TIMESTAMP");
  if (stale && data.timestamp + MAX_DRIFT < now) throw new Rejected("STALE_TIMESTAMP");
}

function custodyAuth(data, auth, now, state, policy) {
  if (auth.deadline <= auth.validAfter || auth.deadline - auth.validAfter > MAX_WINDOW)
    throw new Rejected("AUTH_WINDOW_INVALID");
  if (now < auth.validAfter) throw new Rejected("AUTH_NOT_YET_VALID");
  if (now > auth.deadline) throw new Rejected("AUTH_EXPIRED");
  const owner = hex(data.ownerAddress);
  if (auth.nonce !== BigInt(state.custody_nonces[owner] ?? 0)) throw new Rejected("NONCE_MISMATCH");
  let keyId;
  try {
    keyId = verifyCustody(custodyFromProto(auth.signature), digestOf(typedDataOf(data)), policy);
  } catch (e) {
    if (e instanceof CustodyError) throw new Rejected("CUSTODY_SIGNATURE_INVALID", { cause: e.reason });
    throw e;
  }
  // The root key (address == owner) is an implicit admin; these accounts have no other custody key.
  if (keyId !== owner) throw new Rejected("CUSTODY_KEY_UNKNOWN");
}

function handler(data, signer, now, state, policy) {
  const body = data.body.value;
  if (data.body.case === "signerAdd") {
    if (!equalBytes(signer, body.key)) throw new Rejected("INVALID_FIELD", { field: "signer" });
    return custodyAuth(data, body.auth, now, state, policy);
  }
  if (data.body.case === "verificationAdd") {
    const claim = {
      signature_type: 1,
      signature: body.claimSignature,
      public_key: new Uint8Array(),
      authenticator_data: new Uint8Array(),
      client_data_json: new Uint8Array(),
    };
    let address;
    try {
      address = verifyCustody(claim, digestOf(typedDataOf(data)), policy);
    } catch {
      throw new Rejected("INVALID_SIGNATURE");
    }
    if (address !== hex(body.address)) throw new Rejected("INVALID_SIGNATURE");
    throw new Rejected("NO_STORAGE"); // nobody in this state holds storage units
  }
  if (["signerRemove", "keychainAuthorize", "keychainRevoke"].includes(data.body.case))
    return custodyAuth(data, body.auth, now, state, policy);
  return undefined;
}

/** {reason, values} the node answers for `msg` at block time `now` (bigint), or null if it would accept it. */
export function classify(msg, canonical, now, doc) {
  const { state } = doc;
  const policy = { rp_id: state.webauthn_rp_id, allowed_origins: [] };
  const network = { NETWORK_MAINNET: 1, NETWORK_TESTNET: 2, NETWORK_DEVNET: 3 }[doc.network];
  try {
    const data = msg.data;
    const kind = structure(data, network);
    envelope(msg, canonical);
    time(data, now, kind[2]);
    if (kind[1] !== CUSTODY) {
      const owner = hex(data.ownerAddress);
      const known = state.registered_signers.some((s) => s.owner === owner && s.key === hex(msg.signer));
      if (!known) throw new Rejected("UNKNOWN_SIGNER");
    }
    handler(data, msg.signer, now, state, policy);
    return null;
  } catch (e) {
    if (e instanceof Rejected) return { reason: e.reason, values: e.values };
    throw e;
  }
}
