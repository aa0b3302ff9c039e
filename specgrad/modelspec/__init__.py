"""Specs: YAML model descriptions, from located text (loader.py) to checked models; one error type (errors.py)."""
