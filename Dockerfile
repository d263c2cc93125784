# Container image for the storage version migrator (`svm`).
#   docker build -t svm .
#   docker run --rm -e TEMPORAL_ADDRESS=... -e KUBECONFIG=/kube/config \
#     -v ~/.kube/config:/kube/config:ro svm worker
#
# Stage 1 installs every dependency, compiles the TypeScript, bundles the
# workflow code once (dist/workflow-bundle.js: the worker loads it instead of
# running webpack at every start) and KubeConfig/Watch of @kubernetes/client-node
# without its generated API (dist/kube-client-node-<version>.js: ~30 MiB less
# RSS, src/kube/kubeconfig.ts) and the client commands in one file with its
# V8 code cache (dist/cli/svm-client.js: scripts/bundle-cli.mjs), then drops
# the dev dependencies, so the runtime stage only copies what it runs.

FROM node:20-bookworm-slim AS build
WORKDIR /app

# Dependencies first: this layer is reused until the lockfile changes. npm ci runs the prepare script
# (scripts/transpile.mjs), which finds no sources yet and does nothing: `npm run build` compiles below.
COPY package.json package-lock.json ./
COPY scripts/transpile.mjs scripts/bundle-cli.mjs ./scripts/
RUN npm ci --no-audit --no-fund

COPY tsconfig.json ./
COPY src ./src
COPY cli ./cli
COPY bin ./bin
COPY tools ./tools
COPY scripts/bundle-workflows.ts ./scripts/
# The revision `svm version` prints and the worker's default Worker Deployment build ID is made of
# (<version>-<revision>, docs/deploy.md "Upgrading svm"), in dist/revision: the build argument
# (docker build --build-arg SVM_GIT_REVISION=$(git rev-parse --short HEAD) .), else "c" and a digest of the
# compiled code and the lockfile, so that an image of other code never reuses an earlier image's build ID.
ARG SVM_GIT_REVISION=
# The runtime stage's NODE_OPTIONS: V8 takes the code cache that `npm run build` makes for the client commands
# (dist/cli/svm-client.js.cache, scripts/bundle-cli.mjs) only in a node started with the same flags.
ENV NODE_OPTIONS=--max-semi-space-size=2
RUN npm run build \
 && npm run build:workflows \
 && test -s dist/workflow-bundle.js \
 && test -s dist/cli/svm-client.js.cache \
 && ls dist/kube-client-node-*.js \
 && if [ -n "$SVM_GIT_REVISION" ]; then echo "$SVM_GIT_REVISION"; \
    else echo "c$( { find dist -type f -print0 | sort -z | xargs -0 sha256sum; sha256sum package-lock.json; } | sha256sum | cut -c1-12)"; fi > dist/revision \
 && npm prune --omit=dev --no-audit --no-fund \
 && npm cache clean --force \
 && if [ -e node_modules/tsx ] || [ -e node_modules/esbuild ]; then echo "tsx or esbuild left in the runtime's node_modules" >&2; exit 1; fi
# The Temporal SDK package carries its native module prebuilt for five
# platforms (~25 MB each); keep only the one this image runs on.
RUN keep="$(node -p "require('./node_modules/@temporalio/core-bridge/common.js').getPrebuiltTargetName()")" \
 && find node_modules/@temporalio/core-bridge/releases -mindepth 1 -maxdepth 1 ! -name "$keep" -exec rm -rf {} + \
 && test -f "node_modules/@temporalio/core-bridge/releases/$keep/index.node"

# Runtime stage: same base, no compiler, no dev dependencies (no tsx, no esbuild: `node bin/svm.js` runs the
# compiled dist/), no npm cache.
FROM node:20-bookworm-slim AS runtime
# The OCI labels: `npm run release` (scripts/release.ts) passes these; a plain build leaves them empty.
ARG SVM_VERSION=
ARG SVM_GIT_COMMIT=
ARG SVM_SOURCE=
ARG SVM_CREATED=
LABEL org.opencontainers.image.title="svm" \
      org.opencontainers.image.description="Kubernetes storage version migration as durable Temporal workflows" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${SVM_VERSION}" \
      org.opencontainers.image.revision="${SVM_GIT_COMMIT}" \
      org.opencontainers.image.source="${SVM_SOURCE}" \
      org.opencontainers.image.created="${SVM_CREATED}"
ENV NODE_ENV=production
# A small young generation from the start (the worker also caps it, SVM_SEMI_SPACE_MIB, but set at process
# start it saves ~35 MiB of peak RSS instead of ~15: bench/results, docs/benchmarks.md).
ENV NODE_OPTIONS=--max-semi-space-size=2
# At most 2 glibc malloc arenas: the Temporal core's threads would otherwise each get one, and their
# fragmentation grows the worker's RSS during a migration (~10-25 MiB of peak RSS: docs/benchmarks.md).
ENV MALLOC_ARENA_MAX=2
# glibc's fixed thresholds: a freed block of 128 KiB or more goes back to the kernel (mmap'd, or trimmed off the top
# of the heap) instead of glibc raising both thresholds to the largest block freed so far and keeping up to 64 MiB
# of free heap: ~7 MiB less RSS for the worker (and for any node process), no measurable CPU (docs/benchmarks.md).
ENV MALLOC_MMAP_THRESHOLD_=131072
ENV MALLOC_TRIM_THRESHOLD_=131072
WORKDIR /app

# Files stay owned by root: the runtime user can read them but not change them.
COPY --from=build /app/package.json /app/tsconfig.json ./
COPY --from=build /app/node_modules ./node_modules
# dist holds the compiled code and the prebuilt workflow bundle; the
# TypeScript sources stay behind (without them the worker takes the bundle
# as is, and could still bundle dist/src/workflows should it be missing).
COPY --from=build /app/dist ./dist
COPY --from=build /app/bin ./bin
COPY --from=build /app/tools ./tools

# Unprivileged user that the official Node images provide (uid/gid 1000).
USER node

# Prometheus metrics.
EXPOSE 9464

ENTRYPOINT ["node", "bin/svm.js"]
CMD ["worker"]
