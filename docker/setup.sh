#!/bin/sh
# One-shot setup of the dev stack (the compose `setup` service): create the questions index and the
# inference endpoint for the mounted model, index the shipped SemEval sample through the sidecar,
# write one evaluation run into the per-query results index, and import the Kibana dashboard.
# Every step is idempotent, so `docker compose up` can run it again. Stops at the first failure.
set -eu

: "${ESRERANK_ES_URL:?set ESRERANK_ES_URL}"
: "${ESRERANK_KIBANA_URL:?set ESRERANK_KIBANA_URL}"
: "${ESRERANK_SIDECAR_URL:?set ESRERANK_SIDECAR_URL}"
MODEL_DIR="${ESRERANK_MODEL_DIR_IN_CONTAINER:-/model}"
SAMPLE="${ESRERANK_SAMPLE:-/samples/semeval2016-task3/SemEval2016-Task3-CQA-QL-dev.xml}"

step() { printf '\n== %s\n' "$*"; }

step "esrerank es setup $MODEL_DIR (index, mappings, inference endpoint -> $ESRERANK_SIDECAR_URL)"
esrerank es setup "$MODEL_DIR" --sidecar "$ESRERANK_SIDECAR_URL" --recreate  # a re-run starts afresh

step "esrerank es index semeval:$SAMPLE"
esrerank es index "semeval:$SAMPLE" --sidecar "$ESRERANK_SIDECAR_URL"

if [ "${ESRERANK_SETUP_EVALUATE:-1}" = "1" ]; then
  step "esrerank es evaluate (one run in the per-query results index, for the dashboard)"
  esrerank es evaluate --task rerank --data "semeval:$SAMPLE" --rankers given,bm25,lmdirichlet,model,fused \
    --model "$MODEL_DIR" --sidecar "$ESRERANK_SIDECAR_URL" --json /tmp/evaluate.json --no-progress
fi

step "esrerank kibana import --kibana-url $ESRERANK_KIBANA_URL"
esrerank kibana import --kibana-url "$ESRERANK_KIBANA_URL" --wait 300

step "done: Kibana ${ESRERANK_PUBLIC_KIBANA_URL:-http://localhost:5601}/app/dashboards#/view/esrerank-ranking-comparison"
