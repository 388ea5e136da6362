import type { ErrorCode } from '../../errors/registry.js';

/**
 * A change refused by the key lifecycle (bad input, unknown key or plan). The admin API answers it
 * as the Error body of `code`; the CLI prints the message. Messages never hold a secret.
 */
export class LifecycleError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'LifecycleError';
  }
}
