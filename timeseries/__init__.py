"""Series data types shared by training, the CLI and serving: windows and their scaling
(series.py), and the reading of users' tables (tables.py). Imports nothing from training/ or
service/."""
