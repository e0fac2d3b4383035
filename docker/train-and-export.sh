#!/bin/sh
# Train a model and export the serving artifact that the API loads from SMCT_ARTIFACT.
# Extra arguments are passed on to `smct train` (e.g. --epochs 5).
set -eu

dataset="${TRAIN_DATASET:-synthetic-1}"
root="${ARTIFACT_ROOT:-/artifacts}"

echo "training on ${dataset} into ${root}/run"
smct train --dataset "${dataset}" --out "${root}/run" "$@"

echo "exporting ${root}/run to ${root}/default"
smct export --checkpoint "${root}/run" --out "${root}/default"
echo "artifact ready: ${root}/default"
