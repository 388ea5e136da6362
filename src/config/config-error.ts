/** One config mistake: the file (or environment variable), the field, why, and the line when it is known. */
export interface ConfigProblem {
  file: string;
  field: string;
  reason: string;
  line?: number;
}

/**
 * Config mistakes, always naming the file and the field so an operator can fix them without the
 * code, with the line in the file where it is known (config-lines.ts). One error carries every
 * mistake found in one pass, so a file with several is fixed in one edit, not one per attempt;
 * `file`, `field` and `reason` are the first one's.
 */
export class ConfigError extends Error {
  readonly problems: readonly ConfigProblem[];

  constructor(
    readonly file: string,
    readonly field: string,
    readonly reason: string,
    line?: number,
    more: readonly ConfigProblem[] = [],
  ) {
    const problems = [{ file, field, reason, ...(line === undefined ? {} : { line }) }, ...more];
    super(problems.map(describe).join('\n'));
    this.name = 'ConfigError';
    this.problems = problems;
  }

  /** One error for several mistakes (at least one), one line each in the message. */
  static of(problems: readonly ConfigProblem[]): ConfigError {
    const [first, ...rest] = problems;
    return new ConfigError(first!.file, first!.field, first!.reason, first!.line, rest);
  }
}

/** `gateway.yaml: gateway.port: must be at most 65535 (line 10)`. */
function describe(problem: ConfigProblem): string {
  const where = problem.field ? `${problem.file}: ${problem.field}: ` : `${problem.file}: `;
  return `${where}${problem.reason}${problem.line === undefined ? '' : ` (line ${problem.line})`}`;
}
