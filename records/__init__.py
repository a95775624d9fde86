"""What a run leaves on disk: the run directory, its records and the reports made from them."""
