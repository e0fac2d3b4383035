"""One series: state (its particle state), state_format (the state's bytes), adaptation (the
estimators of its online adaptation)."""
