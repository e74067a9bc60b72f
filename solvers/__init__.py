"""solvers: choose optical circuits and collective routing jointly (OR-Tools)."""
