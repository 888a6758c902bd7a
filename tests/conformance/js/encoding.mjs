// Canonical MessageData encoding, written from the documented rule (docs/conformance.md): the protobuf
// wire format with fields in field-number order, proto3 defaults (0, "", empty bytes, false, empty lists)
// left out, a set oneof member always written (even when empty), repeated fields unpacked for bytes and
// messages. The schema (field numbers and types) comes from proto/chain/v1 through `buf build`.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createFileRegistry, fromBinary, ScalarType } from "@bufbuild/protobuf";
import { reflect } from "@bufbuild/protobuf/reflect";
import { FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";

/** The chain.v1 descriptors, built from the .proto files with the repository's buf. */
export function loadRegistry(root) {
  const dir = mkdtempSync(join(tmpdir(), "conformance-"));
  try {
    const out = join(dir, "chain.binpb");
    const buf = join(root, "node_modules", ".bin", "buf");
    execFileSync(buf, ["build", "proto", "--as-file-descriptor-set", "-o", out], { cwd: root, stdio: "pipe" });
    return createFileRegistry(fromBinary(FileDescriptorSetSchema, readFileSync(out)));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function varint(out, value) {
  let v = BigInt.asUintN(64, BigInt(value));
  while (v >= 0x80n) {
    out.push(Number(v & 0x7fn) | 0x80);
    v >>= 7n;
  }
  out.push(Number(v));
}

function tag(out, number, wireType) {
  varint(out, (number << 3) | wireType);
}

function lengthDelimited(out, number, bytes) {
  tag(out, number, 2);
  varint(out, bytes.length);
  for (const b of bytes) out.push(b);
}

function scalar(out, field, scalarType, value) {
  switch (scalarType) {
    case ScalarType.STRING:
      return lengthDelimited(out, field.number, new TextEncoder().encode(value));
    case ScalarType.BYTES:
      return lengthDelimited(out, field.number, value);
    case ScalarType.BOOL:
      tag(out, field.number, 0);
      return varint(out, value ? 1 : 0);
    case ScalarType.UINT64:
    case ScalarType.UINT32:
    case ScalarType.INT32:
    case ScalarType.INT64:
      tag(out, field.number, 0);
      return varint(out, value);
    default:
      throw new Error(`scalar type ${scalarType} is not used by chain.v1 messages`);
  }
}

function one(out, field, kind, value, scalarType) {
  if (kind === "message") return lengthDelimited(out, field.number, encodeCanonical(value));
  if (kind === "enum") {
    tag(out, field.number, 0);
    return varint(out, value);
  }
  return scalar(out, field, scalarType, value);
}

/** Canonical bytes of a reflected message (ReflectMessage). */
export function encodeCanonical(r) {
  const out = [];
  const fields = [...r.desc.fields].sort((a, b) => a.number - b.number);
  for (const field of fields) {
    if (!r.isSet(field)) continue;
    const value = r.get(field);
    if (field.fieldKind === "list") {
      const numeric = field.listKind === "enum" || (field.listKind === "scalar" && ![ScalarType.BYTES, ScalarType.STRING].includes(field.scalar));
      if (numeric) throw new Error(`packed repeated ${field.name} is not used by chain.v1 messages`);
      for (const item of value) one(out, field, field.listKind, item, field.scalar);
    } else if (field.fieldKind === "map") {
      throw new Error("maps are not used by chain.v1 messages");
    } else {
      one(out, field, field.fieldKind, value, field.scalar);
    }
  }
  return Uint8Array.from(out);
}

export function canonicalBytes(schema, message) {
  return encodeCanonical(reflect(schema, message));
}
