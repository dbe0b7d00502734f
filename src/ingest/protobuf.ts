import protobuf from 'protobufjs';

/**
 * What the protobuf decoders of every ingest format share: lenient strings, and message types that are
 * this service's own (loaded from .proto files beside their decoder), set up once.
 */

/**
 * protobufjs 8 verifies proto3 strings and rejects the whole message on one invalid UTF-8 byte.
 * Prometheus' gogo-generated decoder and OpenTelemetry's collector do not, so a label value or an
 * attribute with a stray byte should not cost the batch it came in: such bytes become U+FFFD. A reader
 * subclass rather than a patch of Reader.prototype, so that other protobufjs users keep strict decoding.
 */
class LenientReader extends protobuf.BufferReader {
  override stringVerify(): string {
    return this.string();
  }
}

/** Decodes with lenient strings; the body of a Buffer-backed reader must be a Buffer. */
export function decodeMessage(type: protobuf.Type, bytes: Buffer): protobuf.Message {
  return type.decode(new LenientReader(bytes));
}

/**
 * Sets up every message type of a root now. Setting up a type replaces its `decode` with the generated
 * one; done later, that would replace a decoder installed in its place (a custom one, or the counting
 * wrapper of src/ingest/limits.ts).
 */
export function setupTypes(ns: protobuf.NamespaceBase): void {
  for (const t of ns.nestedArray) {
    if (t instanceof protobuf.Type) t.setup();
    if (t instanceof protobuf.Namespace || t instanceof protobuf.Type) setupTypes(t as protobuf.NamespaceBase);
  }
}

/** Every message type of a root, depth first. */
export function* messageTypes(ns: protobuf.NamespaceBase): Generator<protobuf.Type> {
  for (const t of ns.nestedArray) {
    if (t instanceof protobuf.Type) yield t;
    if (t instanceof protobuf.Namespace || t instanceof protobuf.Type) yield* messageTypes(t as protobuf.NamespaceBase);
  }
}
