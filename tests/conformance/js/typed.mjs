// The EIP-712 typed data a custody-authorized message signs, built from the message alone by the rules of
// docs/crypto.md (struct type strings, domain) and docs/conformance.md (field mapping): hashed with viem.
import { getAddress, hashTypedData } from "viem";
import { hex, unhex } from "./custody.mjs";

const DOMAIN = (chainId) => ({ name: "VersionControlChain", version: "1", chainId });

const STRUCTS = {
  SignerAdd: "address owner,bytes32 key,uint8 scope,bytes32[] allowedProjects,uint64 nonce,uint64 validAfter,uint64 deadline",
  SignerRemove: "address owner,bytes32 key,uint64 nonce,uint64 validAfter,uint64 deadline",
  KeychainAuthorize:
    "address owner,address keyId,uint8 signatureType,bytes publicKey,bool admin,uint64 expiresAt,uint64 nonce,uint64 validAfter,uint64 deadline",
  KeychainRevoke: "address owner,address keyId,uint64 nonce,uint64 validAfter,uint64 deadline",
  VerificationClaim: "address owner,address verifiedAddress,uint64 timestamp",
};

export const structFields = (name) =>
  STRUCTS[name].split(",").map((member) => {
    const [type, fieldName] = member.split(" ");
    return { name: fieldName, type };
  });

/** The typed data {domain, types, primaryType, message} of struct `name` (viem form). */
export function typedData(name, chainId, message) {
  return { domain: DOMAIN(chainId), types: { [name]: structFields(name) }, primaryType: name, message };
}

const window = (auth) => ({ nonce: auth.nonce, validAfter: auth.validAfter, deadline: auth.deadline });

/**
 * The typed data of a MessageData (protobuf-es object) whose body is custody-authorized or a
 * VERIFICATION_ADD, else null. Enums are their wire numbers (scope: KeyScope, signatureType: 1/2/3);
 * the claim's timestamp is MessageData.timestamp; the chainId is MessageData.network.
 */
export function typedDataOf(data) {
  const owner = getAddress(hex(data.ownerAddress));
  const body = data.body.value;
  switch (data.body.case) {
    case "signerAdd":
      return typedData("SignerAdd", data.network, {
        owner,
        key: hex(body.key),
        scope: body.scope,
        allowedProjects: body.allowedProjects.map(hex),
        ...window(body.auth),
      });
    case "signerRemove":
      return typedData("SignerRemove", data.network, { owner, key: hex(body.key), ...window(body.auth) });
    case "keychainAuthorize":
      return typedData("KeychainAuthorize", data.network, {
        owner,
        keyId: getAddress(hex(body.keyId)),
        signatureType: body.signatureType,
        publicKey: hex(body.publicKey),
        admin: body.admin,
        expiresAt: body.expiresAt,
        ...window(body.auth),
      });
    case "keychainRevoke":
      return typedData("KeychainRevoke", data.network, {
        owner,
        keyId: getAddress(hex(body.keyId)),
        ...window(body.auth),
      });
    case "verificationAdd":
      return typedData("VerificationClaim", data.network, {
        owner,
        verifiedAddress: getAddress(hex(body.address)),
        timestamp: data.timestamp,
      });
    default:
      return null;
  }
}

/** The 32-byte EIP-712 digest. */
export const digestOf = (typed) => unhex(hashTypedData(typed));
