"""The SMC Transformer network: config (ModelConfig), smc_transformer (stochastic attention
and the observation model)."""
