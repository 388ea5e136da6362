# tollgate: one image for the gateway (default command) and the category backend (`backend`).
#   docker build -t tollgate .
#   docker run --rm -e REDIS_URL=redis://redis:6379 -e TOLLGATE_ASSERTION_SECRET=… tollgate
# See docker-compose.yml for the full topology and docs/operations.md for running it.

# Node 24, the active LTS line the suite runs on in CI (.ci/run); Node 20 is end of life.
ARG NODE_IMAGE=node:24-alpine

# 1. Compile the TypeScript (needs the dev dependencies).
FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
# --ignore-scripts: no dependency's install script runs in the build; we compile below.
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json ./
COPY src ./src
COPY scripts ./scripts
COPY openapi.yaml ./
RUN npx tsc -p tsconfig.json && node scripts/bundle-openapi.mjs

# 2. Production dependencies only (no compiler, no test tools), exactly as `npm install tollgate`
#    gets them: no dependency is patched, no install script runs.
FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force

# 3. Runtime: node, prod dependencies, compiled code, launcher and config. Runs as `node`, not root,
#    and owns none of its files (read-only root filesystems work).
FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production \
    TOLLGATE_CONFIG_DIR=/app/config \
    GATEWAY_PORT=8080 \
    BACKEND_PORT=8081 \
    ADMIN_PORT=9090
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
# openapi.yaml: the public interface the gateway serves at /v1/openapi.json; openapi-admin.yaml: the
# admin API's, at /admin/v1/openapi.json.
COPY package.json openapi.yaml openapi-admin.yaml ./
COPY bin ./bin
COPY config ./config
# The operator console's page, served by the admin listener under /admin/console.
COPY console ./console
USER node
# 8080 public gateway, 8081 category backend, 9090 admin (/healthz, /readyz, /metrics: never publish it).
EXPOSE 8080 8081 9090
# Liveness of the gateway's admin listener (curl is not in the image; node is). The backend
# has no admin port: docker-compose.yml gives it its own check.
HEALTHCHECK --interval=10s --timeout=3s --start-period=15s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.ADMIN_PORT||9090)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
ENTRYPOINT ["node", "bin/tollgate.js"]
CMD ["gateway"]
