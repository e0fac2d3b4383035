"""The names and format versions of what smct writes into a model's directory, in one place.

Every directory holds a MANIFEST (JSON) whose "type" says what it is and whose
"format_version" says how to read it; a reader refuses another version with a message to
re-export. Three kinds:

- an exported SMC Transformer (model/artifacts/artifact.py): ARTIFACT_TYPE, ARTIFACT_VERSION,
  its weights in WEIGHTS beside the noise table and the ONNX graphs;
- a served baseline (model/runtime/serving/baseline_artifact.py): BASELINE_TYPE,
  BASELINE_VERSION, the saved forecaster in its own folder;
- a saved baseline forecaster (model/baselines/base.py): the baseline's name as its type,
  FORECASTER_VERSION, its weights in WEIGHTS.

A series' state has a format of its own (model/series/state_format.py).
"""

from __future__ import annotations

MANIFEST = "manifest.json"
WEIGHTS = "weights.pt"
ARTIFACT_TYPE, ARTIFACT_VERSION = "smct-artifact", 2
BASELINE_TYPE, BASELINE_VERSION = "smct-baseline", 1
FORECASTER_VERSION = 1
