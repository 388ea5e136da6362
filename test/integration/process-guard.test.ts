import { spawn } from 'node:child_process';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../helpers/processes.js';

// The process guard keeps a server process alive through an error nothing caught (a stray stream
// 'error' event without a listener), logging it once with a count, instead of exiting.

const script = (root: string) => `
  const { guardProcess } = await import(${JSON.stringify(pathToFileURL(`${root}/dist/observability/process-guard.js`).href)});
  const { createLogger } = await import(${JSON.stringify(pathToFileURL(`${root}/dist/observability/log.js`).href)});
  const { PassThrough } = await import('node:stream');
  let count = 0;
  const logger = createLogger('info', 'guard-test');
  guardProcess(logger, () => count++);
  setTimeout(() => new PassThrough().emit('error', new Error('stray stream error')), 10);
  setTimeout(() => Promise.reject(new Error('stray rejection')), 20);
  setTimeout(() => { logger.flush(); console.log(JSON.stringify({ msg: 'still alive', count })); setTimeout(() => process.exit(0), 50); }, 100);
`;

describe('process guard', () => {
  it('logs and counts an uncaught stream error and an unhandled rejection, and the process keeps running', async () => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', script(REPO_ROOT)], { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk) => (output += chunk));
    child.stderr.on('data', (chunk) => (output += chunk));
    const code = await new Promise((resolve) => child.once('exit', resolve));
    expect(code, output).toBe(0);
    expect(output).toMatch(/"msg":"uncaught error \(process kept running\)"/);
    expect(output).toMatch(/stray stream error/);
    expect(output).toMatch(/"msg":"unhandled rejection \(process kept running\)"/);
    expect(output).toContain('{"msg":"still alive","count":2}');
  });
});
