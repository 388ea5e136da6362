/** A config problem, always naming the file and the field so an operator can fix it without the code. */
export class ConfigError extends Error {
  constructor(
    readonly file: string,
    readonly field: string,
    readonly reason: string,
  ) {
    super(field ? `${file}: ${field}: ${reason}` : `${file}: ${reason}`);
    this.name = 'ConfigError';
  }
}
