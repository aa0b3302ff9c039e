"""Training a validated spec: its data (data.py), the trainer (trainer.py) and the run folder it writes
(run_folder.py)."""
