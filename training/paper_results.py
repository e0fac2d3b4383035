"""The numbers published in the SMC Transformer paper (seeds/001), to print beside ours.

Table 1 / Table 3: synthetic Models I and II, unistep (mse, dist-mse); None where the paper
writes N.A. Table 2 / Table 5: multistep (mse, PICP_0.95, MPIW_0.95) and Table 4: unistep,
for the three real data sets we have (covid, air quality, stock). Keys are our model names;
the paper's Bayesian LSTM row of Table 1 is M = 10 and of Table 3 M = 3 (our setting, blitz's
default); its SMC Transformer row is M = 10 particles.
"""

from __future__ import annotations

Row = tuple[float | None, float | None]  # (mse, dist-mse)
Interval = tuple[float, float | None, float | None]  # (mse, PICP 0.95, MPIW 0.95)

#: Table 1 (and Table 3 for bayes-lstm M = 3): {dataset: {model: (mse, dist-mse)}}
SYNTHETIC: dict[str, dict[str, Row]] = {
    "synthetic-1": {
        "truth": (0.5, 0.50),
        "lstm": (0.50, None),
        "transformer": (0.52, None),
        "lstm-drop-0.1": (0.48, 0.004),
        "lstm-drop-0.5": (0.53, 0.03),
        "transformer-drop-0.1": (0.50, 0.02),
        "transformer-drop-0.5": (0.52, 0.05),
        "bayes-lstm": (0.55, 0.04),
        "smc-transformer": (0.52, 0.49),
    },
    "synthetic-2": {
        "truth": (0.3, 0.35),
        "lstm": (0.32, None),
        "transformer": (0.32, None),
        "lstm-drop-0.1": (0.32, 0.003),
        "lstm-drop-0.5": (0.33, 0.02),
        "transformer-drop-0.1": (0.31, 0.03),
        "transformer-drop-0.5": (0.33, 0.05),
        "bayes-lstm": (0.36, 0.05),
        "smc-transformer": (0.30, 0.35),
    },
}

#: Table 2 / Table 5, multistep: {dataset: {model: (mse, PICP_0.95, MPIW_0.95)}}
MULTISTEP: dict[str, dict[str, Interval]] = {
    "covid": {
        "lstm-drop-0.1": (0.150, 0.67, 0.61),
        "lstm-drop-0.5": (0.155, 0.80, 1.64),
        "transformer-drop-0.1": (0.121, 0.74, 0.74),
        "transformer-drop-0.5": (0.208, 0.84, 1.52),
        "bayes-lstm": (0.144, 0.15, 0.23),
        "smc-transformer": (0.128, 0.91, 1.85),
    },
    "air-quality": {
        "lstm-drop-0.1": (0.139, 0.54, 0.73),
        "lstm-drop-0.5": (0.211, 0.70, 1.31),
        "transformer-drop-0.1": (0.141, 0.69, 1.44),
        "transformer-drop-0.5": (0.196, 0.77, 1.97),
        "bayes-lstm": (0.192, 0.49, 0.72),
        "smc-transformer": (0.148, 0.97, 3.17),
    },
    "stock": {
        "lstm-drop-0.1": (0.065, 0.85, 0.74),
        "lstm-drop-0.5": (0.112, 0.87, 1.42),
        "transformer-drop-0.1": (0.076, 0.71, 0.54),
        "transformer-drop-0.5": (0.106, 0.83, 0.77),
        "bayes-lstm": (0.086, 0.34, 0.45),
        "smc-transformer": (0.071, 0.98, 1.80),
    },
}

#: Table 4, unistep: {dataset: {model: (mse, PICP_0.95, MPIW_0.95)}}; None = "-" in the paper
UNISTEP: dict[str, dict[str, Interval]] = {
    "covid": {
        "lstm": (0.117, None, None),
        "transformer": (0.116, None, None),
        "lstm-drop-0.1": (0.150, 0.77, 0.27),
        "lstm-drop-0.5": (0.155, 0.89, 0.63),
        "transformer-drop-0.1": (0.121, 0.96, 0.37),
        "transformer-drop-0.5": (0.208, 0.97, 0.76),
        "bayes-lstm": (0.144, 0.25, 0.12),
        "smc-transformer": (0.128, 0.997, 0.70),
    },
    "air-quality": {
        "lstm": (0.120, None, None),
        "transformer": (0.132, None, None),
        "lstm-drop-0.1": (0.139, 0.64, 0.40),
        "lstm-drop-0.5": (0.211, 0.86, 0.87),
        "transformer-drop-0.1": (0.141, 0.77, 0.47),
        "transformer-drop-0.5": (0.196, 0.96, 0.85),
        "bayes-lstm": (0.192, 0.77, 0.51),
        "smc-transformer": (0.148, 0.97, 1.54),
    },
    "stock": {
        "lstm": (0.055, None, None),
        "transformer": (0.068, None, None),
        "lstm-drop-0.1": (0.065, 0.93, 0.28),
        "lstm-drop-0.5": (0.112, 0.97, 0.108),
        "transformer-drop-0.1": (0.076, 0.93, 0.34),
        "transformer-drop-0.5": (0.106, 0.95, 0.63),
        "bayes-lstm": (0.086, 0.85, 0.22),
        "smc-transformer": (0.071, 0.99, 1.08),
    },
}
