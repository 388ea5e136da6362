import { ConfigError } from '../config/config-error.js';
import { CliError } from './cli-error.js';
import { KEYS_USAGE } from './keys-usage.js';

// Each command imports its own modules when it runs, so `tollgate keys …` and `--help` do not load
// the gateway, the backend and their libraries (about half a second of CPU per CLI call).

const USAGE = `tollgate <command>

  up                    backend + gateway in one process (what \`npm start\` runs)
  gateway               the gateway alone (production)
  backend               the category backend alone
  keys <command>        manage API keys in Redis (see \`tollgate keys\`)
  usage export …        usage for invoicing, streamed as CSV or JSON Lines (see \`tollgate usage\`)
  check-config [DIR]    validate the config files and name those read (default: $TOLLGATE_CONFIG_DIR,
                        else ./config when it has a gateway.yaml, else the config shipped with tollgate)

Environment: REDIS_URL (or REDIS_CLUSTER_NODES, REDIS_SENTINELS), GATEWAY_PORT, ADMIN_PORT, BACKEND_PORT, UPSTREAM_URL, TOLLGATE_CONFIG_DIR, LOG_LEVEL,
TOLLGATE_ASSERTION_SECRET (and TOLLGATE_ASSERTION_SECRET_PREVIOUS while rotating; required by \`gateway\` and
\`backend\` unless TOLLGATE_DEV=1 marks a development machine), TOLLGATE_ADMIN_TOKENS (label:token,…: the admin API)`;

const out = (text: string) => process.stdout.write(text.endsWith('\n') ? text : `${text}\n`);

async function main(argv: string[]): Promise<void> {
  const [command, ...rest] = argv;
  const env = process.env;
  switch (command) {
    case 'up':
      return (await import('./serve-commands.js')).upFromEnv(env, out);
    case 'gateway':
      return (await import('./serve-commands.js')).gatewayCommand(env);
    case 'backend':
      return (await import('./backend-command.js')).backendCommand(env);
    case 'keys':
      return (await import('./keys-command.js')).keysCommand(rest, env, { out });
    case 'usage':
      return (await import('./usage-command.js')).usageCommand(rest, env);
    case 'check-config':
      return (await import('./check-config-command.js')).checkConfigCommand(rest, env, out);
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      out(`${USAGE}\n\n${KEYS_USAGE}`);
      return;
    default:
      throw new CliError(`unknown command "${command}"\n\n${USAGE}`, 2);
  }
}

main(process.argv.slice(2)).catch((err: unknown) => {
  if (err instanceof CliError || err instanceof ConfigError) {
    process.stderr.write(`tollgate: ${err.message}\n`);
    process.exit(err instanceof CliError ? err.exitCode : 1);
  }
  const code = (err as { code?: string }).code;
  if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' || code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE') {
    process.stderr.write(`tollgate: ${(err as Error).message}\n`);
    process.exit(2);
  }
  process.stderr.write(`tollgate: ${(err as Error)?.stack ?? String(err)}\n`);
  process.exit(1);
});
