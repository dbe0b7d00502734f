# The PromQL engine (promql/: Prometheus' engine, a native program each query worker starts), built in a Go stage.
FROM golang:1.26-bookworm AS promql
WORKDIR /src/promql
COPY promql/go.mod promql/go.sum ./
RUN go mod download
COPY promql/*.go ./
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/promql .

# Node 22 (maintenance LTS); Node 20 is past end of life.
FROM node:22-bookworm-slim
WORKDIR /app
COPY package.json package-lock.json ./
# Dev dependencies too: the web console and the service are built (esbuild) at build time, then they are pruned.
RUN npm install --no-audit --no-fund
COPY tsconfig.json ./
COPY src ./src
COPY console ./console
COPY scripts/build-console.ts scripts/build-service.ts scripts/build-promql.ts ./scripts/
COPY --from=promql /out ./promql-dist
RUN npm run build && npm prune --omit=dev --no-audit --no-fund
ENV P_DATA_DIR=/data
# 8000: HTTP (API, console, OTLP/HTTP, remote write); 4317: OTLP/gRPC (P_OTLP_GRPC_ADDR); 5432: the
# PostgreSQL wire protocol (P_PG_ADDR, docs/postgresql.md)
EXPOSE 8000 4317 5432
STOPSIGNAL SIGTERM
CMD ["node", "dist/main.js"]
