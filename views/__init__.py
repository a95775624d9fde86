"""What a terminal shows: live progress, verdict and summary tables, the console."""
