import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { NodeProcess } from './node-process.js';

export const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** The built CLI (`npm run build`); another build's can be passed as `cli` (the benchmark's --compare). */
export const CLI = fileURLToPath(new URL('../../dist/cli/main.js', import.meta.url));
export const CONFIG_DIR = fileURLToPath(new URL('../../config', import.meta.url));

type Env = Record<string, string | undefined>;

export interface TollgateOptions {
  cli?: string;
  execArgv?: string[];
  logFile?: string;
  name?: string;
}

/**
 * The environment of every tollgate process: PATH and the shipped config, then `env` (undefined
 * unsets). Node's compile cache folder passes through when the runner has one (vitest.config.ts
 * sets it for the suite): it spares each start compiling the same modules again.
 */
function tollgateEnv(env: Env): Env {
  const { NODE_COMPILE_CACHE, NODE_DISABLE_COMPILE_CACHE } = process.env;
  return { PATH: process.env.PATH, NODE_COMPILE_CACHE, NODE_DISABLE_COMPILE_CACHE, TOLLGATE_CONFIG_DIR: CONFIG_DIR, ...env };
}

/** A tollgate process (`gateway`, `backend`, `up`, …) of the built CLI. */
export function startTollgate(args: string[], env: Env, options: TollgateOptions = {}): NodeProcess {
  return NodeProcess.start({
    args: [options.cli ?? CLI, ...args],
    env: tollgateEnv(env),
    execArgv: options.execArgv,
    cwd: REPO_ROOT,
    logFile: options.logFile,
    name: options.name ?? `tollgate ${args.join(' ')}`,
  });
}

export interface GatewayHandle {
  process: NodeProcess;
  url: string;
  adminUrl: string;
}

/** A gateway on free ports (0: the OS picks), ready once it has logged both listening URLs. */
export async function startGateway(env: Env, options: TollgateOptions = {}): Promise<GatewayHandle> {
  const process = startTollgate(['gateway'], { GATEWAY_PORT: '0', ADMIN_PORT: '0', ...env }, options);
  const url = await process.listening('gateway');
  const adminUrl = String((await process.waitForLog('admin listening')).url);
  return { process, url, adminUrl };
}

/** The category backend on a free port, ready once it has logged its URL (needs LOG_LEVEL info or lower). */
export async function startBackend(env: Env = {}, options: TollgateOptions = {}): Promise<{ process: NodeProcess; url: string }> {
  const process = startTollgate(['backend'], { BACKEND_PORT: '0', ...env }, options);
  return { process, url: await process.listening('backend') };
}

/** Runs the CLI to completion (`keys …`, `check-config`). */
export function runCli(args: string[], env: Env, cli = CLI): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [cli, ...args], { cwd: REPO_ROOT, env: tollgateEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}
