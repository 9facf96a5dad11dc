"""A generated corpus of bad inputs for every reader rooftop has (see README.md)."""
