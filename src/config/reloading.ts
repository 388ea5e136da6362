import { statSync, unwatchFile, watchFile, type Stats } from 'node:fs';
import { dirname } from 'node:path';
import type { Logger } from '../observability/log.js';
import { ConfigError } from './config-error.js';
import { withLines } from './load.js';

/**
 * How long a changed file must stay as it is (size, time, inode) before it is read. A writer that
 * truncates and then writes (`cp`, `>` in a shell, writeFileSync) leaves an empty or half-written
 * file for a moment; a poll that fell into it read that, and an empty gateway.yaml is a valid one
 * (every field defaults): one replica ran on the defaults, with no route costs or IP rules, until
 * the next poll (seen in test/integration/route-costs.test.ts).
 */
const SETTLE_MS = 200;

/**
 * A config value that follows its file: polled (stat every second, which also works on bind
 * mounts and Kubernetes ConfigMap symlink swaps where inotify does not) and reloaded on SIGHUP.
 * A change is read once the file has stayed the same for SETTLE_MS. A valid change replaces the
 * value between two requests; an invalid one is logged once, with every mistake and its line, and
 * the last good value stays in force.
 */
export class Reloading<T> {
  private value: T;
  private readonly listeners: Array<(value: T) => void> = [];
  private lastError = '';
  private readonly onSighup = () => this.reload('SIGHUP');
  private settling: NodeJS.Timeout | undefined;
  private readonly onStat = (now: Stats, before: Stats) => {
    if (changed(now, before)) this.changedTo(now);
  };

  constructor(
    private readonly path: string,
    private readonly load: () => T,
    private readonly logger: Logger,
    pollIntervalMs = 1000,
  ) {
    try {
      this.value = load();
    } catch (err) {
      throw withLines(err, dirname(path));
    }
    watchFile(path, { interval: pollIntervalMs, persistent: false }, this.onStat);
    process.on('SIGHUP', this.onSighup);
  }

  /**
   * The poll saw the file as `seen`: read it once it has stayed so for SETTLE_MS (a later change
   * starts the wait again). A file gone, or one stat cannot read (ELOOP, EACCES, EIO), is read
   * after the wait as it is: the read is refused and logged, as any refused reload.
   */
  changedTo(seen: Stats): void {
    clearTimeout(this.settling);
    this.settling = setTimeout(() => {
      this.settling = undefined;
      let now: Stats | undefined;
      try {
        now = statSync(this.path, { throwIfNoEntry: false });
      } catch {
        // (reload() below meets the same fault and logs it.)
      }
      if (now && changed(now, seen)) this.changedTo(now);
      else this.reload('file changed');
    }, SETTLE_MS);
    this.settling.unref();
  }

  current(): T {
    return this.value;
  }

  onChange(listener: (value: T) => void): void {
    this.listeners.push(listener);
  }

  reload(reason: string): boolean {
    let next: T;
    try {
      next = this.load();
    } catch (thrown) {
      const err = withLines(thrown, dirname(this.path));
      const message = err instanceof ConfigError ? err.message : String(err);
      // `errors`: one line per mistake, for a log reader that shows fields rather than a multi-line string.
      const errors = err instanceof ConfigError && err.problems.length > 1 ? { errors: message.split('\n') } : {};
      if (message !== this.lastError)
        this.logger.error({ reason, error: message, ...errors }, 'config reload refused; the previous config stays in force');
      this.lastError = message;
      return false;
    }
    this.lastError = '';
    this.value = next;
    this.logger.info({ file: this.path, reason }, 'config reloaded');
    for (const listener of this.listeners) listener(next);
    return true;
  }

  /**
   * Loads the file again if its last reload was refused: for a file checked against another one
   * (plan-services.ts), whose change may have made this file's refused content valid.
   */
  retryRefused(reason: string): boolean {
    return this.lastError !== '' && this.reload(reason);
  }

  close(): void {
    // Only this watcher: another Reloading may follow the same file.
    unwatchFile(this.path, this.onStat);
    clearTimeout(this.settling);
    process.off('SIGHUP', this.onSighup);
  }
}

function changed(now: Stats, before: Stats): boolean {
  return now.mtimeMs !== before.mtimeMs || now.size !== before.size || now.ino !== before.ino;
}
