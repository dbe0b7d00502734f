import { unsupported } from '../../errors.ts';

export type OtlpFormat = 'json' | 'protobuf';

/**
 * Content-Type → OTLP encoding. Parameters (`; charset=utf-8`) and letter case are ignored.
 * `application/protobuf` (the registered media type) is accepted next to OTLP's `application/x-protobuf`.
 */
export function otlpFormat(contentType: string | undefined): OtlpFormat {
  const mediaType = (contentType ?? '').split(';', 1)[0].trim().toLowerCase();
  if (mediaType === 'application/json') return 'json';
  if (mediaType === 'application/x-protobuf' || mediaType === 'application/protobuf') return 'protobuf';
  throw unsupported(
    `unsupported Content-Type "${contentType ?? ''}" for OTLP: use application/x-protobuf or application/json`,
  );
}

export { decodeBody } from '../compression.ts';
