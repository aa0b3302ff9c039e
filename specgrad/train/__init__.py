"""Training a validated spec: its data (data.py, read by sources/: one module per data source), the trainer
(trainer.py) and the run folder it writes (run_folder.py)."""
