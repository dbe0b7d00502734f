# Node 22 (maintenance LTS); Node 20 is past end of life.
FROM node:22-bookworm-slim
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm install --omit=dev --no-audit --no-fund
COPY tsconfig.json ./
COPY src ./src
ENV P_DATA_DIR=/data
EXPOSE 8000
STOPSIGNAL SIGTERM
CMD ["node", "--import", "tsx", "src/main.ts"]
