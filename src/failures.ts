/**
 * What a failed flush, salvage or compaction step tells about the data. Only one answer may set
 * acknowledged data aside: DuckDB could not parse a WAL segment and says so naming that segment's own
 * file. Everything else (out of memory, out of file descriptors, a full or failing disk, anything not
 * recognised) is retried, because the same bytes will read once the resource is back; taking it for
 * damage would move valid, acknowledged rows out of reach (issue 18).
 */
export type FailureKind =
  /** The process (or DuckDB's budget) ran out of memory. */
  | 'memory'
  /** Out of file descriptors (EMFILE/ENFILE, or DuckDB's "Cannot open file … Too many open files"). */
  | 'files'
  /** The local disk is full (ENOSPC/EDQUOT, or DuckDB's temp files could not be written). */
  | 'disk'
  /** An I/O error that may pass (EIO, EAGAIN, EBUSY, interrupted or timed-out calls). */
  | 'io'
  /** DuckDB could not parse the bytes of one of the given files: the one kind that is damage. */
  | 'damaged'
  /** Anything else: not damage either, retried like a resource error. */
  | 'other';

const CODE_KIND: Record<string, FailureKind> = {
  ENOMEM: 'memory',
  EMFILE: 'files',
  ENFILE: 'files',
  ENOSPC: 'disk',
  EDQUOT: 'disk',
  EIO: 'io',
  EAGAIN: 'io',
  EBUSY: 'io',
  EINTR: 'io',
  ETIMEDOUT: 'io',
};

/** DuckDB and libc messages, checked in order (an "IO Error: Cannot open file …: Too many open files" is 'files'). */
const MESSAGE_KIND: [RegExp, FailureKind][] = [
  [/out of memory|failed to allocate|could not allocate|cannot allocate memory|std::bad_alloc|allocation failure/i, 'memory'],
  [/too many open files|EMFILE|ENFILE/i, 'files'],
  [/no space left on device|disk quota exceeded|ENOSPC|EDQUOT/i, 'disk'],
  [/input\/output error|resource temporarily unavailable|device or resource busy|interrupted system call|EIO\b|EAGAIN/i, 'io'],
];

/** DuckDB's parse errors of read_json: the message names the file whose bytes did not parse. */
const PARSE_ERROR = /^(Invalid Input Error|Conversion Error): (Malformed JSON|JSON transform error|.*could not (convert|parse))/i;

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * Classifies a failure. `ownFiles`: the files being read; the failure is 'damaged' only when it is a
 * parse error whose message names one of them (a resource error never is, whatever its wording).
 */
export function classifyFailure(err: unknown, ownFiles: string[] = []): FailureKind {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  if (typeof code === 'string' && CODE_KIND[code]) return CODE_KIND[code];
  const message = messageOf(err);
  for (const [pattern, kind] of MESSAGE_KIND) if (pattern.test(message)) return kind;
  if (PARSE_ERROR.test(message) && damagedFile(message, ownFiles) !== undefined) return 'damaged';
  return 'other';
}

/** The one of `files` a parse error names (DuckDB quotes the path: `in file "…"`). */
export function damagedFile(message: string, files: string[]): string | undefined {
  return files.find((f) => message.includes(`"${f}"`));
}

export const isDamage = (err: unknown, ownFiles: string[]) => classifyFailure(err, ownFiles) === 'damaged';
