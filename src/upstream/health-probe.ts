import { request } from 'undici';
import type { Logger } from '../observability/log.js';
import type { Service } from './service.js';
import type { Target } from './target.js';

/**
 * Active health checks of the services that configure `healthCheck`: a GET of its path on every
 * target every `intervalMs`, on the target's own pool; a 2xx or 3xx within `timeoutMs` is good,
 * anything else (an error, a timeout, another status) bad. Thresholds in target-health.ts. Probes
 * are the only requests a service with no target in rotation sends (service.ts).
 */
export class HealthProbes {
  private timers: NodeJS.Timeout[] = [];
  /**
   * Targets whose probe has not ended: not probed again until it does. Else a target that never
   * answers had a probe more every interval, each holding a connection of the pool client
   * requests use, up to timeoutMs ÷ intervalMs of them.
   */
  private readonly probing = new Set<Target>();

  constructor(private readonly logger: Logger) {}

  /** Probes exactly these services from now on (called again on every reload). */
  watch(services: readonly Service[]): void {
    this.close();
    for (const service of services) {
      const check = service.config.healthCheck;
      if (!check) continue;
      const timer = setInterval(() => {
        for (const target of service.targets) if (!this.probing.has(target)) void this.probe(service, target);
      }, check.intervalMs);
      timer.unref();
      this.timers.push(timer);
    }
  }

  private async probe(service: Service, target: Target): Promise<void> {
    const check = service.config.healthCheck!;
    let ok: boolean;
    this.probing.add(target);
    try {
      const res = await request(target.origin + target.basePath + check.path, {
        dispatcher: target.pool,
        headersTimeout: check.timeoutMs,
        bodyTimeout: check.timeoutMs,
        signal: AbortSignal.timeout(check.timeoutMs),
      });
      await res.body.dump();
      ok = res.statusCode >= 200 && res.statusCode < 400;
    } catch {
      ok = false;
    } finally {
      this.probing.delete(target);
    }
    const changed = target.health.probed(ok, { healthy: check.healthyThreshold, unhealthy: check.unhealthyThreshold });
    if (changed)
      this.logger.warn(
        { service: service.name, target: target.url, healthy: ok },
        ok ? 'target healthy again' : 'target failed its health checks',
      );
  }

  close(): void {
    for (const timer of this.timers) clearInterval(timer);
    this.timers = [];
  }
}
