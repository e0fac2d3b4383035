"""Saved models: artifact (the serving artifact and its manifest), checkpoint (a
checkpoint's config and weights), graphs (the two steps as modules to export), export (writes
an artifact and checks its ONNX graphs)."""
