# glassbox: one image for every role (GLASSBOX_ROLE=all, ingress or worker). docs/deploying.md says how
# to run it; scripts/offline-base-image.sh makes the base image where no registry is reachable.
ARG NODE_IMAGE=docker.io/library/node:20-bookworm-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /app
# better-sqlite3 compiles from source where its prebuilt binary cannot be downloaded (a closed
# network), against the headers that come with Node in the image.
RUN apt-get update \
  && apt-get install -y --no-install-recommends python3 make g++ \
  && rm -rf /var/lib/apt/lists/*
ENV npm_config_nodedir=/usr/local npm_config_fund=false npm_config_audit=false npm_config_update_notifier=false
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts && npm rebuild better-sqlite3
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build && npm prune --omit=dev

FROM ${NODE_IMAGE}
ARG VERSION=unknown
ARG SOURCE=unknown
LABEL org.opencontainers.image.title="glassbox" \
  org.opencontainers.image.description="A team chat bot built around an agent engine people can actually understand." \
  org.opencontainers.image.version="${VERSION}" \
  org.opencontainers.image.source="${SOURCE}" \
  org.opencontainers.image.licenses="MIT"
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY src/adapters/web/public ./src/adapters/web/public
COPY data/shop-seed.sql ./data/shop-seed.sql
# Everything the bot writes goes to /data, the one volume (the root file system may be read-only):
# the SQLite file, and temporary files (TMPDIR), a tool's or an MCP server's too.
# The web server listens on every address of the container, so its API needs GLASSBOX_API_TOKEN
# (without one glassbox does not start; the health port never asks for it).
ENV NODE_ENV=production \
  GLASSBOX_DB=/data/glassbox.db \
  GLASSBOX_WEB_HOST=0.0.0.0 \
  GLASSBOX_WEB_PORT=8787 \
  GLASSBOX_HEALTH_PORT=8788 \
  TMPDIR=/data/tmp
RUN mkdir -p /data/tmp && chown -R node:node /data
VOLUME /data
USER node
EXPOSE 8787 8788
# Node is PID 1: glassbox handles SIGTERM and SIGINT itself (a worker finishes or hands back its turns).
STOPSIGNAL SIGTERM
# Asks /readyz on GLASSBOX_HEALTH_PORT (else the web server's port), in every role.
HEALTHCHECK --interval=15s --timeout=5s --start-period=20s --retries=3 CMD ["node", "dist/healthcheck.js"]
ENTRYPOINT ["node", "dist/main.js"]
