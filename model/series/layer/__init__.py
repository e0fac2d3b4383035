"""The per-series layer as one model: its corrections, one module each (base.py: what a
correction is), held in their order by the Layer (layer.py)."""
