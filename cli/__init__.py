"""The `smct` command line, one module per command (cli/app.py assembles them)."""
