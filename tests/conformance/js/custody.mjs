// Custody signatures over an EIP-712 digest (docs/crypto.md): secp256k1 (65-byte r|s|v, the key is
// recovered), P-256 (64-byte r|s over the digest itself) and WebAuthn (a passkey assertion whose challenge
// is base64url(digest)). Low-S everywhere. Each check returns the signing key's 20-byte address (hex) or
// throws a CustodyError naming the reason code the node gives.
import { p256 } from "@noble/curves/nist.js";
import { secp256k1 } from "@noble/curves/secp256k1.js";
import { sha256 } from "@noble/hashes/sha2.js";
import { keccak_256 } from "@noble/hashes/sha3.js";
import { bytesToHex, concatBytes, hexToBytes } from "@noble/hashes/utils.js";

export class CustodyError extends Error {
  constructor(reason, detail) {
    super(`${reason}: ${detail}`);
    this.reason = reason;
  }
}

export const unhex = (h) => hexToBytes(h.startsWith("0x") ? h.slice(2) : h);
export const hex = (b) => `0x${bytesToHex(b)}`;

const N = { secp256k1: secp256k1.Point.CURVE().n, p256: p256.Point.CURVE().n };

const big = (b) => BigInt(`0x${bytesToHex(b) || "0"}`);

/** Address of a 64-byte x‖y public key: the last 20 bytes of keccak256(x‖y). */
export const addressOf = (xy) => hex(keccak_256(xy).slice(12));

function scalars(rs, n) {
  const r = big(rs.slice(0, 32));
  const s = big(rs.slice(32, 64));
  if (!(r > 0n && r < n && s > 0n && s < n)) throw new CustodyError("MALFORMED_SIGNATURE", "scalar out of range");
  if (s > n / 2n) throw new CustodyError("HIGH_S_SIGNATURE", "s > n/2");
}

function xyOf(publicKey) {
  if (publicKey.length === 65 && publicKey[0] === 4) return publicKey.slice(1);
  if (publicKey.length !== 64) throw new CustodyError("MALFORMED_SIGNATURE", "public key must be 64 or 65 bytes");
  return publicKey;
}

function p256Verify(rs, hash, xy) {
  const ok = p256.verify(rs, hash, concatBytes(Uint8Array.of(4), xy), { prehash: false, lowS: true });
  if (!ok) throw new CustodyError("INVALID_SIGNATURE", "P-256 signature does not verify");
}

function secp256k1Key(sig, digest) {
  if (sig.length !== 65) throw new CustodyError("MALFORMED_SIGNATURE", "secp256k1 signature must be 65 bytes");
  const v = sig[64];
  const recovery = v >= 27 ? v - 27 : v;
  if (recovery !== 0 && recovery !== 1) throw new CustodyError("MALFORMED_SIGNATURE", `bad v ${v}`);
  scalars(sig.slice(0, 64), N.secp256k1);
  const recovered = concatBytes(Uint8Array.of(recovery), sig.slice(0, 64));
  const pub = secp256k1.recoverPublicKey(recovered, digest, { prehash: false });
  return addressOf(secp256k1.Point.fromBytes(pub).toBytes(false).slice(1));
}

const base64url = (b) => Buffer.from(b).toString("base64url");

function originAllowed(origin, policy) {
  if (policy.allowed_origins.length > 0) return policy.allowed_origins.includes(origin);
  const rp = policy.rp_id.replaceAll(".", "\\.");
  if (new RegExp(`^https://([a-z0-9]([a-z0-9-]*[a-z0-9])?\\.)*${rp}$`).test(origin)) return true;
  if (policy.rp_id === "localhost") {
    const m = /^http:\/\/localhost(?::([1-9][0-9]{0,4}))?$/.exec(origin);
    return m !== null && (m[1] === undefined || Number(m[1]) <= 65535);
  }
  return false;
}

/** The hash a WebAuthn signature covers, after the relying-party checks (steps 1-6 of docs/crypto.md). */
function webauthnSigned(authData, clientDataJson, digest, policy) {
  let client;
  try {
    client = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(clientDataJson));
  } catch (e) {
    throw new CustodyError("MALFORMED_SIGNATURE", `clientDataJSON: ${e.message}`);
  }
  if (client === null || typeof client !== "object" || Array.isArray(client))
    throw new CustodyError("MALFORMED_SIGNATURE", "clientDataJSON is not an object");
  if (client.type !== "webauthn.get") throw new CustodyError("WEBAUTHN_TYPE", client.type);
  if (client.challenge !== base64url(digest)) throw new CustodyError("WEBAUTHN_CHALLENGE", client.challenge);
  if (typeof client.origin !== "string" || !originAllowed(client.origin, policy))
    throw new CustodyError("WEBAUTHN_ORIGIN", String(client.origin));
  if ((client.crossOrigin ?? false) !== false) throw new CustodyError("WEBAUTHN_ORIGIN", "crossOrigin");
  if (authData.length < 37) throw new CustodyError("MALFORMED_SIGNATURE", "authenticatorData < 37 bytes");
  if (hex(authData.slice(0, 32)) !== hex(sha256(new TextEncoder().encode(policy.rp_id))))
    throw new CustodyError("WEBAUTHN_RP_ID", "rpIdHash");
  if ((authData[32] & 0x05) !== 0x05) throw new CustodyError("WEBAUTHN_FLAGS", `flags ${authData[32]}`);
  return sha256(concatBytes(authData, sha256(clientDataJson)));
}

/**
 * Verify a custody signature `{signature_type, signature, public_key, authenticator_data, client_data_json}`
 * (byte fields as Uint8Array) over the 32-byte digest; returns the key's address.
 */
export function verifyCustody(sig, digest, policy) {
  const empty = (name) => {
    if (sig[name].length) throw new CustodyError("MALFORMED_SIGNATURE", `${name} must be empty`);
  };
  if (sig.signature_type === 1) {
    ["public_key", "authenticator_data", "client_data_json"].forEach(empty);
    return secp256k1Key(sig.signature, digest);
  }
  if (sig.signature_type === 2) {
    ["authenticator_data", "client_data_json"].forEach(empty);
    if (sig.signature.length !== 64) throw new CustodyError("MALFORMED_SIGNATURE", "P-256 signature: 64 bytes");
    scalars(sig.signature, N.p256);
    const xy = xyOf(sig.public_key);
    p256Verify(sig.signature, digest, xy);
    return addressOf(xy);
  }
  if (sig.signature_type === 3) {
    let rs = sig.signature;
    if (rs.length !== 64) rs = p256.Signature.fromBytes(rs, "der").toBytes("compact");
    scalars(rs, N.p256);
    const xy = xyOf(sig.public_key);
    p256Verify(rs, webauthnSigned(sig.authenticator_data, sig.client_data_json, digest, policy), xy);
    return addressOf(xy);
  }
  throw new CustodyError("UNSUPPORTED_SIGNATURE_TYPE", String(sig.signature_type));
}

/** A vector's JSON signature (hex fields, clientDataJSON as text) as bytes. */
export function custodyFromJson(s) {
  return {
    signature_type: s.signature_type,
    signature: unhex(s.signature),
    public_key: unhex(s.public_key),
    authenticator_data: unhex(s.authenticator_data),
    client_data_json: new TextEncoder().encode(s.client_data_json),
  };
}

/** A protobuf-es chain.v1.CustodySignature as bytes. */
export function custodyFromProto(s) {
  return {
    signature_type: s.signatureType,
    signature: s.signature,
    public_key: s.publicKey,
    authenticator_data: s.authenticatorData,
    client_data_json: s.clientDataJson,
  };
}
