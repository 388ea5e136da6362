import { unwatchFile, watchFile, type Stats } from 'node:fs';
import type { Logger } from '../observability/log.js';
import { loadTlsMaterial, type TlsFiles, type TlsMaterial } from './tls-context.js';

/**
 * The listener's certificates follow their files, like the config (config/reloading.ts): each PEM
 * file is polled (stat every second: works on bind mounts and Kubernetes Secret symlink swaps where
 * inotify does not) and everything is read again on SIGHUP. A complete, matching set replaces the
 * one in force for new handshakes only (`server.setSecureContext`): established connections keep
 * the session they negotiated. A bad set (a missing file, a key that is not the certificate's, as
 * between the two writes of a non-atomic swap) is refused and logged once, and the old one stays.
 */
export class TlsContextReloader {
  private material: TlsMaterial;
  private lastError = '';
  private readonly paths: string[];
  private readonly onSighup = () => this.reload('SIGHUP');
  private readonly onStat = (now: Stats, before: Stats) => {
    if (now.mtimeMs !== before.mtimeMs || now.size !== before.size || now.ino !== before.ino) this.reload('file changed');
  };

  /** Throws when the files are not usable at start (the process must not come up without TLS). */
  constructor(
    private readonly files: TlsFiles,
    private readonly apply: (material: TlsMaterial) => void,
    private readonly logger: Logger,
    pollIntervalMs = 1000,
  ) {
    this.material = loadTlsMaterial(files);
    this.logLoaded('start');
    this.paths = [...new Set([files.cert, files.key, ...files.sni.flatMap((entry) => [entry.cert, entry.key])])];
    for (const path of this.paths) watchFile(path, { interval: pollIntervalMs, persistent: false }, this.onStat);
    process.on('SIGHUP', this.onSighup);
  }

  current(): TlsMaterial {
    return this.material;
  }

  reload(reason: string): boolean {
    let next: TlsMaterial;
    try {
      next = loadTlsMaterial(this.files);
    } catch (err) {
      const message = (err as Error).message;
      if (message !== this.lastError)
        this.logger.error({ reason, error: message }, 'TLS certificate reload refused; the certificates in force stay');
      this.lastError = message;
      return false;
    }
    this.lastError = '';
    const unchanged =
      next.default.fingerprint256 === this.material.default.fingerprint256 &&
      next.sni.length === this.material.sni.length &&
      next.sni.every((entry, i) => entry.pair.fingerprint256 === this.material.sni[i]!.pair.fingerprint256);
    this.material = next;
    this.apply(next);
    if (!unchanged || reason === 'SIGHUP') this.logLoaded(reason);
    return true;
  }

  close(): void {
    for (const path of this.paths) unwatchFile(path, this.onStat);
    process.off('SIGHUP', this.onSighup);
  }

  private logLoaded(reason: string): void {
    const { default: pair, sni } = this.material;
    this.logger.info(
      {
        reason,
        subject: pair.subject,
        fingerprint256: pair.fingerprint256,
        validTo: pair.validTo,
        sni: sni.map((entry) => ({ serverName: entry.serverName, fingerprint256: entry.pair.fingerprint256 })),
      },
      'TLS certificates loaded',
    );
  }
}
