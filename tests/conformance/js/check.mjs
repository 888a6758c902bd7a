// Second-language consumer of the conformance vectors: reproduces every vector of tests/conformance/v1
// with well-known JavaScript libraries (@noble/curves, @noble/hashes, viem, @bufbuild/protobuf) and the
// rules in docs/, never with the project's Python code. Exits 1 on any mismatch.
//
//   node tests/conformance/js/check.mjs [VECTORS_DIR]
import { readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { fromBinary, fromJson, toBinary } from "@bufbuild/protobuf";
import { ed25519 } from "@noble/curves/ed25519.js";
import { p256 } from "@noble/curves/nist.js";
import { secp256k1 } from "@noble/curves/secp256k1.js";
import { blake3 } from "@noble/hashes/blake3.js";
import { sha256 } from "@noble/hashes/sha2.js";
import { keccak_256 } from "@noble/hashes/sha3.js";
import { equalBytes } from "@noble/curves/utils.js";
import { concatBytes } from "@noble/hashes/utils.js";
import { hashDomain, hashStruct, hashTypedData } from "viem";
import { addressOf, custodyFromJson, custodyFromProto, hex, unhex, verifyCustody } from "./custody.mjs";
import { canonicalBytes, loadRegistry } from "./encoding.mjs";
import { documentedProof, verifyProof, verifyStorageQuota } from "./proofs.mjs";
import { classify } from "./rejected.mjs";
import { digestOf, structFields, typedDataOf } from "./typed.mjs";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
const DIR = resolve(process.argv[2] ?? join(ROOT, "tests", "conformance", "v1"));
const registry = loadRegistry(ROOT);
const schema = (name) => registry.getMessage(`chain.v1.${name}`);
const decode = (typeName, bytes) => fromBinary(registry.getMessage(typeName), bytes);

const failures = [];
let checks = 0;
function expect(where, what, got, want) {
  checks++;
  const same = got instanceof Uint8Array && want instanceof Uint8Array ? equalBytes(got, want) : got === want;
  if (!same) {
    const show = (v) => (v instanceof Uint8Array ? hex(v) : JSON.stringify(v, (_, x) => (typeof x === "bigint" ? `${x}` : x)));
    failures.push(`${where}: ${what}: got ${show(got)}, want ${show(want)}`);
  }
}
function guarded(where, fn) {
  try {
    fn();
  } catch (e) {
    failures.push(`${where}: threw ${e.stack ?? e}`);
  }
}

const load = (family) => {
  const doc = JSON.parse(readFileSync(join(DIR, `${family}.json`), "utf-8"));
  if (doc.family !== family || doc.version !== 1) throw new Error(`${family}.json: not a v1 ${family} file`);
  return doc;
};

// ---- messages: canonical encoding, BLAKE3 hash, Ed25519 envelope, custody typed data ----
function checkMessage(v, policy) {
  const where = `messages/${v.name}`;
  const msg = fromJson(schema("Message"), v.message, { registry });
  const want = unhex(v.data_bytes);
  expect(where, "canonical encoding (rule)", canonicalBytes(schema("MessageData"), msg.data), want);
  expect(where, "protobuf-es toBinary", toBinary(schema("MessageData"), msg.data), want);
  expect(where, "data_bytes", msg.dataBytes, want);
  expect(where, "hash = BLAKE3-256(data_bytes)", blake3(want), unhex(v.hash));
  expect(where, "hash field", msg.hash, unhex(v.hash));
  expect(where, "Ed25519 verify", ed25519.verify(msg.signature, msg.hash, msg.signer), true);
  const seed = unhex(v.signer_seed);
  expect(where, "signer = public key of seed", ed25519.getPublicKey(seed), msg.signer);
  expect(where, "Ed25519 signature (RFC 8032)", ed25519.sign(msg.hash, seed), unhex(v.signature));
  if (msg.data.body.case === "signerAdd") expect(where, "SIGNER_ADD signed by the added key", msg.signer, msg.data.body.value.key);
  if (!v.custody) return;
  const typed = typedDataOf(msg.data);
  expect(where, "typed data from the message", digestOf(typed), unhex(v.custody.digest));
  expect(where, "typed data of the vector", hashTypedData(v.custody.typed_data), v.custody.digest);
  const body = msg.data.body.value;
  const sig =
    msg.data.body.case === "verificationAdd"
      ? { ...custodyFromJson({ signature_type: 1, signature: hex(body.claimSignature), public_key: "0x", authenticator_data: "0x", client_data_json: "" }) }
      : custodyFromProto(body.auth.signature);
  expect(where, "custody key id", verifyCustody(sig, unhex(v.custody.digest), policy), v.custody.key_id);
}

function checkMessages() {
  const doc = load("messages");
  const policy = { rp_id: doc.genesis.webauthn_rp_id, allowed_origins: [] };
  for (const v of doc.vectors) guarded(`messages/${v.name}`, () => checkMessage(v, policy));
  const file = doc.devnet_authority_file;
  const wallet = secp256k1.getPublicKey(unhex(file.wallet_private_key), false).slice(1);
  expect("messages/authority", "address of wallet_private_key", addressOf(wallet), file.address);
  expect("messages/authority", "is the storage authority", file.address, doc.genesis.storage_authorities[0]);
  const grant = doc.vectors.find((v) => v.type === "MESSAGE_TYPE_STORAGE_GRANT");
  expect("messages/authority", "ed25519 key signs grants", hex(ed25519.getPublicKey(unhex(file.ed25519_private_key))), grant.signer);
  return doc.vectors.length;
}

// ---- custody: EIP-712 parts, secp256k1 / P-256 / WebAuthn signatures ----
function checkSignature(where, s, digest, policy) {
  expect(where, "key id", verifyCustody(custodyFromJson(s), digest, policy), s.key_id);
  const priv = unhex(s.private_key);
  if (s.signature_type === 1) {
    const rec = secp256k1.sign(digest, priv, { prehash: false, format: "recovered" });
    const rsv = concatBytes(rec.slice(1), Uint8Array.of(rec[0] + 27));
    expect(where, "secp256k1 RFC 6979 signature r|s|v", rsv, unhex(s.signature));
  } else if (s.signature_type === 2) {
    expect(where, "P-256 public key", p256.getPublicKey(priv, false).slice(1), unhex(s.public_key));
    expect(where, "P-256 RFC 6979 signature", p256.sign(digest, priv, { prehash: false }), unhex(s.signature));
  } else {
    const signed = concatBytes(unhex(s.authenticator_data), sha256(new TextEncoder().encode(s.client_data_json)));
    const der = unhex(s.authenticator_der_signature);
    expect(where, "authenticator's DER signature", p256.sign(signed, priv, { lowS: false, format: "der" }), der);
    const raw = p256.Signature.fromBytes(der, "der");
    const low = raw.s > p256.Point.CURVE().n / 2n ? new p256.Signature(raw.r, p256.Point.CURVE().n - raw.s) : raw;
    expect(where, "S normalized", low.toBytes("compact"), unhex(s.signature));
    expect(where, "was high-S", raw.s > p256.Point.CURVE().n / 2n, s.high_s_normalized);
  }
}

function checkCustody() {
  const doc = load("custody");
  const policy = doc.webauthn_policy;
  for (const v of doc.vectors) {
    const where = `custody/${v.name}`;
    guarded(where, () => {
      const { types, primaryType, domain, message } = v.typed_data;
      const fields = structFields(primaryType);
      expect(where, "struct members", JSON.stringify(types[primaryType]), JSON.stringify(fields));
      const encodeType = `${primaryType}(${fields.map((f) => `${f.type} ${f.name}`).join(",")})`;
      expect(where, "encodeType", encodeType, v.encode_type);
      expect(where, "typeHash", keccak_256(new TextEncoder().encode(encodeType)), unhex(v.type_hash));
      expect(where, "domain separator", hashDomain({ domain, types }), v.domain_separator);
      expect(where, "hashStruct", hashStruct({ data: message, primaryType, types }), v.hash_struct);
      expect(where, "digest", hashTypedData(v.typed_data), v.digest);
      v.signatures.forEach((s) => checkSignature(`${where}/${s.key}`, s, unhex(v.digest), policy));
    });
  }
  return doc.vectors.length;
}

// ---- proofs: the MerkleProof mapping, verification, storage quota ----
function checkProofs() {
  const doc = load("proofs");
  for (const v of doc.proofs) {
    const where = `proofs/${v.name}`;
    guarded(where, () => {
      const p = decode("chain.v1.MerkleProof", unhex(v.proof_proto));
      const j = v.proof;
      const fields = { key: p.key, value: p.value, bitmap: p.bitmap, other_path: p.otherPath, other_value_hash: p.otherValueHash };
      for (const [name, got] of Object.entries(fields)) expect(where, `proto field ${name}`, hex(got), j[name]);
      expect(where, "proto exists/depth/siblings", JSON.stringify([p.exists, p.depth, p.siblings.map(hex)]), JSON.stringify([j.exists, j.depth, j.siblings]));
      expect(where, "path = blake3(key)", blake3(p.key), unhex(v.path));
      expect(where, "verifies", verifyProof(documentedProof(p), unhex(v.root)), v.valid);
    });
  }
  for (const v of doc.storage_quota) {
    const where = `proofs/storage_quota/${v.name}`;
    guarded(where, () => {
      const bundle = decode("chain.v1.StorageQuotaProof", unhex(v.bundle_proto));
      expect(where, "active units", verifyStorageQuota(bundle, unhex(v.root), decode), v.active_units);
    });
  }
  return doc.proofs.length + doc.storage_quota.length;
}

// ---- rejected: the reason code each case gets ----
function checkRejected() {
  const doc = load("rejected");
  for (const c of doc.cases) {
    const where = `rejected/${c.name}`;
    guarded(where, () => {
      const msg = fromBinary(schema("Message"), unhex(c.message_proto));
      expect(where, "JSON form is the same message", hex(toBinary(schema("Message"), fromJson(schema("Message"), c.message, { registry }))), c.message_proto);
      const canonical = canonicalBytes(schema("MessageData"), msg.data);
      expect(where, "canonical data_bytes", canonical, unhex(c.data_bytes));
      const got = classify(msg, canonical, BigInt(c.block_time), doc);
      expect(where, "reason", got?.reason ?? "ACCEPTED", c.reason);
      for (const name of ["cause", "field"]) if (name in c) expect(where, name, got?.values?.[name], c[name]);
    });
  }
  return doc.cases.length;
}

const counts = { messages: checkMessages(), custody: checkCustody(), proofs: checkProofs(), rejected: checkRejected() };
for (const f of failures) console.error(`MISMATCH ${f}`);
console.log(JSON.stringify({ vectors: counts, checks, mismatches: failures.length }));
process.exit(failures.length ? 1 : 0);
