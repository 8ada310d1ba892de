# One image for every role: `triode serve` (embedded), `triode gateway`, `triode worker`.
FROM node:22-bookworm-slim
WORKDIR /app
COPY . .
# The postinstall script copies the example models from npm packages and builds the workspaces.
RUN npm install --no-audit --no-fund && npm cache clean --force
EXPOSE 8000 8001 8002
# Not root: the image's files are read-only to the server (load overrides go to the temp dir).
USER node
# --initial-old-space-size: see the note in packages/cli/bin/triode.js.
ENTRYPOINT ["node", "--initial-old-space-size=128", "packages/cli/bin/triode.js"]
CMD ["serve", "--model-repository", "/app/model_repository"]
