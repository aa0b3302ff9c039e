"""The specgrad command line (shipped as specgrad.cli)."""
