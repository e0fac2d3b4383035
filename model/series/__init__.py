"""The per-series layer, one series at a time or a batch of them: state (its particle state and
the layer's statistics) with state_fields (its fields, declared once), state_format (the
state's bytes), state_legacy (the bytes before sections, still read) and state_bytes (what
the bytes of every version share), inputs (what a series accepts), scaling (its units and the
model's), support (the values it takes), gaps (missing values kept pending), scoring (each
value against the law issued for it), layer/ (the corrections as one model, run on a batch:
one module a correction) with their estimators (adaptation says which module holds which),
marginal, trend and shifts."""
