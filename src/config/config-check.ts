import { ConfigError, type ConfigProblem } from './config-error.js';
import { withLines } from './load.js';

/**
 * Runs config checks that do not depend on each other (gateway.yaml, plans.yaml, what is
 * compiled from them) and reports the mistakes of all of them in one ConfigError, each with its
 * line: an operator fixes every file in one edit instead of meeting one mistake per run.
 */
export class ConfigCheck {
  private readonly problems: ConfigProblem[] = [];

  constructor(private readonly dir: string) {}

  /** The step's result, or undefined when it found config mistakes (kept for `done`); other faults are thrown. */
  attempt<T>(step: () => T): T | undefined {
    try {
      return step();
    } catch (err) {
      const located = withLines(err, this.dir);
      if (!(located instanceof ConfigError)) throw located;
      this.problems.push(...located.problems);
      return undefined;
    }
  }

  /** Throws every mistake found, if any. */
  done(): void {
    if (this.problems.length > 0) throw ConfigError.of(this.problems);
  }
}
