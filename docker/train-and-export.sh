#!/bin/sh
# Train a model and export the serving artifact that the API loads from SMCT_ARTIFACT.
# Arguments are passed on to `smct train` (e.g. --epochs 5); EXPORT_ARGS (word-split) to
# `smct export` (e.g. EXPORT_ARGS="--particles 100").
# TRAIN_SCALING (default window: each training window scaled by its own history, as the API
# scales a series, so the artifact serves series at any level; global: one scaler for the
# data set) is passed as --scaling where the data set has a choice (not air-quality, stock).
set -eu

dataset="${TRAIN_DATASET:-synthetic-1}"
root="${ARTIFACT_ROOT:-/artifacts}"
scaling="${TRAIN_SCALING:-window}"

case "${dataset}" in
  air-quality | stock) set -- "$@" ;;
  *) set -- --scaling "${scaling}" "$@" ;;
esac

echo "training on ${dataset} into ${root}/run"
smct train --dataset "${dataset}" --out "${root}/run" --no-progress "$@"

echo "exporting ${root}/run to ${root}/default"
# --force: a retraining replaces the artifact (running APIs keep theirs until restarted)
# shellcheck disable=SC2086
smct export --checkpoint "${root}/run" --out "${root}/default" --force ${EXPORT_ARGS:-}
echo "artifact ready: ${root}/default"
