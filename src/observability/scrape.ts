import { Registry, type RegistryContentType } from 'prom-client';

/**
 * The registry's page in the format the scraper asks for: OpenMetrics (with exemplars: the trace
 * ids of deferred-metrics.ts's histograms) when its Accept names application/openmetrics-text, as
 * Prometheus does when exemplar storage is on; else the Prometheus text format, as before.
 *
 * prom-client picks the format from the registry's content type, and in OpenMetrics mode it
 * strips `_total` from each counter's name, in place. So the switch is made for one page and
 * undone after it, and pages are rendered one at a time: a concurrent Prometheus scrape never sees
 * the registry switched.
 */
interface Page {
  contentType: string;
  body: string;
}

export function scraper(registry: Registry): (accept: string | undefined) => Promise<Page> {
  let queue: Promise<unknown> = Promise.resolve();
  return (accept) => {
    const openMetrics = accept !== undefined && accept.includes('application/openmetrics-text');
    const page = queue.then((): Promise<Page> => (openMetrics ? openMetricsPage(registry) : prometheusPage(registry)));
    queue = page.catch(() => undefined);
    return page;
  };
}

async function prometheusPage(registry: Registry) {
  return { contentType: registry.contentType, body: await registry.metrics() };
}

async function openMetricsPage(typed: Registry) {
  const registry = typed as unknown as Registry<RegistryContentType>;
  const metrics = registry.getMetricsAsArray() as unknown as Array<{ name: string }>;
  const names = metrics.map((metric) => metric.name);
  const previous = registry.contentType;
  registry.setContentType(Registry.OPENMETRICS_CONTENT_TYPE);
  try {
    return { contentType: Registry.OPENMETRICS_CONTENT_TYPE, body: await registry.metrics() };
  } finally {
    registry.setContentType(previous);
    metrics.forEach((metric, i) => (metric.name = names[i]!));
  }
}
