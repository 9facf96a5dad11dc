"""rooftop: the headless core. Imports neither Textual nor torch, ever."""
__version__ = "0.1.0"
