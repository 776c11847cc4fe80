#!/bin/sh
# The runtime image's entry point: `agentrl <arguments>`, after reading secrets from files as
# Docker Swarm and Kubernetes mount them: for each VAR below, VAR_FILE names a file holding VAR.
#   AGENTRL_API_KEY  (serve --api-key; the trainer's rollout.serverApiKey)
#   AGENTRL_TOKEN    (controller and worker token; the trainer's controller client)
#   AGENTRL_SERVE_KEY (the inference servers' weights key, which the trainer pushes with)
set -e
for name in AGENTRL_API_KEY AGENTRL_TOKEN AGENTRL_SERVE_KEY; do
  eval "file=\${${name}_FILE:-}"
  if [ -n "$file" ]; then
    [ -r "$file" ] || { echo "agentrl-entrypoint: ${name}_FILE=$file is not readable" >&2; exit 2; }
    export "$name=$(cat "$file")"
  fi
done
exec node /opt/agentrl/packages/cli/bin/agentrl.js "$@"
