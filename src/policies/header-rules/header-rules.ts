import type { HeaderRulesConfig } from './header-rules-schema.js';
import { compileValue, type CompiledValue, type HeaderValues } from './template.js';

/** Somewhere fields can be set and removed: request headers (an object) or a response. */
export interface FieldTarget {
  set(name: string, value: string): void;
  remove(name: string): void;
}

/**
 * One service's rules for one direction, compiled at load: removals first, then sets, so a value a
 * rule sets is never removed by another. Names are lower-cased (as Node keeps request fields).
 */
export class HeaderRules {
  private readonly set: ReadonlyArray<readonly [string, CompiledValue]>;
  private readonly remove: readonly string[];

  /** `config` was checked by the schema (names, values, variables). */
  constructor(config: NonNullable<HeaderRulesConfig>) {
    this.remove = config.remove.map((name) => name.toLowerCase());
    this.set = Object.entries(config.set).map(([name, value]) => {
      const compiled = compileValue(value);
      if (typeof compiled === 'object') throw new Error(`${name}: ${compiled.error}`);
      return [name.toLowerCase(), compiled] as const;
    });
  }

  apply(target: FieldTarget, values: HeaderValues): void {
    for (const name of this.remove) target.remove(name);
    for (const [name, value] of this.set) target.set(name, typeof value === 'string' ? value : value(values));
  }
}
