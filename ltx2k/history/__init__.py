"""Results and history: asv results loaded and checked, the git results store, series."""
