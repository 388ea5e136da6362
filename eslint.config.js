// ESLint (flat config): type-aware rules for the bugs a reviewer misses (promises nobody awaits,
// dead code) and the layering rule of ARCHITECTURE.md as import restrictions. Formatting is
// Prettier's job (.prettierrc.json), so no stylistic rules here.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

// The import graph flows one way: cli → gateway | admin | backend → auth, quota, identity, keys,
// upstream → store → config → policies, errors, observability, http. tracing (OpenTelemetry) sits beside
// observability, imported by gateway and backend. Each folder lists what it may never import.
const servers = ['gateway', 'admin', 'backend', 'cli'];
const FORBIDDEN = {
  'src/backend': ['gateway', 'admin', 'cli'],
  'src/gateway': ['backend', 'cli'],
  'src/admin': ['backend', 'cli'],
  // The console's server side: a leaf the admin API mounts; it never reaches back into it.
  'src/console': [...servers, 'quota', 'identity', 'keys', 'auth', 'store'],
  // Authenticators (API key, JWT): each turns a credential into one consumer.
  'src/auth': servers,
  'src/quota': servers,
  'src/identity': servers,
  'src/keys': servers,
  'src/upstream': [...servers, 'quota', 'identity', 'keys', 'auth', 'store'],
  'src/store': servers,
  // The response cache's storage side (stores, keys, coalescing, invalidation): below the gateway.
  'src/cache': [...servers, 'quota', 'identity', 'keys', 'auth'],
  'src/config': [...servers, 'quota', 'identity', 'keys', 'auth'],
  // Edge policies' schemas and compiled rules (CORS, IP rules, header rules, OpenAPI validation):
  // pure, imported by config (their schemas) and by the gateway's chain (their decisions).
  'src/policies': [...servers, 'quota', 'identity', 'keys', 'auth', 'store', 'config', 'upstream'],
  // The policy interface the package exports (src/index.ts): types, definePolicy, loading a policy's code.
  'src/plugins': [
    ...servers,
    'quota',
    'identity',
    'keys',
    'auth',
    'store',
    'config',
    'upstream',
    'cache',
    'policies',
    'observability',
    'http',
    'tracing',
  ],
  'src/errors': [...servers, 'quota', 'identity', 'keys', 'auth', 'store', 'config'],
  'src/observability': [...servers, 'quota', 'identity', 'keys', 'auth', 'store'],
  'src/http': [...servers, 'quota', 'identity', 'keys', 'auth', 'store'],
  'src/tracing': [...servers, 'quota', 'identity', 'keys', 'auth', 'upstream', 'store', 'config'],
};

// One config object per folder: flat config lets a later object replace a rule, not add to it.
const layers = Object.entries(FORBIDDEN).map(([folder, forbidden]) => ({
  files: [`${folder}/**/*.ts`],
  rules: {
    'no-restricted-imports': [
      'error',
      {
        patterns: [
          {
            regex: `(^|/)(${forbidden.join('|')})/`,
            message: `${folder} may not import ${forbidden.join(', ')} (ARCHITECTURE.md: layers)`,
          },
          { regex: '(^|/)(test|bench)/', message: 'product code never imports tests or the benchmark' },
        ],
      },
    ],
  },
}));

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'bench-results/**', 'coverage/**', 'vitest.config.ts'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: false }],
      '@typescript-eslint/await-thenable': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
      '@typescript-eslint/no-unnecessary-type-assertion': 'error',
      'no-unused-private-class-members': 'error',
      // Header and wire parsing match control characters on purpose.
      'no-control-regex': 'off',
    },
  },
  // V8 allocates a function literal assigned straight to a property (`ctx.x = () => …`) in the old
  // generation; on a per-request object it then holds the request's graph past every minor GC
  // (src/gateway/context.ts, ResponseRules). An object with a method, or a `const` first, does not.
  // Left out: files whose such assignments are made once at start, once per tunnel, or under test only.
  {
    files: ['src/**/*.ts'],
    ignores: ['src/gateway/start-gateway.ts', 'src/gateway/websocket-proxy.ts', 'src/gateway/test-faults.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        {
          selector: 'AssignmentExpression[left.type="MemberExpression"][right.type=/^(Arrow)?FunctionExpression$/]',
          message:
            'a function literal assigned to a property is allocated in the old generation: use a method, or a const first (src/gateway/context.ts, ResponseRules)',
        },
      ],
    },
  },
  {
    files: ['**/*.js', '**/*.cjs', '**/*.mjs'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: {
      ...tseslint.configs.disableTypeChecked.languageOptions,
      globals: { process: 'readonly', URL: 'readonly', console: 'readonly', setTimeout: 'readonly', clearTimeout: 'readonly' },
    },
  },
  {
    files: ['**/*.cjs'],
    languageOptions: { sourceType: 'commonjs', globals: { require: 'readonly', module: 'writable', __dirname: 'readonly' } },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
  // The operator console's page (plain ES modules served as they are): the browser's globals.
  {
    files: ['console/**/*.js'],
    languageOptions: {
      globals: Object.fromEntries(
        [
          'window',
          'document',
          'location',
          'navigator',
          'fetch',
          'URLSearchParams',
          'Node',
          'HTMLElement',
          'setInterval',
          'clearInterval',
        ].map((name) => [name, 'readonly']),
      ),
    },
  },
  // Policies loaded by gateways under test as a user's are, outside every tsconfig (test/tsconfig.json says why).
  { files: ['test/fixtures/policies/**/*.ts'], ...tseslint.configs.disableTypeChecked },
  // Tests read arbitrary JSON answers; typing each one buys nothing.
  { files: ['test/**/*.ts'], rules: { '@typescript-eslint/no-explicit-any': 'off' } },
  ...layers,
);
