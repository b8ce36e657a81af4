"""vemu's benchmark experiments, one module each (bench.py runs them); common.py holds
what they share."""
