// Sparse Merkle proof verification, written from docs/merkle.md ("Verification"), and the storage-quota
// bundle check of docs/state.md. Proofs are in the documented form: {key, value (null: exclusion),
// siblings, bitmap, depth, otherPath (null), otherValueHash (null)}, all bytes as Uint8Array.
import { blake3 } from "@noble/hashes/blake3.js";
import { equalBytes } from "@noble/curves/utils.js";
import { concatBytes } from "@noble/hashes/utils.js";

const EMPTY = new Uint8Array(32);
const bit = (bytes, d) => (bytes[d >> 3] >> (7 - (d & 7))) & 1;
const leaf = (path, valueHash) => blake3(concatBytes(Uint8Array.of(0), path, valueHash));
const internal = (left, right) => blake3(concatBytes(Uint8Array.of(1), left, right));

/** The MerkleProof protobuf (protobuf-es object) as the documented proof: `exists` and empty bytes become null. */
export function documentedProof(p) {
  return {
    key: p.key,
    value: p.exists ? p.value : null,
    siblings: p.siblings,
    bitmap: p.bitmap,
    depth: p.depth,
    otherPath: p.otherPath.length ? p.otherPath : null,
    otherValueHash: p.otherValueHash.length ? p.otherValueHash : null,
  };
}

/** The recomputed root, or null when the proof is malformed (step 1). */
export function proofRoot(p) {
  const { depth, bitmap, siblings } = p;
  if (!Number.isInteger(depth) || depth < 0 || depth > 256 || bitmap.length !== 32) return null;
  let set = 0;
  for (let d = 0; d < 256; d++) {
    if (!bit(bitmap, d)) continue;
    if (d >= depth) return null;
    set++;
  }
  if (set !== siblings.length || siblings.some((s) => s.length !== 32 || equalBytes(s, EMPTY))) return null;
  if (depth > 0 && !bit(bitmap, depth - 1)) return null;
  const path = blake3(p.key);
  let node;
  if (p.value !== null) {
    if (p.otherPath !== null || p.otherValueHash !== null) return null;
    node = leaf(path, blake3(p.value));
  } else if (p.otherPath === null && p.otherValueHash === null) {
    node = EMPTY;
  } else {
    const { otherPath, otherValueHash } = p;
    if (otherPath === null || otherValueHash === null || otherPath.length !== 32 || otherValueHash.length !== 32)
      return null;
    if (equalBytes(otherPath, path)) return null;
    for (let d = 0; d < depth; d++) if (bit(otherPath, d) !== bit(path, d)) return null;
    node = leaf(otherPath, otherValueHash);
  }
  let next = 0;
  for (let d = depth - 1; d >= 0; d--) {
    const sibling = bit(bitmap, d) ? siblings[next++] : EMPTY;
    node = bit(path, d) ? internal(sibling, node) : internal(node, sibling);
  }
  return node;
}

export function verifyProof(p, root) {
  const computed = proofRoot(p);
  return computed !== null && root.length === 32 && equalBytes(computed, root);
}

const ACCOUNT = 0x01;
const GRANT = 0x0c;
const GRANT_INDEX = 0x0d;

/**
 * Active storage units proven by a StorageQuotaProof (protobuf-es object) against `root`, or null.
 * `decode(typeName, bytes)` parses a chain.v1 record.
 */
export function verifyStorageQuota(bundle, root, decode) {
  const owner = bundle.ownerAddress;
  const keyed = (prefix, ...parts) => concatBytes(Uint8Array.of(prefix), owner, ...parts);
  const ok = (proto, key) => equalBytes(proto.key, key) && verifyProof(documentedProof(proto), root);
  if (!equalBytes(bundle.stateRoot, root)) return null;
  if (!bundle.accountProof || !ok(bundle.accountProof, keyed(ACCOUNT))) return null;
  if (!bundle.indexProof || !ok(bundle.indexProof, keyed(GRANT_INDEX))) return null;
  const index = bundle.indexProof.exists ? decode("chain.v1.StorageGrantIndex", bundle.indexProof.value) : null;
  let units = 0;
  for (const grantId of index ? index.grantIds : []) {
    const key = keyed(GRANT, grantId);
    const proof = bundle.grantProofs.find((p) => equalBytes(p.key, key));
    if (!proof || !proof.exists || !ok(proof, key)) return null;
    const grant = decode("chain.v1.StorageGrant", proof.value);
    if (grant.expiresAt > bundle.blockTimestamp) units += grant.units;
  }
  return units === bundle.activeUnits ? units : null;
}
