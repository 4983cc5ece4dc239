"""The sans-IO MRC protocol core (work in progress: codec first; the endpoint API follows)."""
