#!/usr/bin/env bash
# One command for the whole run on this machine, as a single-node Docker Swarm:
#   bash deploy/swarm/up.sh            build, make secrets, init the swarm, deploy the stack
#   docker service logs -f agentrl_trainer          follow the run
#   docker stack rm agentrl && docker swarm leave --force      take it all down
# Environment: AGENTRL_STACK (stack name, default agentrl), AGENTRL_SECRETS (folder of the
# secret files, default deploy/swarm/secrets), AGENTRL_RUNS (host folder of run folders,
# default /var/lib/agentrl/runs), AGENTRL_RUN_CONFIG (default deploy/swarm/run.yaml).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repository=$(cd "$here/../.." && pwd)
cd "$repository"
npm run build >/dev/null
node packages/cli/bin/agentrl.js env build --image os db runtime
export AGENTRL_SECRETS=${AGENTRL_SECRETS:-$here/secrets}
export AGENTRL_RUNS=${AGENTRL_RUNS:-/var/lib/agentrl/runs}
export AGENTRL_RUN_CONFIG=${AGENTRL_RUN_CONFIG:-$here/run.yaml}
mkdir -p "$AGENTRL_SECRETS" "$AGENTRL_RUNS" && chmod 700 "$AGENTRL_SECRETS"
for name in token api-key serve-key; do
  [ -s "$AGENTRL_SECRETS/$name" ] || node -e 'process.stdout.write(require("crypto").randomBytes(24).toString("hex"))' > "$AGENTRL_SECRETS/$name"
done
if [ "$(docker info --format '{{.Swarm.LocalNodeState}}')" != active ]; then
  docker swarm init --advertise-addr 127.0.0.1 >/dev/null
  echo "swarm initialised on this node (docker swarm join-token worker: how other machines join)"
fi
docker stack deploy -c "$here/stack.yml" "${AGENTRL_STACK:-agentrl}"
echo "stack ${AGENTRL_STACK:-agentrl} deployed: docker stack services ${AGENTRL_STACK:-agentrl}; the run folder: $AGENTRL_RUNS/agentrl"
